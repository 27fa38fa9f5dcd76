"""Builds a Hugging Face tokenizer directory (tokenizer.json & co.) for OpenAI's cl100k_base
BPE, offline, so that Python peers (aiperf, genai-bench, ...) can count tokens without a
hub download.

The vocabulary comes from a local `cl100k_base.tiktoken` file: the one the Rust crates
`bpe-openai` (data/cl100k_base.tiktoken.gz) and `tiktoken-rs` (assets/) ship, found in
the cargo registry, or any path given with --vocab.

usage: python cl100k_tokenizer.py OUT_DIR [--vocab PATH]
"""

import argparse
import glob
import gzip
import os
import shutil
import sys
import tempfile

# cl100k_base's pre-tokenization pattern and special tokens (from tiktoken).
PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def find_vocab():
    home = os.path.expanduser(os.environ.get("CARGO_HOME", "~/.cargo"))
    for pattern in (
        "registry/src/*/bpe-openai-*/data/cl100k_base.tiktoken.gz",
        "registry/src/*/tiktoken-rs-*/assets/cl100k_base.tiktoken",
    ):
        found = sorted(glob.glob(os.path.join(home, pattern)))
        if found:
            return found[-1]
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--vocab", help="cl100k_base.tiktoken (optionally .gz)")
    args = parser.parse_args()
    vocab = args.vocab or find_vocab()
    if not vocab or not os.path.exists(vocab):
        sys.exit(
            "no cl100k_base.tiktoken found: `cargo fetch` the workspace (bpe-openai or "
            "tiktoken-rs) or pass --vocab PATH"
        )
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    with tempfile.TemporaryDirectory() as scratch:
        plain = os.path.join(scratch, "cl100k_base.tiktoken")
        opener = gzip.open if vocab.endswith(".gz") else open
        with opener(vocab, "rb") as source, open(plain, "wb") as target:
            shutil.copyfileobj(source, target)
        converter = TikTokenConverter(
            vocab_file=plain,
            pattern=PATTERN,
            extra_special_tokens=sorted(SPECIAL, key=SPECIAL.get),
        )
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=converter.converted(),
            bos_token="<|endoftext|>",
            eos_token="<|endoftext|>",
        )
    tokenizer.save_pretrained(args.out_dir)
    ids = tokenizer.encode("The quick brown fox jumps over the lazy dog.")
    # tiktoken's cl100k_base encodes this sentence to exactly these ids.
    expected = [791, 4062, 14198, 39935, 35308, 927, 279, 16053, 5679, 13]
    if ids != expected:
        sys.exit(f"the converted tokenizer disagrees with cl100k_base: {ids}")
    print(f"cl100k_base tokenizer written to {args.out_dir} (vocabulary {len(tokenizer)})")


if __name__ == "__main__":
    main()
