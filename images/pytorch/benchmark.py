#!/usr/bin/env python3
"""perfsweep PyTorch benchmark.

Times training or inference batches of a model on synthetic data and prints
exactly one result line for perfsweep to parse
(benchmarks/src/kinds/pytorch/parse.rs):

    PERFSWEEP_RESULT {"schemaVersion": 1, "model": "resnet50", ...}

Everything else goes to stderr. Models: torchvision alexnet/resnet50, and a
small LLaMA-style decoder (RMSNorm, rotary embeddings, SwiGLU MLP, causal
attention) built from plain torch.nn.
"""

import argparse
import json
import math
import resource
import statistics
import sys
import time

RESULT_PREFIX = "PERFSWEEP_RESULT "
SCHEMA_VERSION = 1


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["alexnet", "resnet50", "llama"], required=True)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--type", dest="benchmark_type", choices=["train", "eval"], default="eval")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--gpus", type=int, default=1,
                   help="cuda: GPUs to use (the batch is split across them)")
    p.add_argument("--iterations", type=int, default=20, help="measured batches")
    p.add_argument("--warmup", type=int, default=5, help="untimed batches first")
    p.add_argument("--small", action="store_true",
                   help="llama: tiny configuration (fast on CPU, for tests)")
    p.add_argument("--seq-len", type=int, default=None, help="llama: tokens per sample")
    p.add_argument("--image-size", type=int, default=224, help="alexnet/resnet50 input size")
    args = p.parse_args(argv)
    for name in ("batch_size", "iterations"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if args.device == "cuda" and args.gpus < 1:
        p.error("--gpus must be at least 1 with --device cuda")
    return args


def percentile(sorted_values, q):
    """Linear-interpolation percentile (same as numpy's default)."""
    if not sorted_values:
        return 0.0
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def peak_cpu_memory_bytes():
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def format_result_line(result):
    """The line perfsweep parses. Non-finite numbers are refused (JSON has
    no NaN) rather than silently printed."""
    return RESULT_PREFIX + json.dumps(result, allow_nan=False, separators=(", ", ": "))


def build_result(args, batch_times, wall_seconds, peak_gpu_bytes, torch_version):
    ordered = sorted(batch_times)
    mean = statistics.fmean(batch_times)
    return {
        "schemaVersion": SCHEMA_VERSION,
        "model": args.model,
        "device": args.device,
        "benchmarkType": args.benchmark_type,
        "batchSize": args.batch_size,
        "iterations": args.iterations,
        "warmup": args.warmup,
        "timePerBatchSeconds": {
            "mean": mean,
            "p50": percentile(ordered, 50),
            "p90": percentile(ordered, 90),
        },
        "throughputSamplesPerSecond": args.batch_size / mean if mean > 0 else 0.0,
        "peakCpuMemoryBytes": peak_cpu_memory_bytes(),
        "peakGpuMemoryBytes": peak_gpu_bytes,
        "wallTimeSeconds": wall_seconds,
        "torchVersion": torch_version,
        "gpus": args.gpus if args.device == "cuda" else 0,
    }


def build_llama(torch, small):
    nn = torch.nn
    F = torch.nn.functional
    if small:
        dim, layers, heads, vocab, hidden = 64, 2, 4, 256, 172
    else:
        dim, layers, heads, vocab, hidden = 512, 8, 8, 32000, 1376

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotary(x, base=10000.0):
        # x: (batch, heads, seq, head_dim)
        _, _, seq, hd = x.shape
        inv = 1.0 / (base ** (torch.arange(0, hd, 2, device=x.device, dtype=torch.float32) / hd))
        t = torch.arange(seq, device=x.device, dtype=torch.float32)
        freqs = torch.outer(t, inv)
        cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return out.flatten(-2)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim, bias=False)
            self.out = nn.Linear(dim, dim, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
            q, k = rotary(q), rotary(k)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(b, s, dim))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(dim, hidden, bias=False)
            self.up = nn.Linear(dim, hidden, bias=False)
            self.down = nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            return self.down(F.silu(self.gate(x)) * self.up(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm, self.attn = RMSNorm(dim), Attention()
            self.ff_norm, self.ff = RMSNorm(dim), FeedForward()

        def forward(self, x):
            x = x + self.attn(self.attn_norm(x))
            return x + self.ff(self.ff_norm(x))

    class TinyLlama(nn.Module):
        def __init__(self):
            super().__init__()
            self.vocab = vocab
            self.embed = nn.Embedding(vocab, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = RMSNorm(dim)
            self.lm_head = nn.Linear(dim, vocab, bias=False)

        def forward(self, tokens):
            x = self.embed(tokens)
            for blk in self.blocks:
                x = blk(x)
            return self.lm_head(self.norm(x))

    return TinyLlama()


def make_workload(torch, args):
    """Returns (model, inputs, targets, loss_fn)."""
    if args.model == "llama":
        model = build_llama(torch, args.small)
        seq = args.seq_len or (32 if args.small else 256)
        inputs = torch.randint(0, model.vocab, (args.batch_size, seq))
        targets = torch.randint(0, model.vocab, (args.batch_size, seq))

        def loss_fn(out, tgt):
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tgt.reshape(-1))
    else:
        import torchvision

        model = getattr(torchvision.models, args.model)(weights=None)
        inputs = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
        targets = torch.randint(0, 1000, (args.batch_size,))
        loss_fn = torch.nn.functional.cross_entropy
    return model, inputs, targets, loss_fn


def missing(message):
    """Says on stdout (which perfsweep's agent quotes when the tool fails) what is
    missing, and exits."""
    print(f"error: {message}", flush=True)
    raise SystemExit(3)


def import_torch(args):
    try:
        import torch
    except ImportError as e:
        missing(f"PyTorch is not installed for {sys.executable} ({e}): install the Debian "
                "package python3-torch (apt-get install python3-torch) or run the "
                "ghcr.io/perfsweep/pytorch image")
    if args.model == "llama" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        missing(f"the llama model needs PyTorch >= 2.0 (scaled_dot_product_attention); "
                f"{sys.executable} has torch {torch.__version__}")
    if args.model != "llama":
        try:
            import torchvision  # noqa: F401
        except ImportError as e:
            missing(f"the {args.model} model needs torchvision, which is not installed for "
                    f"{sys.executable} ({e}): install the Debian package python3-torchvision")
    return torch


def run(args):
    torch = import_torch(args)  # imported here so --help and format tests work without torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda requested but torch.cuda.is_available() is False")
    if args.device == "cuda" and torch.cuda.device_count() < args.gpus:
        raise SystemExit(f"error: --gpus {args.gpus} requested but only "
                         f"{torch.cuda.device_count()} CUDA devices are visible")
    device = torch.device(args.device)
    cuda = device.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    model, inputs, targets, loss_fn = make_workload(torch, args)
    model = model.to(device)
    if cuda and args.gpus > 1:
        model = torch.nn.DataParallel(model, device_ids=list(range(args.gpus)))
    inputs, targets = inputs.to(device), targets.to(device)
    train = args.benchmark_type == "train"
    model.train(train)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01) if train else None

    def step():
        if train:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
        else:
            with torch.no_grad():
                model(inputs)

    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    wall_start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync()
    times = []
    for i in range(args.iterations):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
        print(f"iteration {i + 1}/{args.iterations}: {times[-1]:.6f} s", file=sys.stderr)
    wall = time.perf_counter() - wall_start
    peak_gpu = int(torch.cuda.max_memory_allocated(device)) if cuda else None
    return build_result(args, times, wall, peak_gpu, torch.__version__)


def main(argv=None):
    args = parse_args(argv)
    result = run(args)
    print(format_result_line(result), flush=True)


if __name__ == "__main__":
    main()
