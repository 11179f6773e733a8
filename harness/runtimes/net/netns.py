"""Network namespaces on a bridge: one namespace per node, real addresses.

Layout of one fabric (tag ``t``, subnet ``10.213.S.0/24``)::

    kw-t-br   a namespace holding only the bridge ``br0``
    kw-t-n1   node n1: ``eth0`` = 10.213.S.11, its veth peer ``n1`` on br0
    kw-t-n2   node n2: ``eth0`` = 10.213.S.12, ...
    kw-t      (root namespace) the clients' end: 10.213.S.1, peer ``host`` on br0

Why the clients' end lives in the root namespace: the harness's clients
(confluent-kafka, with librdkafka's own threads), its observer and its
control calls then reach every node by its real address with no thread
entering a namespace (``setns`` is per thread, and librdkafka starts threads
of its own). The cost is one ``kw-`` veth and one /24 route in the root
namespace; the /24 is chosen free of every address and route the root
namespace already has, and every other address of it is used only inside
namespaces the fabric made. Clients are a node of the grudge like any
other: their address is the source iptables matches (:mod:`harness.runtimes.net.iptables`).

Processes are started with ``ip netns exec NS argv`` (argv, never a shell
string), which keeps their pid, so they are signalled like local processes.

Ownership: before anything is made, ``/run/kraftwerk-net/<tag>.json`` names
the harness process (pid and start time) and the subnet. ``sweep()`` (run by
``kraftwerk cleanup``) finds every ``kw-`` namespace by name, and removes
those whose owner is gone (all with ``force``): it kills every process inside
(SIGCONT then SIGKILL), deletes the namespace (its veths go with it) and the
record. So a SIGKILLed harness leaves nothing that cleanup cannot find.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from harness.errors import HarnessError, UsageError
from reference_impl.server.procs import alive, proc_start_time

PREFIX = "kw-"
SUBNET_PREFIX = "10.213"
CLIENT_HOST = 1
NODE_HOST_BASE = 10
OWNER_DIR = Path(os.environ.get("KRAFTWERK_NET_DIR", "/run/kraftwerk-net"))
#: fabric kinds that outlive the command that made them (never swept)
PERSISTENT = ("hosts", "cluster")
_NAME_RE = re.compile(r"^[a-z0-9]{1,12}$")


def ip(*args: str, timeout: float = 20.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` (argv); a failure is one line naming the command."""
    return run(["ip", *args], timeout=timeout, check=check)


def run(argv: Sequence[str], timeout: float = 20.0, check: bool = True,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=input)
    except FileNotFoundError:
        raise HarnessError(f"{argv[0]} is not installed (scripts/bootstrap installs it)") from None
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{' '.join(argv[:6])}: no answer in {timeout:.0f}s") from None
    if check and p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise HarnessError(f"{' '.join(argv[:8])}: {err[-1] if err else f'exit {p.returncode}'}")
    return p


def require_root(what: str, tools: Sequence[str] = ("ip", "iptables", "iptables-restore")) -> None:
    """Namespaces and firewall rules need root: refuse before anything starts.
    ``what`` names the command (``--backend netns``, ``hosts up``)."""
    if os.geteuid() != 0:
        raise UsageError(f"{what} needs root (network namespaces and iptables); run as root or use --backend local")
    for tool in tools:
        if shutil.which(tool) is None:
            raise UsageError(f"{what} needs {tool}, which is not installed (scripts/bootstrap installs it)")


def list_namespaces() -> list[str]:
    p = ip("netns", "list", check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


@contextmanager
def _lock() -> Iterator[None]:
    OWNER_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(OWNER_DIR / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _records() -> dict[str, dict]:
    out = {}
    for f in OWNER_DIR.glob("*.json"):
        try:
            out[f.stem] = json.loads(f.read_text())
        except (OSError, ValueError):
            out[f.stem] = {}
    return out


def _subnets_in_use() -> set[int]:
    """Third octets of 10.213.x.0/24 that the root namespace or a fabric uses."""
    used = {int(r["subnet"]) for r in _records().values() if "subnet" in r}
    text = ip("-o", "addr").stdout + ip("route").stdout
    for m in re.finditer(r"\b10\.213\.(\d+)\.", text):
        used.add(int(m.group(1)))
    if re.search(r"\b10\.0\.0\.0/8\b|\b10\.(?:192|208)\.0\.0/1[0-5]\b", text):
        raise HarnessError("the root namespace routes 10.213.0.0/16 already; cannot choose a private /24")
    return used


@dataclass
class Fabric:
    """Namespaces, bridge and veths of one run (or one ``hosts up``)."""

    tag: str
    subnet: int
    addresses: dict[str, str] = field(default_factory=dict)

    # ---------------------------------------------------------------- names
    def ns(self, node: str) -> str:
        return f"{PREFIX}{self.tag}-{node}"

    @property
    def bridge_ns(self) -> str:
        return f"{PREFIX}{self.tag}-br"

    @property
    def client_link(self) -> str:
        return f"{PREFIX}{self.tag}"

    @property
    def client_address(self) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet}.{CLIENT_HOST}"

    def exec_argv(self, node: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the node's namespace (same pid: ``ip netns exec`` execs)."""
        return ["ip", "netns", "exec", self.ns(node), *argv]

    # ---------------------------------------------------------------- life
    @classmethod
    def create(cls, nodes: Sequence[str], tag: str | None = None, kind: str = "run", **extra: str) -> "Fabric":
        """Make the namespaces, bridge and links for ``nodes``; on any failure
        remove what was made and raise."""
        for n in nodes:
            if not _NAME_RE.match(n) or n == "br":
                raise UsageError(f"node name {n!r}: a namespace node name is 1-12 lowercase letters or digits, not 'br'")
        tag = tag or secrets.token_hex(3)
        fab = cls(tag, allocate_subnet(tag, kind, **extra))
        try:
            fab._build(list(nodes))
        except BaseException:
            fab.destroy()
            raise
        return fab

    def _build(self, nodes: list[str]) -> None:
        br = self.bridge_ns
        ip("netns", "add", br)
        ip("-n", br, "link", "set", "lo", "up")
        ip("-n", br, "link", "add", "br0", "type", "bridge")
        ip("-n", br, "link", "set", "br0", "up")
        for i, node in enumerate(nodes):
            self.add_node(node, NODE_HOST_BASE + 1 + i)
        ip("link", "add", self.client_link, "type", "veth", "peer", "name", "host", "netns", br)
        ip("-n", br, "link", "set", "host", "master", "br0", "up")
        ip("addr", "add", f"{self.client_address}/24", "dev", self.client_link)
        ip("link", "set", self.client_link, "up")

    def add_node(self, node: str, host: int) -> str:
        ns, br = self.ns(node), self.bridge_ns
        addr = f"{SUBNET_PREFIX}.{self.subnet}.{host}"
        ip("netns", "add", ns)
        ip("-n", br, "link", "add", node, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("-n", br, "link", "set", node, "master", "br0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        self.addresses[node] = addr
        return addr

    def destroy(self) -> None:
        """Kill whatever runs inside, delete every namespace of the tag; idempotent."""
        remove_tag(self.tag)


def allocate_subnet(tag: str, kind: str, **extra: str) -> int:
    """A free third octet of 10.213.0.0/16, recorded under ``tag`` with this
    process as owner (``kind``: run, hosts, docker) before anything is made."""
    with _lock():
        used = _subnets_in_use()
        free = [s for s in range(1, 255) if s not in used]
        if not free:
            raise HarnessError("no free /24 left in 10.213.0.0/16 for a fabric")
        me = os.getpid()
        (OWNER_DIR / f"{tag}.json").write_text(json.dumps(
            {"tag": tag, "subnet": free[0], "kind": kind, "pid": me, "start": proc_start_time(me),
             "created": time.time(), **extra}))
        return free[0]


def release_subnet(tag: str) -> None:
    (OWNER_DIR / f"{tag}.json").unlink(missing_ok=True)


def _tag_of(ns: str) -> str | None:
    m = re.match(rf"^{PREFIX}([0-9a-z]+)-[a-z0-9]+$", ns)
    return m.group(1) if m else None


def kill_namespace_processes(ns: str) -> int:
    """SIGCONT then SIGKILL every process in ``ns``; returns how many there were."""
    pids = [int(p) for p in ip("netns", "pids", ns, check=False).stdout.split() if p.isdigit()]
    for sig in (signal.SIGCONT, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(pids)


def remove_tag(tag: str) -> list[str]:
    """Remove every namespace of ``tag`` (processes first), its client link
    and its owner record. Returns the namespaces removed."""
    gone = []
    for ns in list_namespaces():
        if _tag_of(ns) == tag:
            kill_namespace_processes(ns)
            ip("netns", "delete", ns, check=False)
            gone.append(ns)
    ip("link", "delete", f"{PREFIX}{tag}", check=False)
    (OWNER_DIR / f"{tag}.json").unlink(missing_ok=True)
    return gone


def owner_alive(rec: dict) -> bool:
    pid = rec.get("pid")
    return isinstance(pid, int) and alive(pid, rec.get("start"))


def sweep(force: bool = False) -> list[str]:
    """Remove every ``kw-`` namespace whose owner is gone (all with ``force``),
    and stale owner records. Idempotent; returns the namespaces removed."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return []
    recs = _records() if OWNER_DIR.is_dir() else {}
    tags = {t for t in (_tag_of(ns) for ns in list_namespaces()) if t} | set(recs)
    for line in ip("-o", "link", check=False).stdout.splitlines():
        m = re.match(rf"^\d+: {PREFIX}([0-9a-z]+)[@:]", line)
        if m:
            tags.add(m.group(1))
    removed: list[str] = []
    for tag in sorted(tags):
        rec = recs.get(tag)
        if not force and rec is not None and owner_alive(rec) and rec.get("pid") != os.getpid():
            continue
        if rec is not None and rec.get("kind") in PERSISTENT:
            continue  # no run's: they live until `kraftwerk hosts down` / `cluster down`
        removed += remove_tag(tag)
    return removed
