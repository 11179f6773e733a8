"""The ``local`` backend: node processes on 127.0.0.1, no root needed.

Every connection between two nodes, and from clients to a node, goes through
a harness-owned proxy link (``harness.runtimes.proxy``), one per directed pair:

* node ``i`` reaches node ``j`` at the port of link ``ni->nj`` — given to ``i``
  through its own ``--controller-quorum`` (voters) and ``--peer`` (brokers);
* a broker registers ``--advertise`` = the port of link ``client->nj``, so the
  Metadata clients receive points them at the proxy, never at the node.

So a partition of any shape or added latency is a proxy setting, and process
faults are signals (SIGKILL, SIGSTOP/SIGCONT) or control-endpoint calls
(clock offset, power loss). Every process is started in its own session,
carries ``KRAFTWERK_RUN_ID`` and is recorded in the run's state file before
the harness does anything else with it (``kraftwerk cleanup``); it holds the
run's lease and ends on its own when the harness dies (``harness.rundir.lease``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness.dbs.admin import alter_partition_reassignment, unregister_broker
from harness.errors import HarnessError
from harness.rundir.state import RunState
from harness.rundir.timers import Timers
from harness.runtimes.local import allocate_ports
from harness.runtimes.proxy import ProxyControl
from nemesis.control import CLIENT, Capability, Link, Unsupported
from reference_impl.core.storage import CLEAN_SHUTDOWN
from reference_impl.server import auth

#: what the local backend can make (no per-message loss: the proxies carry
#: TCP streams, which lose no bytes; no exec or files beyond this machine)
CAPABILITIES = frozenset({
    Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.POWER_LOSS, Capability.CLOCK,
    Capability.CLOCK_STROBE, Capability.PARTITION, Capability.PARTITION_CLIENTS, Capability.LATENCY,
    Capability.REASSIGN, Capability.UNREGISTER,
})

HOST = "127.0.0.1"


@dataclass
class NodeSpec:
    name: str
    node_id: int
    roles: list[str]
    listen: int
    control: int
    client_port: int  # the client->node proxy link (advertised)
    peer_ports: dict[str, int] = field(default_factory=dict)  # peer name -> port of link self->peer


def ports_needed(n: int) -> int:
    """listen + control + client link per node, plus one link per ordered pair."""
    return 3 * n + n * (n - 1) + 1  # +1: proxy control


def plan_nodes(layout: list[tuple[str, int, list[str]]], ports: list[int]) -> tuple[list[NodeSpec], int]:
    """Assign ports to (name, id, roles): listen, control and client link per
    node, then one link per ordered pair, then the proxy's control port."""
    it = iter(ports)
    specs = []
    for name, node_id, roles in layout:
        specs.append(NodeSpec(name, node_id, list(roles), next(it), next(it), next(it)))
    for a in specs:
        for b in specs:
            if a is not b:
                a.peer_ports[b.name] = next(it)
    return specs, next(it)


class LocalCluster:
    """Node processes on this machine: the cluster contract
    (``nemesis.control``) as processes, signals, the per-link proxy and each
    node's control endpoint. It is its own :class:`NodeControl` and
    :class:`Observer`; ``net`` and ``clock`` are :class:`ProxyNetwork` and
    :class:`ControlClock`."""

    runtime = "local"
    capabilities = CAPABILITIES

    def __init__(
        self,
        layout: list[tuple[str, int, list[str]]],
        run_dir: Path,
        state: RunState,
        base_port: int = 0,
        node_args: list[str] | None = None,
        seed: int = 0,
    ) -> None:
        self.run_dir = run_dir
        self.state = state
        self.seed = seed
        self.node_args = node_args or []
        ports = allocate_ports(ports_needed(len(layout)), base_port)
        self.specs, self.control_port = plan_nodes(layout, ports)
        self.by_name = {s.name: s for s in self.specs}
        self.procs: dict[str, subprocess.Popen] = {}
        self.paused: set[str] = set()
        #: how each node's latest SIGTERM ended (True: clean-shutdown marker written)
        self.shutdowns: dict[str, bool] = {}
        self.proxy_proc: subprocess.Popen | None = None
        self.proxy: ProxyControl | None = None
        self._keys: list[str] = []
        self._storage_mode = "os"
        # the cluster secret (reference_impl/server/auth.py): nodes and the
        # proxy answer only callers that present it
        (self.run_dir / "nodes").mkdir(parents=True, exist_ok=True)
        self.secret_file = auth.ensure_secret_file(str(self.run_dir / "nodes" / "cluster.secret"))
        self.secret = auth.load_secret(self.secret_file)
        self.net = ProxyNetwork(self)
        self.clock = ControlClock(self)
        self.timers = Timers()

    def after(self, delay_ms: int, fn: Any) -> None:
        self.timers.after(delay_ms, fn)

    @property
    def nodes(self) -> "LocalCluster":
        return self

    @property
    def observer(self) -> "LocalCluster":
        return self

    # ------------------------------------------------------------ topology
    def node_names(self) -> list[str]:
        return [s.name for s in self.specs]

    def brokers(self) -> list[str]:
        return [s.name for s in self.specs if "broker" in s.roles]

    def controllers(self) -> list[str]:
        return [s.name for s in self.specs if "controller" in s.roles]

    def client_bootstrap(self) -> str:
        return ",".join(f"{HOST}:{self.by_name[b].client_port}" for b in self.brokers())

    def links(self) -> list[dict[str, Any]]:
        out = []
        for a in self.specs:
            for b, port in a.peer_ports.items():
                out.append({"src": a.name, "dst": b, "listen": port, "target": self.by_name[b].listen})
            out.append({"src": CLIENT, "dst": a.name, "listen": a.client_port, "target": a.listen})
        return out

    def node_command(self, s: NodeSpec, storage_mode: str) -> list[str]:
        voters = [x for x in self.specs if "controller" in x.roles]
        quorum = ",".join(
            f"{v.node_id}@{HOST}:{v.listen if v is s else s.peer_ports[v.name]}" for v in voters
        )
        peers = ",".join(f"{self.by_name[b].node_id}={HOST}:{p}" for b, p in s.peer_ports.items())
        cmd = [
            sys.executable, "-c", "from harness.cli import main; main()", "node",
            "--id", str(s.node_id),
            "--roles", ",".join(s.roles),
            "--listen", f"{HOST}:{s.listen}",
            "--advertise", f"{HOST}:{s.client_port}",
            "--controller-quorum", quorum,
            "--data-dir", str(self.node_dir(s.name)),
            "--control", f"{HOST}:{s.control}",
            "--storage-mode", storage_mode,
            "--seed", str(self.seed * 101 + s.node_id),
            "--secret-file", self.secret_file,
        ]
        if peers:
            cmd += ["--peer", peers]
        return cmd + self.node_args

    def node_dir(self, name: str) -> Path:
        return self.run_dir / "nodes" / name

    # ------------------------------------------------------------ processes
    def _spawn(self, cmd: list[str], log: Path, role: str, name: str, stdout: Any = None) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as err:
            p = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=stdout if stdout is not None else err,
                stderr=err,
                cwd=str(Path(__file__).resolve().parents[3]),
                **self.state.spawn_options(),  # own session, run id, lease (harness.rundir.lease)
            )
        self.state.add_process(p.pid, role, name)
        return p

    def start_proxy(self) -> None:
        links_file = self.run_dir / "nodes" / "proxy-links.json"
        links_file.write_text(json.dumps(self.links(), indent=1))
        self.proxy_proc = self._spawn(
            [sys.executable, "-m", "harness.runtimes.proxy", "--links", str(links_file),
             "--control-port", str(self.control_port), "--seed", str(self.seed), "--secret-file", self.secret_file],
            self.run_dir / "nodes" / "proxy.log", "proxy", "proxy", stdout=subprocess.PIPE,
        )
        assert self.proxy_proc.stdout is not None
        line = self.proxy_proc.stdout.readline().decode().strip()
        try:
            msg = json.loads(line) if line else {"error": "proxy exited"}
        except json.JSONDecodeError:
            msg = {"error": line}
        if "control" not in msg:
            raise HarnessError(f"proxy failed to start: {msg.get('error')}")
        self.proxy = ProxyControl(int(msg["control"]), secret=self.secret)

    def start(self, name: str, storage_mode: str | None = None) -> None:
        s = self.by_name[name]
        mode = storage_mode or self._storage_mode
        p = self.procs.get(name)
        if p is not None and p.poll() is None:
            return
        self.paused.discard(name)
        self.procs[name] = self._spawn(self.node_command(s, mode), self.node_dir(name) / "stderr.log", "node", name)

    def start_all(self, storage_mode: str) -> None:
        self._storage_mode = storage_mode
        for s in self.specs:
            self.start(s.name, storage_mode)

    def alive(self, name: str) -> bool:
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def dead_nodes(self) -> list[str]:
        return [n for n in self.node_names() if not self.alive(n)]

    def paused_nodes(self) -> list[str]:
        return sorted(n for n in self.paused if self.alive(n))

    def live_nodes(self) -> list[str]:
        return [n for n in self.node_names() if self.alive(n) and n not in self.paused]

    def kill(self, name: str) -> None:
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=10)
        self.paused.discard(name)

    def pause(self, name: str) -> None:
        p = self.procs.get(name)
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGSTOP)
            self.paused.add(name)

    def resume(self, name: str) -> None:
        p = self.procs.get(name)
        if name in self.paused and p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGCONT)
        self.paused.discard(name)

    def terminate(self, name: str) -> None:
        """SIGTERM: the node runs its controlled shutdown and exits; one that
        has not within the node's own grace period is killed. How it ended
        is kept for :meth:`last_shutdown_clean`."""
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            return
        self.resume(name)
        self.shutdowns.pop(name, None)
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=35)
        except subprocess.TimeoutExpired:
            self.kill(name)
        self.shutdowns[name] = (self.node_dir(name) / CLEAN_SHUTDOWN).exists()

    def last_shutdown_clean(self, name: str) -> bool | None:
        """The contract's ShutdownOutcomes: whether the node's latest SIGTERM
        left its clean-shutdown marker in its data directory (the grace's
        kill, or the server's own halt when its controlled shutdown is stuck,
        leave none); read as the process ended, before anything restarts it."""
        return self.shutdowns.get(name)

    # ------------------------------------------------------------ control endpoint
    def _http(self, name: str, method: str, path: str, body: dict | None = None, timeout: float = 3.0) -> Any:
        s = self.by_name[name]
        data = json.dumps(body).encode() if body is not None else None
        headers = {auth.HEADER: f"Bearer {auth.token(self.secret, auth.CONTROL)}"}
        if data:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(f"http://{HOST}:{s.control}{path}", data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def status(self, name: str, timeout: float = 2.0) -> dict[str, Any] | None:
        if not self.alive(name) or name in self.paused:
            return None
        try:
            return self._http(name, "GET", "/status", timeout=timeout)
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def set_clock(self, name: str, offset_ms: int) -> None:
        if self.alive(name) and name not in self.paused:
            self._http(name, "POST", "/clock", {"offset_ms": int(offset_ms)})

    def link_name(self, link: Link) -> str:
        return f"{link[0]}->{link[1]}"

    def power_loss(self, name: str) -> None:
        """Revert unfsynced writes and die (the node exits 137 mid-request)."""
        if not self.alive(name):
            return
        self.resume(name)
        try:
            self._http(name, "POST", "/power-loss", {}, timeout=3)
        except (OSError, urllib.error.URLError, ValueError):
            pass  # the node exits before answering
        p = self.procs[name]
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.kill(name)

    # ------------------------------------------------------------ discovery
    def keys(self) -> list[str]:
        return self._keys

    def unregister(self, node: str) -> None:
        """UnregisterBroker (KIP-631) through a broker to the reference
        controller (:mod:`harness.dbs.admin`)."""
        unregister_broker(self.client_bootstrap(), {s.name: s.node_id for s in self.specs}[node])

    def reassign(self, key: str, replicas: list[str]) -> None:
        """AlterPartitionReassignments (KIP-455) through a broker to the
        reference controller (:mod:`harness.dbs.admin`)."""
        ids = {s.name: s.node_id for s in self.specs}
        alter_partition_reassignment(self.client_bootstrap(), key, [ids[r] for r in replicas])

    def leader_of(self, key: str) -> str | None:
        topic, _, part = key.rpartition("-")
        try:
            md = AdminClient({"bootstrap.servers": self.client_bootstrap(), "log_level": 0,
                              "socket.timeout.ms": 3000}).list_topics(topic=topic, timeout=4)
            leader = md.topics[topic].partitions[int(part)].leader
        except (KafkaException, KeyError):
            return None
        for s in self.specs:
            if s.node_id == leader:
                return s.name
        return None

    def isr_of(self, key: str) -> list[str]:
        return self._metadata(key, "isrs")

    def replicas_of(self, key: str) -> list[str]:
        return self._metadata(key, "replicas")

    def _metadata(self, key: str, field: str) -> list[str]:
        """A topic-partition's replicas or ISR by node name, from Metadata,
        once a leader is known (for at most 15 s)."""
        topic, _, part = key.rpartition("-")
        name = {s.node_id: s.name for s in self.specs}
        deadline = time.monotonic() + 15
        while True:
            try:
                md = AdminClient({"bootstrap.servers": self.client_bootstrap(), "log_level": 0,
                                  "socket.timeout.ms": 3000}).list_topics(topic=topic, timeout=4)
                p = md.topics[topic].partitions[int(part)]
                if p.leader >= 0:
                    return [name[r] for r in getattr(p, field) if r in name]
            except (KafkaException, KeyError):
                pass
            if time.monotonic() > deadline:
                return []
            time.sleep(0.3)

    def broker_epoch(self, name: str) -> int | None:
        """The running incarnation's broker epoch, from its own status
        (None: down, paused, not registered yet, or not answering)."""
        epoch = (self.status(name) or {}).get("broker_epoch")
        return int(epoch) if epoch is not None else None

    def active_controller(self) -> str | None:
        best: tuple[int, int] | None = None
        for n in self.live_nodes():
            st = self.status(n)
            raft = (st or {}).get("raft") or {}
            if raft.get("leader") is not None and raft.get("epoch") is not None:
                cand = (int(raft["epoch"]), int(raft["leader"]))
                if best is None or cand > best:
                    best = cand
        if best is None:
            return None
        for s in self.specs:
            if s.node_id == best[1]:
                return s.name
        return None

    # ------------------------------------------------------------ waiting
    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for s in self.specs:
            while self.status(s.name, timeout=1.0) is None:
                if not self.alive(s.name):
                    tail = _tail(self.node_dir(s.name) / "stderr.log")
                    raise HarnessError(f"node {s.name} exited at start-up: {tail}")
                if time.monotonic() > deadline:
                    raise HarnessError(f"node {s.name} not answering on its control port after {timeout:.0f}s")
                time.sleep(0.1)

    def teardown(self) -> None:
        self.timers.cancel_all()
        if self.proxy is not None:
            self.proxy.close()
        for name, p in list(self.procs.items()):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.proxy_proc is not None and self.proxy_proc.poll() is None:
            try:
                os.killpg(self.proxy_proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in [*self.procs.values(), *([self.proxy_proc] if self.proxy_proc else [])]:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if p.stdout is not None:
                p.stdout.close()


class ProxyNetwork:
    """The contract's :class:`~nemesis.control.Network` on the proxy: a cut
    holds a link's bytes until the heal, latency delays each chunk."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def _proxy(self) -> ProxyControl:
        if self.cluster.proxy is None:
            raise HarnessError("the proxy is not running")
        return self.cluster.proxy

    def cut(self, pairs: Any) -> None:
        self._proxy().call(cmd="cut", pairs=sorted([list(p) for p in pairs]))

    def set_latency(self, links: Any, ms: float, jitter_ms: float) -> None:
        names = [self.cluster.link_name(link) for link in links]
        self._proxy().call(cmd="delay", ms=ms, jitter=jitter_ms, links=names)

    def set_loss(self, links: Any, probability: float) -> None:
        if probability:
            raise Unsupported("loss needs loss, which the local runtime cannot make (its proxies carry TCP streams)")


class ControlClock:
    """The contract's :class:`~nemesis.control.Clock` on each node's control
    endpoint (``POST /clock``); a strobe runs in the calling thread."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def set_offset(self, node: str, ms: int) -> None:
        self.cluster.set_clock(node, ms)

    def reset(self, node: str) -> None:
        self.cluster.set_clock(node, 0)

    def strobe(self, node: str, delta_ms: int, period_ms: int, duration_ms: int) -> None:
        end = time.monotonic() + duration_ms / 1000
        flip = False
        while time.monotonic() < end:
            flip = not flip
            self.cluster.set_clock(node, delta_ms if flip else 0)
            time.sleep(period_ms / 1000)
        self.cluster.set_clock(node, 0)


def _tail(path: Path, n: int = 300) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return (text[-1] if text else "(empty log)")[:n]
