#!/usr/bin/env python3
"""A real Kubernetes cluster on this machine for perfsweep's e2e suite (issue 23).

    python3 tests/e2e/cluster.py up      # start the cluster, load the images, install the chart
    python3 tests/e2e/cluster.py test    # the e2e suite against the running cluster
    python3 tests/e2e/cluster.py down    # stop everything, remove every trace, count leftovers
    python3 tests/e2e/cluster.py run     # up, test, down (down always runs)
    python3 tests/e2e/cluster.py fleet N # on an up cluster: N kubemark hollow nodes, the
                                         # fleet suite (real_cluster_fleet) over them

The binaries come from the directory PERFSWEEP_CLUSTER_BIN names (default
/opt/perfsweep-cluster/bin): kube-apiserver, kube-controller-manager, kube-scheduler,
kubelet, coredns, vc-scheduler, vc-controller-manager and a static `pause`. They are
built by hand outside the repository (issue 23); this script only runs them. Debian
gives etcd, containerd, runc and the CNI plugins; podman holds the images that
`images/build` made; Helm is the helm-python-sdk (as charts/tests/check.py uses it).

Everything lives under one state directory (PERFSWEEP_E2E_STATE, default
/tmp/perfsweep-e2e), and the few paths the kubelet and containerd fix are recorded
before `up` touches them, so that `down` can put the machine back as it was.

Network: one Linux bridge (psw0, 10.77.0.0/16) made here. Node i has the address
10.77.0.i on it (the kubelet refuses loopback); its pods get 10.77.i.0/24 addresses
on the same bridge, so pods, nodes, the API server (10.77.0.1:6443) and CoreDNS
(10.77.0.1:53) reach each other directly. ClusterIP Services go through the host,
where kube-proxy (nftables mode) translates them. Multus is the CNI meta-plugin, and a
second bridge (psw1) carries a macvlan NetworkAttachmentDefinition. Nothing is sent
anywhere else: CoreDNS has no upstream. tests/e2e/README.md says more.
"""

import argparse
import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("PERFSWEEP_CLUSTER_BIN", "/opt/perfsweep-cluster/bin"))
STATE = Path(os.environ.get("PERFSWEEP_E2E_STATE", "/tmp/perfsweep-e2e"))
# Four kubelets: a node-pair sweep then has rounds of two pairs (issue 33). The machine
# holds more (see docs/testing.md); each one costs its image imports at `up`.
NODES = int(os.environ.get("PERFSWEEP_E2E_NODE_COUNT", "4"))
VERSION = "0.1.0"
BRIDGE = "psw0"
API_IP = "10.77.0.1"
API_PORT = 6443
ETCD_PORT = 23790
ETCD_PEER_PORT = 23800
SERVICE_RANGE = "10.96.0.0/16"
NAMESPACE = "perfsweep-system"
# A real S3-compatible server (PyPI's moto[server], which .ci/run installs) on the bridge,
# where pods reach it: the suite exports the OME example's results there.
S3_PORT = 9000
S3_URL = f"http://{API_IP}:{S3_PORT}"
# The static local volumes the harness provisions on every node, and their class.
LOCAL_STORAGE_CLASS = "e2e-local"
LOCAL_VOLUMES_PER_NODE = 2
CGROUP_ROOT = "/sys/fs/cgroup"
# Images images/build makes (tagged as the kinds name them) and the sandbox image.
IMAGES = ["operator", "iperf", "fio", "mpi-benchmarks", "openfoam", "pytorch", "perfsweep"]
PAUSE_IMAGE = "localhost/perfsweep-e2e/pause:1"
# A tenant's image in the agent's place (real_cluster_security.rs): prints one huge line,
# as a report carrying a huge raw output would be, and exits 0.
FLOOD_IMAGE = "localhost/perfsweep-e2e/flood:1"
FLOOD_MIB = 8
REQUIRED_BINARIES = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "multus",
    "coredns",
    "pause",
]
# Without these the cluster has no Volcano (said at `up`); the suite's benchmarks then
# use the default scheduler, and its Volcano test fails saying so.
VOLCANO_BINARIES = ["vc-scheduler", "vc-controller-manager"]


def have_volcano():
    return all((BIN / name).is_file() for name in VOLCANO_BINARIES)
# Paths the kubelet and containerd use whatever they are told; `down` removes those
# that did not exist before `up`.
FIXED_PATHS = [
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/run/containerd",
    "/etc/cni",
    "/opt/cni",
    "/etc/kubernetes",
    "/usr/libexec/kubernetes",
]
# The kubelet sets these (protectKernelDefaults: false); `down` restores them.
SYSCTLS = ["vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"]
# What the cluster needs while it runs (restored to the recorded values by `down`):
# kube-proxy's DNAT sends a pod's Service traffic back out of the bridge, so the host
# forwards.
CLUSTER_SYSCTLS = {"net/ipv4/ip_forward": "1"}
# The second link, for Multus attachments: a bridge of its own joining every node's
# pods through macvlan, on its own subnet and with an MTU other than the pod bridge's.
SECOND_LINK = "psw1"
SECOND_LINK_MTU = 9000
MACVLAN_NAD = "e2e-macvlan"
MACVLAN_SUBNET = "10.78.0.0/16"
MACVLAN_MTU = 4000
# Stand-in SR-IOV virtual functions (tests/e2e/stand_in_device_plugin.py): this many
# devices of VF_RESOURCE on each of these nodes, advertised through the kubelet's
# device-plugin API. Two nodes with one each: a gang of two needs both.
VF_RESOURCE = "perfsweep.io/e2e-vf"
VF_NODES = (1, 2)
VF_PER_NODE = 1
# kube-proxy's nftables tables (its own; `down` deletes them and counts any left).
KUBE_PROXY_TABLES = [("ip", "kube-proxy"), ("ip6", "kube-proxy")]


def log(message):
    print(f"[cluster {time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(argv, check=True, quiet=False, **kwargs):
    """Runs a command; its output is returned (and shown when it fails)."""
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if check and result.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    if not quiet and result.returncode != 0:
        log(f"(ignored) {' '.join(map(str, argv))}: {result.stderr.strip()[:300]}")
    return result


def node_ip(index):
    return f"10.77.0.{index}"


def node_name(index):
    return f"psw-node{index}"


def kubeconfig():
    return STATE / "admin.kubeconfig"


def kubectl(*args, check=True, quiet=False, stdin=None):
    return run(["kubectl", f"--kubeconfig={kubeconfig()}", *args], check=check, quiet=quiet, input=stdin)


# ---------------------------------------------------------------- ledger


def ledger_path():
    return STATE / "ledger.json"


def load_ledger():
    try:
        return json.loads(ledger_path().read_text())
    except (OSError, ValueError):
        return {}


def save_ledger(ledger):
    ledger_path().write_text(json.dumps(ledger, indent=1))


def netns_names():
    try:
        return sorted(os.listdir("/var/run/netns"))
    except OSError:
        return []


def iptables_rules():
    """The machine's iptables rules without counters, to compare before and after."""
    rules = []
    for tool in ("iptables-save", "ip6tables-save"):
        if shutil.which(tool):
            out = run([tool], check=False, quiet=True).stdout
            rules += [line for line in out.splitlines() if line and not line.startswith(("#", ":"))]
    return rules


def read_sysctls():
    values = {}
    for name in SYSCTLS:
        try:
            values[name] = Path("/proc/sys", name).read_text().strip()
        except OSError:
            pass
    return values


def restore_sysctls(values):
    for name, value in values.items():
        try:
            if Path("/proc/sys", name).read_text().strip() != value:
                Path("/proc/sys", name).write_text(value)
        except OSError as error:
            log(f"cannot restore {name}: {error}")


# ---------------------------------------------------------------- processes


def start(name, argv, env=None):
    """Starts a long-running process in its own session, logging to logs/NAME.log."""
    logs = STATE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    out = open(logs / f"{name}.log", "ab")
    process = subprocess.Popen(
        [str(a) for a in argv],
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    (STATE / "pids").mkdir(exist_ok=True)
    (STATE / "pids" / name).write_text(str(process.pid))
    return process.pid


def pid_of(name):
    try:
        return int((STATE / "pids" / name).read_text())
    except (OSError, ValueError):
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie has exited.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def stop(name, grace=10.0):
    """SIGTERM, then SIGKILL after `grace` seconds, to the process recorded as NAME."""
    pid = pid_of(name)
    if pid is None or not alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.time() + grace
    while time.time() < deadline and alive(pid):
        time.sleep(0.2)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    # Reap it when it is our child (the `run` command starts and stops in one process).
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_for(what, check, timeout=120.0, interval=1.0):
    deadline = time.time() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - any failure means "not yet"
            pass
        if time.time() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}; logs in {STATE / 'logs'}")
        time.sleep(interval)


# ---------------------------------------------------------------- PKI


def openssl(*args):
    run(["openssl", *args], quiet=True)


def make_cert(pki, name, subject, ca=True, sans=None, client=True):
    """An EC key and a certificate signed by the cluster CA."""
    key, csr, crt = pki / f"{name}.key", pki / f"{name}.csr", pki / f"{name}.crt"
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    openssl("req", "-new", "-key", key, "-subj", subject, "-out", csr)
    ext = pki / f"{name}.ext"
    usage = "clientAuth" if client else "serverAuth,clientAuth"
    lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment", f"extendedKeyUsage={usage}"]
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    ext.write_text("\n".join(lines) + "\n")
    openssl(
        "x509", "-req", "-in", csr, "-CA", pki / "ca.crt", "-CAkey", pki / "ca.key",
        "-CAcreateserial", "-days", "2", "-out", crt, "-extfile", ext,
    )


def make_pki():
    pki = STATE / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", pki / "ca.key")
    openssl("req", "-x509", "-new", "-key", pki / "ca.key", "-subj", "/CN=perfsweep-e2e-ca", "-days", "2", "-out", pki / "ca.crt")
    sans = [
        f"IP:{API_IP}", "IP:127.0.0.1", "IP:10.96.0.1", "DNS:localhost", "DNS:kubernetes",
        "DNS:kubernetes.default", "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local",
    ]
    make_cert(pki, "apiserver", "/CN=kube-apiserver", sans=sans, client=False)
    make_cert(pki, "admin", "/O=system:masters/CN=perfsweep-e2e-admin")
    make_cert(pki, "apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client")
    make_cert(pki, "controller-manager", "/CN=system:kube-controller-manager")
    make_cert(pki, "scheduler", "/CN=system:kube-scheduler")
    # The user the default ClusterRoleBinding system:node-proxier binds.
    make_cert(pki, "kube-proxy", "/CN=system:kube-proxy")
    make_cert(pki, "multus", "/CN=system:multus")
    for index in range(1, NODES + 1):
        make_cert(pki, node_name(index), f"/O=system:nodes/CN=system:node:{node_name(index)}")
    # The service-account token signing key pair.
    openssl("genrsa", "-out", pki / "sa.key", "2048")
    openssl("rsa", "-in", pki / "sa.key", "-pubout", "-out", pki / "sa.pub")
    for name in ["admin", "controller-manager", "scheduler", "kube-proxy", "multus"] + [node_name(i) for i in range(1, NODES + 1)]:
        write_kubeconfig(STATE / f"{name}.kubeconfig", name)
    return pki


def write_kubeconfig(path, cert):
    pki = STATE / "pki"

    def b64(file):
        return base64.b64encode((pki / file).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": f"https://{API_IP}:{API_PORT}", "certificate-authority-data": b64("ca.crt")}}],
        "users": [{"name": cert, "user": {"client-certificate-data": b64(f"{cert}.crt"), "client-key-data": b64(f"{cert}.key")}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": cert}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config, indent=1))
    path.chmod(0o600)


def api_ready():
    pki = STATE / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    with urllib.request.urlopen(f"https://{API_IP}:{API_PORT}/readyz", context=context, timeout=5) as response:
        return response.status == 200


# ---------------------------------------------------------------- network and cgroups


def make_network():
    run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    for index in range(1, NODES + 1):
        run(["ip", "addr", "add", f"{node_ip(index)}/16", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    # No address on the host: only the pods' macvlan attachments speak on it.
    run(["ip", "link", "add", SECOND_LINK, "type", "bridge"])
    run(["ip", "link", "set", SECOND_LINK, "mtu", str(SECOND_LINK_MTU), "up"])


def cni_bin_dir():
    """Debian's CNI plugins and the hand-built Multus in one directory, as containerd
    and Multus look for plugins in one."""
    path = STATE / "cni-bin"
    if not path.exists():
        path.mkdir(parents=True)
        for plugin in Path("/usr/lib/cni").iterdir():
            (path / plugin.name).symlink_to(plugin)
        (path / "multus").symlink_to(BIN / "multus")
    return path


def cgroup_dirs(index):
    """The node's cgroupRoot in every v1 hierarchy (the kubelet's cgroupfs driver needs it to exist)."""
    dirs = []
    for hierarchy in sorted(os.listdir(CGROUP_ROOT)):
        path = Path(CGROUP_ROOT, hierarchy)
        if path.is_dir() and not path.is_symlink() and (path / "cgroup.procs").exists() and hierarchy != "unified":
            dirs.append(path / node_name(index))
    return dirs


def make_cgroups(index):
    for path in cgroup_dirs(index):
        path.mkdir(exist_ok=True)
        if path.parent.name == "cpuset":
            # A new cpuset cgroup has no CPUs or memory nodes until given its parent's.
            for file in ("cpuset.cpus", "cpuset.mems"):
                (path / file).write_text((path.parent / file).read_text())


# A slowed node (the rack acceptance test's outlier): every pod of its kubelet shares
# this share of one CPU, through the CFS quota of the node's cgroupRoot.
SLOW_CPU_SHARE = 0.2


def set_cpu_quota(index, share):
    """Caps the CPU time of everything under node `index`'s cgroupRoot at `share` of one
    CPU (None lifts the cap)."""
    cpu = Path(CGROUP_ROOT, "cpu", node_name(index))
    if not cpu.is_dir():
        raise SystemExit(f"{cpu} is missing: is the cluster up?")
    period = int((cpu / "cpu.cfs_period_us").read_text())
    quota = -1 if share is None else int(period * share)
    (cpu / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    log(f"{node_name(index)}: CPU quota {quota} us per {period} us")


def kill_cgroup_processes(index):
    """SIGKILLs every process left in the node's cgroups (containers whose shim is gone)."""
    killed = 0
    for top in cgroup_dirs(index):
        if not top.exists():
            continue
        for dirpath, _dirs, files in os.walk(top):
            if "cgroup.procs" in files:
                for line in Path(dirpath, "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(line), signal.SIGKILL)
                        killed += 1
                    except (OSError, ValueError):
                        pass
    return killed


def remove_cgroups(index):
    for top in cgroup_dirs(index):
        if not top.exists():
            continue
        # Deepest first: a cgroup directory goes only once it has no children.
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda walked: -len(walked[0])):
            for _ in range(20):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


# ---------------------------------------------------------------- components


def start_etcd():
    data = STATE / "etcd"
    start("etcd", [
        "etcd", "--name=e2e", f"--data-dir={data}",
        f"--listen-client-urls=http://127.0.0.1:{ETCD_PORT}", f"--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}",
        f"--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}", f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
        f"--initial-cluster=e2e=http://127.0.0.1:{ETCD_PEER_PORT}",
        "--quota-backend-bytes=2147483648",
    ])


def start_apiserver():
    pki = STATE / "pki"
    start("kube-apiserver", [
        BIN / "kube-apiserver",
        f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
        f"--bind-address={API_IP}", f"--advertise-address={API_IP}", f"--secure-port={API_PORT}",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_RANGE}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        # ValidatingAdmissionPolicy is GA and on; said explicitly since the suite relies on it.
        "--runtime-config=admissionregistration.k8s.io/v1=true",
        "--allow-privileged=true",
        "--kubelet-preferred-address-types=InternalIP",
        "--profiling=false",
        # What the operator asks of the API server, request by request (its service
        # accounts' requests only): the fleet suite counts API requests per child from it.
        f"--audit-policy-file={write_audit_policy()}",
        f"--audit-log-path={AUDIT_LOG}",
        "--audit-log-format=json",
        "--audit-log-maxsize=512",
        "--audit-log-maxbackup=1",
        "--v=1",
    ])


AUDIT_LOG = STATE / "audit.log"


def write_audit_policy():
    """Metadata of every finished request by a service account of the operator's
    namespace; nothing of anyone else."""
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": [
            {"level": "Metadata", "userGroups": [f"system:serviceaccounts:{NAMESPACE}"]},
            {"level": "None"},
        ],
    }
    path = STATE / "audit-policy.json"
    path.write_text(json.dumps(policy, indent=1))
    return path


def start_controller_manager():
    pki = STATE / "pki"
    start("kube-controller-manager", [
        BIN / "kube-controller-manager",
        f"--kubeconfig={STATE / 'controller-manager.kubeconfig'}",
        f"--authentication-kubeconfig={STATE / 'controller-manager.kubeconfig'}",
        f"--authorization-kubeconfig={STATE / 'controller-manager.kubeconfig'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
        f"--service-cluster-ip-range={SERVICE_RANGE}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1", "--secure-port=0",
        # A stopped kubelet shows as NotReady after this long (the fault test waits for it).
        "--node-monitor-grace-period=20s",
        "--v=1",
    ])


def start_scheduler():
    start("kube-scheduler", [
        BIN / "kube-scheduler",
        f"--kubeconfig={STATE / 'scheduler.kubeconfig'}",
        f"--authentication-kubeconfig={STATE / 'scheduler.kubeconfig'}",
        f"--authorization-kubeconfig={STATE / 'scheduler.kubeconfig'}",
        "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=1",
    ])


def node_dir(index):
    return STATE / node_name(index)


def containerd_socket(index):
    return node_dir(index) / "containerd.sock"


def start_containerd(index):
    root = node_dir(index)
    (root / "cni").mkdir(parents=True, exist_ok=True)
    first, last = f"10.77.{index}.2", f"10.77.{index}.254"
    cni = {
        "cniVersion": "0.4.0",
        "name": f"psw-{index}",
        "plugins": [{
            "type": "bridge", "bridge": BRIDGE,
            # No gateway or masquerade: pods and nodes share the bridge's subnet. One
            # route: the Service range through the host, where kube-proxy's rules are.
            "isGateway": False, "ipMasq": False, "hairpinMode": True,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": "10.77.0.0/16", "rangeStart": first, "rangeEnd": last}]],
                "routes": [{"dst": SERVICE_RANGE, "gw": API_IP}],
                "dataDir": str(root / "ipam"),
            },
        }],
    }
    # Multus, the cluster's CNI meta-plugin: the pod bridge as every pod's network, and
    # what a pod's k8s.v1.cni.cncf.io/networks annotation asks for besides.
    multus = {
        "cniVersion": "0.4.0", "name": "multus-cni-network", "type": "multus",
        "kubeconfig": str(STATE / "multus.kubeconfig"),
        "binDir": str(cni_bin_dir()), "cniDir": str(root / "multus-cache"),
        "confDir": str(root / "cni"),
        "logFile": str(STATE / "logs" / f"multus-{index}.log"), "logLevel": "verbose",
        "readinessindicatorfile": "",
        "delegates": [cni],
    }
    (root / "cni" / "00-multus.conf").write_text(json.dumps(multus, indent=1))
    config = f"""version = 2
root = "{root / 'containerd-root'}"
state = "{root / 'containerd-state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{containerd_socket(index)}"
[ttrpc]
  address = "{containerd_socket(index)}.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{root / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # CAP_SYS_RESOURCE is not in this machine's bounding set.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin_dir()}"
    conf_dir = "{root / 'cni'}"
"""
    (root / "containerd.toml").write_text(config)
    start(f"containerd-{index}", ["containerd", f"--config={root / 'containerd.toml'}"])


def ctr(index, *args, check=True, quiet=False):
    return run(["ctr", f"--address={containerd_socket(index)}", "--namespace=k8s.io", *args], check=check, quiet=quiet)


def start_kubelet(index):
    root = node_dir(index)
    name = node_name(index)
    (root / "kubelet").mkdir(parents=True, exist_ok=True)
    (root / "resolv.conf").write_text(f"nameserver {API_IP}\n")
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine has cgroup v1 only.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{name}",
        "address": node_ip(index),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10247 + index,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(STATE / "pki" / "ca.crt")}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [API_IP],
        "clusterDomain": "cluster.local",
        "resolvConf": str(root / "resolv.conf"),
        "containerRuntimeEndpoint": f"unix://{containerd_socket(index)}",
        # Keep out of iptables.
        "makeIPTablesUtilChains": False,
        "failSwapOn": False,
        "podLogsDir": str(root / "pod-logs"),
        "volumePluginDir": str(root / "volume-plugins"),
        "serializeImagePulls": False,
        # A shared build machine's disk is often nearly full: evict only at the very end
        # (a node under disk pressure is tainted and nothing schedules).
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "256Mi", "imagefs.available": "256Mi",
                         "nodefs.inodesFree": "1%", "imagefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "5s",
        "kubeAPIQPS": 50,
        "kubeAPIBurst": 100,
        "localStorageCapacityIsolation": True,
    }
    (root / "kubelet.json").write_text(json.dumps(config, indent=1))
    start(f"kubelet-{index}", [
        BIN / "kubelet",
        f"--config={root / 'kubelet.json'}",
        f"--kubeconfig={STATE / f'{name}.kubeconfig'}",
        f"--root-dir={root / 'kubelet'}",
        f"--cert-dir={root / 'kubelet-pki'}",
        f"--hostname-override={name}",
        f"--node-ip={node_ip(index)}",
        "--v=1",
    ])


def nft_tables():
    if not shutil.which("nft"):
        return []
    out = run(["nft", "list", "tables"], check=False, quiet=True).stdout
    return [tuple(line.split()[1:3]) for line in out.splitlines() if line.startswith("table ")]


def start_kube_proxy():
    """kube-proxy in nftables mode. The nodes share this machine's network namespace,
    so one kube-proxy serves them all. Every Service connection is masqueraded to the
    host's bridge address: pods share one L2 segment, and without it a backend would
    answer a client directly, past the host that translated the request."""
    if not shutil.which("nft"):
        raise SystemExit("kube-proxy's nftables mode needs the nft command (apt-get install nftables)")
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "clientConnection": {"kubeconfig": str(STATE / "kube-proxy.kubeconfig")},
        "hostnameOverride": node_name(1),
        "clusterCIDR": "10.77.0.0/16",
        "bindAddress": API_IP,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "nftables": {"masqueradeAll": True, "syncPeriod": "5s", "minSyncPeriod": "0s"},
        # The conntrack table is the machine's: left as it is.
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "nodePortAddresses": [f"{API_IP}/32"],
    }
    path = STATE / "kube-proxy.yaml"
    path.write_text(json.dumps(config, indent=1))
    start("kube-proxy", [BIN / "kube-proxy", f"--config={path}", "--v=1"])


def kube_proxy_synced():
    """kube-proxy answers its health check and has written the `kubernetes` Service's
    ClusterIP into its table. (Pods' own view is the chart's operator, which reaches
    the API server through that Service, and the suite's Service tests.)"""
    try:
        with urllib.request.urlopen("http://127.0.0.1:10256/healthz", timeout=2) as response:
            if response.status != 200:
                return False
    except (OSError, ValueError):
        return False
    out = run(["nft", "list", "table", "ip", "kube-proxy"], check=False, quiet=True)
    return "10.96.0.1" in out.stdout


def start_coredns():
    corefile = STATE / "Corefile"
    # No `forward`: names outside the cluster fail rather than leave the machine.
    corefile.write_text(f""".:53 {{
    bind {API_IP}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig()} e2e
        pods insecure
        ttl 5
    }}
    cache 5
}}
""")
    start("coredns", [BIN / "coredns", "-conf", corefile])


VOLCANO_SCHEDULER_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

# The jobflow controller of Volcano's controller manager watches these; the Volcano tree
# of that age ships no CRD for them, so minimal ones are made here.
JOBFLOW_CRDS = [("jobflows", "JobFlow", "jf"), ("jobtemplates", "JobTemplate", "jt")]


def volcano_crds_dir():
    candidates = [
        os.environ.get("PERFSWEEP_VOLCANO_CRDS", ""),
        str(BIN.parent / "crds" / "volcano"),
        str(ROOT.parent / "shared" / "crds" / "volcano"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir() and list(Path(candidate).glob("*.yaml")):
            return Path(candidate)
    raise SystemExit(f"no Volcano CRDs: set PERFSWEEP_VOLCANO_CRDS (looked in {candidates})")


def multus_crd():
    candidates = [BIN.parent / "crds" / "multus", ROOT.parent / "shared" / "crds" / "multus"]
    for candidate in candidates:
        found = sorted(candidate.glob("*.yaml")) if candidate.is_dir() else []
        if found:
            return found[0]
    raise SystemExit(f"no NetworkAttachmentDefinition CRD (looked in {candidates})")


def apply_multus():
    """The NetworkAttachmentDefinition CRD, what Multus may do as `system:multus` (what
    its own deployment grants its daemon), and the macvlan network on the second link."""
    wait_for("the NetworkAttachmentDefinition CRD applied",
             lambda: kubectl("apply", "--server-side", "-f", str(multus_crd()), check=False, quiet=True).returncode == 0, timeout=60)
    rbac = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "e2e-multus"},
         "rules": [
             {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
             {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "update", "patch"]},
             {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
         ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "e2e-multus"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-multus"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:multus"}]},
    ]}
    kubectl("apply", "-f", "-", stdin=json.dumps(rbac))
    wait_for("the NetworkAttachmentDefinition CRD established",
             lambda: kubectl("get", "network-attachment-definitions", "-A", check=False, quiet=True).returncode == 0, timeout=60)
    config = {
        "cniVersion": "0.4.0", "type": "macvlan", "master": SECOND_LINK, "mode": "bridge", "mtu": MACVLAN_MTU,
        # One allocation directory for every node: they share this machine, so no two
        # pods get one address.
        "ipam": {"type": "host-local", "subnet": MACVLAN_SUBNET, "dataDir": str(STATE / "macvlan-ipam")},
    }
    nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
           "metadata": {"name": MACVLAN_NAD, "namespace": "default"}, "spec": {"config": json.dumps(config)}}
    kubectl("apply", "-f", "-", stdin=json.dumps(nad))
    log(f"Multus: NetworkAttachmentDefinition default/{MACVLAN_NAD} (macvlan on {SECOND_LINK}, {MACVLAN_SUBNET}, MTU {MACVLAN_MTU})")


def apply_volcano_crds():
    # Right after /readyz the API server may not serve its OpenAPI yet, which kubectl's
    # client-side validation needs: retried for a while.
    for file in sorted(volcano_crds_dir().glob("*.yaml")):
        wait_for(f"{file.name} applied", lambda f=file: kubectl("apply", "--server-side", "-f", str(f), check=False, quiet=True).returncode == 0, timeout=60)
    for plural, kind, short in JOBFLOW_CRDS:
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.flow.volcano.sh"},
            "spec": {
                "group": "flow.volcano.sh",
                "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(), "shortNames": [short]},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }],
            },
        }
        kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(crd))


def start_volcano():
    conf = STATE / "volcano-scheduler.conf"
    conf.write_text(VOLCANO_SCHEDULER_CONF)
    start("vc-scheduler", [
        BIN / "vc-scheduler", f"--kubeconfig={kubeconfig()}", f"--scheduler-conf={conf}",
        "--leader-elect=false", "--listen-address=127.0.0.1:18081", "--healthz-address=127.0.0.1:18082",
        "--csi-storage=false", "--schedule-period=500ms", "-v=2",
    ])
    start("vc-controller-manager", [
        BIN / "vc-controller-manager", f"--kubeconfig={kubeconfig()}",
        "--leader-elect=false", "--healthz-address=127.0.0.1:18083", "-v=2",
    ])


# ---------------------------------------------------------------- images


def build_pause_image():
    """The sandbox image: the static `pause` binary alone, made with podman (no registry)."""
    context = STATE / "pause-image"
    context.mkdir(exist_ok=True)
    shutil.copy(BIN / "pause", context / "pause")
    (context / "Containerfile").write_text('FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n')
    run(["podman", "build", "--quiet", "-t", PAUSE_IMAGE, str(context)])


def build_flood_image():
    """On top of the perfsweep image (so it has what the LLM load generator's pod needs),
    a `perfsweep` earlier on PATH that prints, as the agent would, a report of its role
    and index whose raw output is FLOOD_MIB MiB on one line, and exits 0: what a tenant's
    podOverride.image could make the operator read from every load generator."""
    context = STATE / "flood-image"
    context.mkdir(exist_ok=True)
    script = context / "perfsweep"
    script.write_text(f"""#!/bin/bash
bytes=$(({FLOOD_MIB} * 1024 * 1024))
sha=$(head -c "$bytes" /dev/zero | tr '\\0' x | sha256sum | cut -d' ' -f1)
echo "flood: a tenant image in the agent's place"
printf 'PERFSWEEP-REPORT {{"kind":"LLMInference","role":"%s","index":%s,"outcome":{{"status":"succeeded","result":{{}},"summary":"flood"}},"command":["flood"],"startedAt":"2026-01-01T00:00:00Z","finishedAt":"2026-01-01T00:00:01Z","rawOutputSha256":"%s","rawOutput":"' "$PERFSWEEP_ROLE" "$PERFSWEEP_INDEX" "$sha"
head -c "$bytes" /dev/zero | tr '\\0' x
printf '"}}\\n'
""")
    (context / "Containerfile").write_text(
        f"FROM ghcr.io/perfsweep/perfsweep:{VERSION}\n"
        "COPY --chmod=755 perfsweep /usr/local/sbin/perfsweep\n"
    )
    run(["podman", "build", "--quiet", "-t", FLOOD_IMAGE, str(context)])


def load_images(names):
    archives = STATE / "images"
    archives.mkdir(exist_ok=True)
    refs = [PAUSE_IMAGE, FLOOD_IMAGE] + [f"ghcr.io/perfsweep/{name}:{VERSION}" for name in names]
    for ref in refs:
        if run(["podman", "image", "exists", ref], check=False, quiet=True).returncode != 0:
            raise SystemExit(f"image {ref} is not in podman's store: run images/build first")
        archive = archives / (ref.replace("/", "_").replace(":", "_") + ".tar")
        run(["podman", "save", "--format", "oci-archive", "-o", str(archive), ref])
        for index in range(1, NODES + 1):
            ctr(index, "images", "import", "--base-name", ref.rsplit(":", 1)[0], "--digests", str(archive))
            # No registry can give an image back: pinned, the kubelet's image garbage
            # collection (which disk pressure starts) never deletes it.
            base = ref.rsplit(":", 1)[0]
            for name in ctr(index, "images", "list", "-q").stdout.split():
                if name == ref or name.startswith(f"{base}@"):
                    ctr(index, "images", "label", name, "io.cri-containerd.pinned=pinned",
                        "io.cri-containerd.image=managed")
        archive.unlink()
        log(f"image {ref} loaded on {NODES} node(s); {disk_left()}")


# ---------------------------------------------------------------- chart


def helm_config():
    import helm_python as helm  # noqa: PLC0415 - only `up` needs it

    return helm, helm.Config(kubeconfig_path=str(kubeconfig()), namespace=NAMESPACE)


def without_refs(schema):
    """The schema with every `$ref` subtree (which the API server refuses) replaced by an
    open object."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return {key: without_refs(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [without_refs(item) for item in schema]
    return schema


def chart_for_this_cluster():
    """The chart, or a copy whose CRDs the API server refuses are patched so that the
    rest of the suite can run. Every patch is logged as a stand-in: the chart test of the
    suite (`the_charts_crds_are_established_without_warnings`) still fails on it."""
    chart = ROOT / "charts" / "perfsweep"
    refused = {}
    for file in sorted((chart / "crds").glob("*.yaml")):
        out = kubectl("apply", "--server-side", "--dry-run=server", "--validate=false", "-f", str(file), check=False, quiet=True)
        if out.returncode != 0:
            refused[file.name] = out.stderr.strip()
    if not refused:
        return chart
    copy = STATE / "chart"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(chart, copy)
    for name, error in refused.items():
        log(f"STAND-IN: the API server refuses the chart's {name}: {error[:400]}")
        crd = json.loads(kubectl("create", "--dry-run=client", "--validate=false", "-o", "json", "-f", str(chart / "crds" / name)).stdout)
        (copy / "crds" / name).write_text(json.dumps(without_refs(crd), indent=1))
        log(f"STAND-IN: installing {name} with its $ref subtrees as open objects")
    return copy


def start_s3():
    """moto's S3 server on the bridge address, if moto[server] is installed."""
    server = shutil.which("moto_server")
    if not server:
        log("NO S3: moto_server is not installed (pip install 'moto[server]'); the S3 export test will fail")
        return
    start("moto-s3", [server, "-H", API_IP, "-p", str(S3_PORT)])
    def answers():
        try:
            with urllib.request.urlopen(f"{S3_URL}/", timeout=2):
                return True
        except (OSError, ValueError):
            return False
    wait_for("the S3 server", answers, timeout=60)


def provision_local_volumes():
    """What sig-storage's local static provisioner does, done once: a directory per
    volume on each node and a `local` PersistentVolume bound to that node, in a
    WaitForFirstConsumer StorageClass, so a PVC binds where its pod is scheduled."""
    objects = [{
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": LOCAL_STORAGE_CLASS},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
    }]
    for index in range(1, NODES + 1):
        for volume in range(LOCAL_VOLUMES_PER_NODE):
            path = STATE / "local-volumes" / node_name(index) / f"vol{volume}"
            path.mkdir(parents=True, exist_ok=True)
            # Pods run as 65532: the volume is theirs to write.
            path.chmod(0o777)
            objects.append({
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": f"e2e-local-{node_name(index)}-{volume}"},
                "spec": {
                    "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain", "storageClassName": LOCAL_STORAGE_CLASS,
                    "local": {"path": str(path)},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name(index)]}]}]}},
                },
            })
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    log(f"local volumes: {NODES * LOCAL_VOLUMES_PER_NODE} PersistentVolumes in StorageClass {LOCAL_STORAGE_CLASS}")


RELEASE = "perfsweep"


def chart_values():
    """The values the suite installs with: the chart's defaults (two replicas with leader
    election among them) except where this cluster needs otherwise."""
    return {
        "operator": {
            "logFormat": "text",
            "debounceMs": 200,
        },
        # Namespaced, as the chart's default is, for the namespace the suites run their
        # benchmarks in: a Role there, no cluster-wide pods or Secrets.
        "watch": {"namespaces": ["default"]},
        "benchmarkDefaults": {"scheduler": "volcano" if have_volcano() else "default"},
        # The suites compare Volcano with the default scheduler in the namespace they run
        # in: the administrator allows both here. The chart's default (only the install's
        # scheduler) is judged by real_cluster_security.rs on a copy of the policy.
        "admissionPolicy": {"allowedSchedulers": ["volcano", "default"]},
        # The suite's S3 server, plain http on the bridge (the administrator's choice).
        "export": {"allowedEndpoints": [S3_URL], "allowPlainHttp": True},
        # The warehouse build CronJob, on the suite's S3 server; its schedule never comes
        # within a run: the suite makes a Job from its template.
        "warehouse": {"build": {
            "enabled": True, "schedule": "0 0 1 1 *",
            "sources": ["s3://e2e-wh/exports"], "location": "s3://e2e-wh/warehouse",
            "params": {"endpoint": S3_URL}, "credentialsSecret": "e2e-warehouse-s3",
        }},
    }


def install_chart():
    helm, config = helm_config()
    started = time.time()
    with helm.Chart.load(str(chart_for_this_cluster())) as chart:
        config.install(chart, RELEASE, chart_values(), namespace=NAMESPACE, create_namespace=True, timeout=300)
    log(f"chart installed in {time.time() - started:.0f}s")


def adopt_crds():
    """docs/upgrading.md's step for an existing install that moves to
    `crds.asTemplates: true`: the release adopts the CRDs its first install made."""
    names = kubectl("get", "crd", "-o", "name").stdout.split()
    ours = [name for name in names if name.endswith(".perfsweep.io")]
    for name in ours:
        kubectl("label", name, "app.kubernetes.io/managed-by=Helm", "--overwrite")
        kubectl("annotate", name, f"meta.helm.sh/release-name={RELEASE}",
                f"meta.helm.sh/release-namespace={NAMESPACE}", "--overwrite")
    return ours


def upgrade_chart():
    """`helm upgrade` of the running release to the CRDs as templates, with a value that
    changes the operator's pod template (its log format), so that the Deployment rolls
    as a new version's image would make it."""
    helm, config = helm_config()
    adopted = adopt_crds()
    values = chart_values()
    values["operator"]["logFormat"] = "json"
    values["crds"] = {"asTemplates": True, "keep": True}
    started = time.time()
    with helm.Chart.load(str(chart_for_this_cluster())) as chart:
        config.upgrade(chart, RELEASE, values, namespace=NAMESPACE, timeout=300, wait="watcher")
    log(f"chart upgraded in {time.time() - started:.0f}s ({len(adopted)} CRDs adopted)")


def uninstall_chart():
    helm, config = helm_config()
    started = time.time()
    config.uninstall(RELEASE, timeout=300, wait="watcher")
    log(f"chart uninstalled in {time.time() - started:.0f}s")


def kill_pod_containers(namespace, pod):
    """SIGKILL to the pod's containers (not its sandbox) on the node that runs it: a
    crash, which the kubelet answers by restarting them. Unlike a deletion, nothing
    runs the process's shutdown."""
    node = kubectl("-n", namespace, "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}").stdout.strip()
    index = next((i for i in range(1, NODES + 1) if node_name(i) == node), None)
    if index is None:
        raise SystemExit(f"pod {namespace}/{pod} is on {node!r}, not a node of this harness")
    # One filter, its terms joined by commas: ctr ORs separate filters.
    listed = ctr(index, "containers", "list", "-q",
                 f'labels."io.kubernetes.pod.name"=={pod},'
                 f'labels."io.kubernetes.pod.namespace"=={namespace},'
                 'labels."io.cri-containerd.kind"==container').stdout.split()
    # Containers of earlier restarts are listed too; only running ones have a task.
    running = {line.split()[0] for line in ctr(index, "tasks", "list").stdout.splitlines()[1:]
               if line.split() and line.split()[-1] == "RUNNING"}
    listed = [container for container in listed if container in running]
    if not listed:
        raise SystemExit(f"pod {namespace}/{pod} has no running container on {node}")
    for container in listed:
        ctr(index, "tasks", "kill", "-s", "SIGKILL", container)
    log(f"killed {len(listed)} container(s) of {namespace}/{pod} on {node}")


def crds_established():
    """The chart's CRDs as the API server holds them, and every warning it gave."""
    names = [path.name.removesuffix(".yaml") for path in sorted((ROOT / "charts" / "perfsweep" / "crds").glob("*.yaml"))]
    result = {}
    for name in names:
        out = kubectl("get", "crd", name, "-o", "json", check=False, quiet=True)
        if out.returncode != 0:
            result[name] = "missing"
            continue
        conditions = {c["type"]: c["status"] for c in json.loads(out.stdout)["status"].get("conditions", [])}
        result[name] = "Established" if conditions.get("Established") == "True" else f"not established {conditions}"
    return result


# ---------------------------------------------------------------- up / down


def check_binaries():
    missing = [name for name in REQUIRED_BINARIES if not (BIN / name).is_file()]
    tools = [tool for tool in ("etcd", "containerd", "runc", "ctr", "podman", "kubectl", "openssl") if not shutil.which(tool)]
    if not Path("/usr/lib/cni/bridge").exists():
        tools.append("/usr/lib/cni/bridge (containernetworking-plugins)")
    try:
        import grpc  # noqa: F401  (the stand-in device plugin's one dependency)
    except ImportError:
        tools.append("python3's grpc module (pip install grpcio), for the stand-in device plugin")
    return missing, tools


def up(images):
    missing, tools = check_binaries()
    if missing or tools:
        raise SystemExit(f"cannot start: missing binaries {missing} in {BIN}, missing tools {tools}")
    if STATE.exists():
        log(f"{STATE} exists: tearing the previous cluster down first")
        down()
    started = time.time()
    STATE.mkdir(parents=True)
    # Every node keeps its own copy of every image (about 4 GiB unpacked), and a kubelet
    # under disk pressure evicts pods and refuses new ones: say what the disk had.
    log(f"up: {disk_left()}")
    ledger = {
        "preexisting": [path for path in FIXED_PATHS if os.path.lexists(path)],
        "netns": netns_names(),
        "iptables": iptables_rules(),
        "sysctls": read_sysctls(),
        "nft": nft_tables(),
    }
    save_ledger(ledger)
    make_pki()
    make_network()
    restore_sysctls(CLUSTER_SYSCTLS)
    start_etcd()
    start_apiserver()
    wait_for("the API server", api_ready, timeout=120)
    log(f"API server ready after {time.time() - started:.0f}s")
    start_controller_manager()
    start_scheduler()
    start_kube_proxy()
    apply_multus()
    build_pause_image()
    build_flood_image()
    for index in range(1, NODES + 1):
        make_cgroups(index)
        start_containerd(index)
    for index in range(1, NODES + 1):
        wait_for(f"containerd {index}", lambda i=index: ctr(i, "version", check=False, quiet=True).returncode == 0, timeout=60)
    load_images(images)
    for index in range(1, NODES + 1):
        start_kubelet(index)
    start_device_plugins()
    start_coredns()
    if have_volcano():
        apply_volcano_crds()
        start_volcano()
    else:
        log(f"NO VOLCANO: {BIN} lacks {VOLCANO_BINARIES}; benchmarks use the default scheduler")
    for index in range(1, NODES + 1):
        wait_for(f"node {node_name(index)} Ready", lambda i=index: node_ready(node_name(i)), timeout=120)
    # The kubelet rewrote these when it started.
    restore_sysctls({**ledger["sysctls"], **CLUSTER_SYSCTLS})
    wait_for("kube-proxy's rules for the kubernetes Service", kube_proxy_synced, timeout=60)
    for index in VF_NODES:
        wait_for(f"{VF_RESOURCE} on {node_name(index)}", lambda i=index: allocatable(node_name(i), VF_RESOURCE) == str(VF_PER_NODE), timeout=60)
    untaint_nodes()
    for index in range(1, NODES + 1):
        # The node-pair sweep of the suite selects these.
        kubectl("label", "node", node_name(index), "perfsweep.io/e2e=true", "--overwrite")
    provision_local_volumes()
    start_s3()
    wait_for("the default ServiceAccount", lambda: kubectl("get", "serviceaccount", "default", check=False, quiet=True).returncode == 0, timeout=60)
    if have_volcano():
        wait_for("Volcano's default queue", lambda: kubectl("get", "queue", "default", check=False, quiet=True).returncode == 0, timeout=60)
    install_chart()
    established = crds_established()
    for name, state in established.items():
        log(f"CRD {name}: {state}")
    wait_for("the operator Deployment", operator_available, timeout=180)
    log(f"cluster up in {time.time() - started:.0f}s: {NODES} node(s), KUBECONFIG={kubeconfig()}")


def start_device_plugins():
    """One stand-in device plugin per VF node, registering with that node's kubelet. It
    registers again by itself whenever the kubelet restarts (the fault tests stop and
    start kubelets)."""
    plugin = Path(__file__).resolve().parent / "stand_in_device_plugin.py"
    for index in VF_NODES:
        start(f"vf-plugin-{index}", [
            sys.executable, plugin,
            f"--registry-dir={node_dir(index) / 'kubelet' / 'plugins_registry'}",
            f"--plugin-dir={node_dir(index) / 'stand-in-device-plugins'}",
            f"--resource={VF_RESOURCE}",
            f"--devices={VF_PER_NODE}",
            f"--node={node_name(index)}",
        ])


def allocatable(node, resource):
    out = kubectl("get", "node", node, "-o", "json", check=False, quiet=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["status"].get("allocatable", {}).get(resource)


def node_ready(name):
    out = kubectl("get", "node", name, "-o", "json", check=False, quiet=True)
    if out.returncode != 0:
        return False
    conditions = json.loads(out.stdout)["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def lifecycle_taints(name):
    """The taints the node lifecycle controller puts on a node it cannot reach."""
    out = kubectl("get", "node", name, "-o", "json", check=False, quiet=True)
    if out.returncode != 0:
        return ["unreadable"]
    taints = json.loads(out.stdout)["spec"].get("taints", [])
    return [t["key"] for t in taints if t["key"] in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]


def untaint_nodes():
    """The node lifecycle controller removes `not-ready` once a node is Ready; if it has
    not yet, do it here so that pods schedule at once."""
    for index in range(1, NODES + 1):
        kubectl("taint", "node", node_name(index), "node.kubernetes.io/not-ready-", check=False, quiet=True)


def operator_available():
    out = kubectl("-n", NAMESPACE, "get", "deployment", "-o", "json", check=False, quiet=True)
    deployments = json.loads(out.stdout)["items"]
    return bool(deployments) and all(d["status"].get("availableReplicas", 0) >= 1 for d in deployments)


def stop_pods(index):
    """Every container of the node killed and removed, with containerd still up."""
    out = ctr(index, "tasks", "list", "-q", check=False)
    for task in out.stdout.split():
        ctr(index, "tasks", "kill", "-s", "SIGKILL", task, check=False, quiet=True)
    time.sleep(0.5)
    for task in out.stdout.split():
        # A killed task may be gone already.
        ctr(index, "tasks", "delete", "-f", task, check=False, quiet=True)
    containers = ctr(index, "containers", "list", "-q", check=False).stdout.split()
    if containers:
        ctr(index, "containers", "delete", *containers, check=False, quiet=True)


def shims():
    """containerd shims started by this cluster's containerds."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"containerd-shim-runc-v2") and any(str(STATE).encode() in arg for arg in cmdline):
            found.append(int(pid))
    return found


def our_mounts():
    prefixes = (str(STATE), "/var/lib/kubelet", "/run/containerd", "/var/run/netns/cni-", "/run/netns/cni-")
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefixes):
            mounts.append(point)
    return mounts


def unmount_all():
    for _ in range(3):
        for point in reversed(our_mounts()):
            run(["umount", point], check=False, quiet=True)
    for point in reversed(our_mounts()):
        run(["umount", "-l", point], check=False, quiet=True)


def down():
    ledger = load_ledger()
    stop_hollow_nodes()
    for index in range(1, NODES + 1):
        stop(f"vf-plugin-{index}")
        stop(f"kubelet-{index}")
    for index in range(1, NODES + 1):
        if pid_of(f"containerd-{index}") and alive(pid_of(f"containerd-{index}")):
            stop_pods(index)
    for name in ("moto-s3", "vc-scheduler", "vc-controller-manager", "coredns", "kube-proxy", "kube-scheduler", "kube-controller-manager"):
        stop(name)
    for family, table in KUBE_PROXY_TABLES:
        if (family, table) in nft_tables() and (family, table) not in map(tuple, ledger.get("nft", [])):
            run(["nft", "delete", "table", family, table], check=False)
    for index in range(1, NODES + 1):
        stop(f"containerd-{index}")
    for pid in shims():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for index in range(1, NODES + 1):
        kill_cgroup_processes(index)
    stop("kube-apiserver")
    stop("etcd")
    time.sleep(0.5)
    for index in range(1, NODES + 1):
        remove_cgroups(index)
    unmount_all()
    for name in netns_names():
        if name.startswith("cni-") and name not in ledger.get("netns", []):
            run(["ip", "netns", "delete", name], check=False, quiet=True)
    for link in (BRIDGE, SECOND_LINK):
        if Path(f"/sys/class/net/{link}").exists():
            run(["ip", "link", "delete", link], check=False)
    restore_sysctls(ledger.get("sysctls", {}))
    preexisting = ledger.get("preexisting", FIXED_PATHS)
    for path in FIXED_PATHS:
        if path not in preexisting and os.path.lexists(path):
            shutil.rmtree(path, ignore_errors=True)
    run(["podman", "rmi", "--force", PAUSE_IMAGE, FLOOD_IMAGE], check=False, quiet=True)
    problems = leftovers(ledger)
    if STATE.exists():
        shutil.rmtree(STATE, ignore_errors=True)
    if STATE.exists():
        problems.append(f"{STATE} still exists")
    for problem in problems:
        log(f"leftover: {problem}")
    log(f"leftovers: {len(problems)}")
    return problems


def leftovers(ledger):
    problems = []
    binaries = [str(BIN / name) for name in REQUIRED_BINARIES + VOLCANO_BINARIES]
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if not alive(int(pid)):
            continue
        if str(STATE) in cmdline or any(cmdline.startswith(binary) for binary in binaries):
            problems.append(f"process {pid}: {cmdline[:160]}")
    for index in range(1, NODES + 1):
        problems += [f"cgroup {path}" for path in cgroup_dirs(index) if path.exists()]
    problems += [f"mount {point}" for point in our_mounts()]
    problems += [f"path {path}" for path in sorted(hollow_dirs() - set(ledger.get("hollow_dirs", hollow_dirs())))]
    problems += [f"netns {name}" for name in netns_names() if name not in ledger.get("netns", [])]
    problems += [f"link {link}" for link in (BRIDGE, SECOND_LINK) if Path(f"/sys/class/net/{link}").exists()]
    problems += [f"veth {name}" for name in os.listdir("/sys/class/net") if name.startswith("veth")]
    if "nft" in ledger:
        before = set(map(tuple, ledger["nft"]))
        problems += [f"nftables table {family} {name}" for family, name in nft_tables() if (family, name) not in before]
    if "iptables" in ledger:
        before, after = set(ledger["iptables"]), set(iptables_rules())
        problems += [f"iptables rule {rule}" for rule in sorted(after - before)]
    preexisting = ledger.get("preexisting", FIXED_PATHS)
    problems += [f"path {path}" for path in FIXED_PATHS if path not in preexisting and os.path.lexists(path)]
    for name, value in ledger.get("sysctls", {}).items():
        if Path("/proc/sys", name).read_text().strip() != value:
            problems.append(f"sysctl {name}")
    return problems


# ---------------------------------------------------------------- the suite


def suite_env():
    return {
        **os.environ,
        "PERFSWEEP_E2E": "1",
        "KUBECONFIG": str(kubeconfig()),
        "PERFSWEEP_E2E_IMAGE": f"ghcr.io/perfsweep/iperf:{VERSION}",
        "PERFSWEEP_E2E_OPERATOR": f"in-cluster:{NAMESPACE}",
        "PERFSWEEP_E2E_SERVICE_ACCOUNT": f"{NAMESPACE}:perfsweep",
        "PERFSWEEP_E2E_NODES": ",".join(node_name(i) for i in range(1, NODES + 1)),
        "PERFSWEEP_E2E_STATE": str(STATE),
        "PERFSWEEP_E2E_HARNESS": str(Path(__file__).resolve()),
        "PERFSWEEP_E2E_SCHEDULER": "volcano" if have_volcano() else "default",
        "PERFSWEEP_E2E_VOLCANO": "1" if have_volcano() else "0",
        "PERFSWEEP_E2E_S3": S3_URL,
        # An address of this machine that pods (the operator's included) reach.
        "PERFSWEEP_E2E_HOST_IP": API_IP,
        # The Multus network the harness made, and what it is.
        "PERFSWEEP_E2E_NETWORK": f"{MACVLAN_NAD},{MACVLAN_SUBNET},{MACVLAN_MTU}",
        "PERFSWEEP_E2E_RELEASE": f"{NAMESPACE}/{RELEASE}",
        "PERFSWEEP_E2E_STORAGE_CLASS": LOCAL_STORAGE_CLASS,
        "PERFSWEEP_E2E_FLOOD": f"{FLOOD_IMAGE},{FLOOD_MIB}",
        # The stand-in VFs: resource, devices per node, the nodes that have them.
        "PERFSWEEP_E2E_VF": ",".join([VF_RESOURCE, str(VF_PER_NODE), *(node_name(i) for i in VF_NODES)]),
    }


# The suites, in order: every kind and the faults, then the shared-cluster checks
# (the admission policy's CEL, a foreign pod steering an agent, a foreign export
# endpoint, a NameConflict), which only a real API server can judge.
# The lifecycle suite comes last: it upgrades and finally uninstalls the chart.
# The fleet suite runs over a few hollow nodes here (`fleet N` takes more), so that every
# run plans, creates and places a node-pair round beside kubemark's kubelets.
SUITES = ("real_cluster", "real_cluster_security", "real_cluster_fleet", "real_cluster_lifecycle")
FLEET_TEST = "a_node_pair_sweep_over_hollow_nodes_plans_creates_and_places_its_first_round"
FLEET_NODES_IN_RUN = 20


# What `run` prints again at its end (and keeps in SUMMARY): per kind and fault the phase,
# figure and time the suite reports (its `E2E ...` lines), failures, and each suite's result.
SUMMARY = ROOT / "target" / "e2e-summary.txt"
summary = []


def keep_for_summary(line):
    if line.startswith(("E2E ", "test result:", "failures:")) or " E2E " in line or line.endswith("FAILED"):
        summary.append(line[:400])


def test(filters):
    worst = 0
    for suite in SUITES:
        env = suite_env()
        hollow = suite == "real_cluster_fleet"
        if hollow:
            if filters and not any(f in FLEET_TEST for f in filters):
                log(f"e2e suite {suite}: no test of it matches {filters}")
                continue
            if not (BIN / "kubemark").exists():
                message = f"e2e suite {suite}: SKIPPED, no kubemark in {BIN} (cmd/kubemark of the same Kubernetes tree)"
                log(message)
                summary.append(message)
                continue
            start_hollow_nodes(FLEET_NODES_IN_RUN)
            env.update(fleet_env(FLEET_NODES_IN_RUN))
        command = ["cargo", "test", "-p", "perfsweep", "--test", suite, "--", "--ignored", "--test-threads=1", "--nocapture", *filters]
        log(" ".join(command))
        started = time.time()
        try:
            with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                                  errors="replace") as suite_run:
                for line in suite_run.stdout:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    keep_for_summary(line.rstrip("\n"))
        finally:
            if hollow:
                log(hollow_memory())
                stop_hollow_nodes()
        message = f"e2e suite {suite}: exit {suite_run.returncode} after {time.time() - started:.0f}s; {disk_left()}"
        log(message)
        summary.append(message)
        if suite_run.returncode != 0:
            # CI shows only the end of its log: the cluster's state goes into the summary.
            for line in cluster_state():
                log(line)
                summary.append(f"state after {suite}: {line}"[:400])
        worst = worst or suite_run.returncode
    return worst


def disk_left():
    """What the kubelets' eviction thresholds watch: the free space of the disk the nodes'
    containerd roots and pods' volumes are on."""
    free = shutil.disk_usage(STATE if STATE.exists() else "/").free
    return f"{free / 2**30:.1f} GiB free on the nodes' disk"


def cluster_state():
    """What a failed suite left that could explain it, in a few lines: nodes that are not
    Ready or report a pressure, their taints, pods that neither run nor succeeded (with
    the node and the reason), the newest warning events and each kubelet's last errors."""
    lines = [disk_left()]
    nodes = kubectl("get", "nodes", "-o", "json", check=False, quiet=True)
    if nodes.returncode != 0:
        return [f"nodes unreadable: {nodes.stderr.strip()[:200]}"]
    for node in json.loads(nodes.stdout)["items"]:
        name = node["metadata"]["name"]
        odd = [f"{c['type']}={c['status']} ({c.get('reason', '')}: {c.get('message', '')[:80]})"
               for c in node["status"].get("conditions", [])
               if (c["type"] == "Ready") != (c["status"] == "True")]
        taints = [f"{t['key']}:{t['effect']}" for t in node["spec"].get("taints", [])]
        unschedulable = ["cordoned"] if node["spec"].get("unschedulable") else []
        if odd or taints or unschedulable:
            lines.append(f"node {name}: {'; '.join(odd + taints + unschedulable)}")
    pods = kubectl("get", "pods", "-A", "-o", "json", check=False, quiet=True)
    if pods.returncode == 0:
        for pod in json.loads(pods.stdout)["items"]:
            meta, status = pod["metadata"], pod.get("status", {})
            phase = status.get("phase", "")
            if phase in ("Running", "Succeeded") and "deletionTimestamp" not in meta:
                continue
            waiting = [s["state"]["waiting"].get("reason", "") for s in status.get("containerStatuses", [])
                       if "waiting" in s.get("state", {})]
            why = status.get("reason") or ",".join(waiting) or next(
                (c.get("message", "")[:120] for c in status.get("conditions", []) if c["status"] != "True"), "")
            deleting = " (deleting)" if "deletionTimestamp" in meta else ""
            lines.append(f"pod {meta['namespace']}/{meta['name']} on {pod['spec'].get('nodeName', '-')}: "
                         f"{phase}{deleting} {why}")
    events = kubectl("get", "events", "-A", "--field-selector=type=Warning", "--sort-by=.lastTimestamp",
                     "-o", "json", check=False, quiet=True)
    if events.returncode == 0:
        for event in json.loads(events.stdout)["items"][-15:]:
            involved = event.get("involvedObject", {})
            lines.append(f"event {involved.get('kind')} {involved.get('namespace', '')}/{involved.get('name')}: "
                         f"{event.get('reason')}: {event.get('message', '')[:200]}")
    for index in range(1, NODES + 1):
        path = STATE / "logs" / f"kubelet-{index}.log"
        if path.exists():
            errors = [line for line in path.read_text(errors="replace").splitlines() if line.startswith("E")]
            lines += [f"kubelet-{index}: {line[:300]}" for line in errors[-5:]]
    return lines[:80]


def write_summary(problems):
    summary.append(f"leftovers: {len(problems)}")
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text("\n".join(summary) + "\n")
    log(f"summary (also in {SUMMARY}):")
    for line in summary:
        print(f"  {line}", flush=True)


# ---------------------------------------------------------------- hollow nodes

# Kubemark's hollow kubelets: real kubelets (node registration, status, leases, pod
# admission and status) over a fake container runtime, one process each, for a fleet
# larger than this machine. They register labelled and tainted, so that only a benchmark
# that selects and tolerates them lands there (and nothing of the regular suites does).
HOLLOW_PREFIX = "psw-hollow-"
HOLLOW_LABEL = "perfsweep.io/hollow"
HOLLOW_PORTS = 30000


def hollow_dirs():
    """The root directories hollow kubelets make: kubemark puts them in /tmp, whatever
    TMPDIR says."""
    return {str(path) for path in Path("/tmp").glob("hollow-kubelet.*")}


def hollow_pids():
    pids = STATE / "pids"
    return {path.name: int(path.read_text()) for path in pids.glob("hollow-*")} if pids.exists() else {}


def hollow_ready():
    out = kubectl("get", "nodes", "-l", HOLLOW_LABEL, "-o", "json", check=False, quiet=True)
    if out.returncode != 0:
        return 0
    return sum(1 for node in json.loads(out.stdout)["items"]
               if any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", [])))


def start_hollow_nodes(count):
    """COUNT hollow nodes (psw-hollow-1...), started in batches so that registration does
    not swamp the API server; returns when they are all Ready."""
    if not (BIN / "kubemark").exists():
        raise SystemExit(f"no kubemark in {BIN}: build cmd/kubemark of the same Kubernetes tree")
    scratch = STATE / "hollow"
    scratch.mkdir(exist_ok=True)
    ledger = load_ledger()
    ledger.setdefault("hollow_dirs", sorted(hollow_dirs()))
    save_ledger(ledger)
    started = time.time()
    for index in range(1, count + 1):
        start(f"hollow-{index}", [
            BIN / "kubemark", "--morph=kubelet", f"--name={HOLLOW_PREFIX}{index}",
            f"--kubeconfig={kubeconfig()}",
            f"--kubelet-port={HOLLOW_PORTS + index}", "--kubelet-read-only-port=0",
            f"--node-labels={HOLLOW_LABEL}=true",
            f"--register-with-taints={HOLLOW_LABEL}=true:NoSchedule",
            "--use-host-image-service=false", "--max-pods=110", "--v=0",
        # Each hollow kubelet makes its root directory under TMPDIR: keep it in STATE.
        ], env={"TMPDIR": str(scratch)})
        if index % 50 == 0:
            wait_for(f"{index} hollow nodes Ready", lambda n=index: hollow_ready() >= n, timeout=600, interval=2)
    wait_for(f"{count} hollow nodes Ready", lambda: hollow_ready() >= count, timeout=600, interval=2)
    log(f"{count} hollow nodes Ready in {time.time() - started:.0f}s; {hollow_memory()}")


def hollow_memory():
    """The hollow kubelets' memory as the machine pays it: proportional set size (their
    resident size counts kubemark's shared binary once per process, about 55 MiB each)."""
    rss, pss = [], []
    for pid in hollow_pids().values():
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("Rss", "Pss"):
                    (rss if key == "Rss" else pss).append(int(value.split()[0]) * 1024)
        except OSError:
            pass
    if not pss:
        return "no hollow node running"
    return (f"hollow kubelets' memory: proportional {sum(pss) / 2**30:.2f} GiB ({sum(pss) / len(pss) / 2**20:.1f} MiB each), "
            f"resident {sum(rss) / 2**30:.2f} GiB ({sum(rss) / len(rss) / 2**20:.0f} MiB each, the shared binary counted in each)")


def stop_hollow_nodes():
    """Every hollow kubelet killed at once (their state is STATE's), their Node objects
    deleted."""
    pids = hollow_pids()
    for name, pid in pids.items():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        (STATE / "pids" / name).unlink(missing_ok=True)
    wait_for("the hollow kubelets gone", lambda: not any(alive(pid) for pid in pids.values()), timeout=60)
    before = set(load_ledger().get("hollow_dirs", hollow_dirs()))
    for path in hollow_dirs() - before:
        shutil.rmtree(path, ignore_errors=True)
    if pids:
        kubectl("delete", "nodes", "-l", HOLLOW_LABEL, "--wait=false", check=False, quiet=True)


def fleet_env(count):
    return {"PERFSWEEP_E2E_HOLLOW": f"{HOLLOW_LABEL},{count}", "PERFSWEEP_E2E_AUDIT_LOG": str(AUDIT_LOG)}


def fleet(count, filters, mode="AllPairs"):
    """The fleet suite over COUNT hollow nodes beside the cluster's real ones, sweeping them
    in node-pair MODE (AllPairs, or Ring for a fleet whose all-pairs plan is over the
    operator's ceiling)."""
    start_hollow_nodes(count)
    env = {**suite_env(), **fleet_env(count), "PERFSWEEP_E2E_HOLLOW_MODE": mode}
    command = ["cargo", "test", "-p", "perfsweep", "--test", "real_cluster_fleet", "--",
               "--ignored", "--test-threads=1", "--nocapture", *filters]
    log(" ".join(command))
    try:
        code = subprocess.run(command, cwd=ROOT, env=env).returncode
    finally:
        log(hollow_memory())
        stop_hollow_nodes()
    return code


# Fault helpers the Rust suite calls (through PERFSWEEP_E2E_HARNESS) for what only the
# machine can do.
def fault(action, target):
    if action in ("slow", "unslow"):
        if not target.startswith("kubelet-"):
            raise SystemExit(f"only a kubelet's node can be slowed, not {target}")
        set_cpu_quota(int(target.split("-")[1]), SLOW_CPU_SHARE if action == "slow" else None)
    elif action == "kill":
        namespace, _, pod = target.partition("/")
        kill_pod_containers(namespace, pod)
    elif action == "stop":
        stop(target)
    elif action == "start":
        if target == "kube-apiserver":
            start_apiserver()
            wait_for("the API server", api_ready, timeout=120)
        elif target.startswith("kubelet-"):
            start_kubelet(int(target.split("-")[1]))
            node = node_name(int(target.split("-")[1]))
            wait_for(f"{target} Ready", lambda: node_ready(node), timeout=120)
            # Ready is not enough: until the node lifecycle controller lifts the
            # unreachable/not-ready taints, schedulers count one node fewer, and the next
            # test's two-role benchmark had nowhere to put its second pod.
            wait_for(f"{node} without NotReady taints", lambda: not lifecycle_taints(node), timeout=120)
            restore_sysctls({**load_ledger().get("sysctls", {}), **CLUSTER_SYSCTLS})
        else:
            raise SystemExit(f"cannot start {target}")
    else:
        raise SystemExit(f"unknown fault action {action}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up_parser = sub.add_parser("up")
    up_parser.add_argument("images", nargs="*", default=IMAGES)
    sub.add_parser("down")
    test_parser = sub.add_parser("test")
    test_parser.add_argument("filters", nargs="*")
    run_parser = sub.add_parser("run")
    run_parser.add_argument("filters", nargs="*")
    sub.add_parser("check")
    fault_parser = sub.add_parser("fault")
    fault_parser.add_argument("action", choices=["stop", "start", "slow", "unslow", "kill"])
    fault_parser.add_argument("target", help="a component, kubelet-N, or NAMESPACE/POD for kill")
    fleet_parser = sub.add_parser("fleet", help="the fleet suite over hollow nodes (kubemark), on an up cluster")
    fleet_parser.add_argument("count", type=int)
    fleet_parser.add_argument("filters", nargs="*")
    fleet_parser.add_argument("--mode", choices=["AllPairs", "Ring"], default="AllPairs",
                              help="the node-pair mode of the sweep (Ring: N children in 2 rounds)")
    chart_parser = sub.add_parser("chart", help="the release's lifecycle, for the lifecycle suite")
    chart_parser.add_argument("action", choices=["install", "upgrade", "uninstall"])
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the cluster needs root (bridges, mounts, cgroups)")
    if args.command == "check":
        missing, tools = check_binaries()
        print(json.dumps({"bin": str(BIN), "missing_binaries": missing, "missing_tools": tools}))
        sys.exit(1 if missing or tools else 0)
    if args.command == "up":
        up(args.images)
    elif args.command == "down":
        sys.exit(1 if down() else 0)
    elif args.command == "test":
        sys.exit(test(args.filters))
    elif args.command == "fleet":
        sys.exit(fleet(args.count, args.filters, args.mode))
    elif args.command == "fault":
        fault(args.action, args.target)
    elif args.command == "chart":
        {"install": install_chart, "upgrade": upgrade_chart, "uninstall": uninstall_chart}[args.action]()
    elif args.command == "run":
        code = 1
        # Down always runs, also on Ctrl-C or SIGTERM (CI's timeout).
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            started = time.time()
            up(IMAGES)
            summary.append(f"cluster up in {time.time() - started:.0f}s")
            code = test(args.filters)
        finally:
            problems = down()
            write_summary(problems)
        sys.exit(code or (1 if problems else 0))


if __name__ == "__main__":
    main()
