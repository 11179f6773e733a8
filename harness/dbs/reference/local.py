"""The ``local`` backend: node processes on 127.0.0.1, no root needed.

The node processes are the launcher's local cluster
(:class:`reference_impl.server.launcher.LocalCluster`: planning, spawning,
liveness); this module adds a harness-owned proxy link
(``harness.runtimes.proxy``) for every connection between two nodes and from
clients to a node, one per directed pair:

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

The cluster contract is in parts (``harness.dbs.parts``): :class:`LocalNodes`
(processes and signals), :class:`ProxyNetwork`, a control-endpoint clock and
a status observer; :func:`contract` bundles them.
"""

from __future__ import annotations

import errno
import json
import signal
import threading
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from harness.dbs.parts import (ClusterParts, ControlClock, ControlEndpoints, Membership, NodeSets, StatusObserver,
                               Topology)
from harness.errors import HarnessError
from harness.rundir.state import RunState
from harness.runtimes.local import allocate_ports
from harness.runtimes.proxy import ProxyControl
from nemesis.control import CLIENT, Capability, Link, Unsupported
from reference_impl.core.storage import CLEAN_SHUTDOWN
from reference_impl.server import auth
from reference_impl.server.launcher import HOST, ClusterError, LocalCluster, NodeSpec
from reference_impl.server.procs import wait_exit

#: what the local backend can make (no per-message loss: the proxies carry
#: TCP streams, which lose no bytes; no exec or files beyond this machine)
CAPABILITIES = frozenset({
    Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.POWER_LOSS, Capability.CLOCK,
    Capability.CLOCK_STROBE, Capability.PARTITION, Capability.PARTITION_CLIENTS, Capability.LATENCY,
    Capability.REASSIGN, Capability.UNREGISTER,
})

#: how long a SIGTERM may take before the node is killed (its own grace is 30 s)
TERMINATE_GRACE_S = 35.0


class PortTaken(HarnessError):
    """A port chosen for the run was bound by another process before the
    run's proxy bound it. Ports are chosen free and outside the kernel's
    ephemeral range (:mod:`reference_impl.server.ports`), but a cluster
    planned at the same moment by a parallel run may choose the same free
    port; the run then plans again with fresh ports."""


def ports_needed(n: int) -> int:
    """listen + control + client link per node, plus one link per ordered pair."""
    return 3 * n + n * (n - 1) + 1  # +1: proxy control


@dataclass
class ProxiedCluster(LocalCluster):
    """The launcher's cluster with a proxy link on every path: nodes dial
    each other and clients dial brokers through the run's proxy process.
    Its processes are the run's (registered in ``state``, holding its lease)."""

    state: RunState | None = None
    #: per node name: the port of its client link (what it advertises)
    client_ports: dict[str, int] = field(default_factory=dict)
    #: per node name: peer name -> the port of link node->peer
    peer_ports: dict[str, dict[str, int]] = field(default_factory=dict)
    control_port: int = 0
    proxy_proc: subprocess.Popen[bytes] | None = None
    proxy: ProxyControl | None = None

    LOG_NAME = "stderr.log"

    @classmethod
    def for_run(cls, layout: list[tuple[str, int, list[str]]], run_dir: Path, state: RunState, base_port: int = 0,
                config: dict[str, str] | None = None, seed: int = 0, storage_mode: str = "os") -> "ProxiedCluster":
        """Listen and control ports per node (the launcher's planning), then a
        client link per node, a link per ordered pair and the proxy's control."""
        ports = iter(allocate_ports(ports_needed(len(layout)), base_port))
        c = cls.from_layout(str(run_dir), layout, ports, config, storage_mode, seed=seed, state=state)
        names = [n.name for n in c.nodes]
        c.client_ports = {n: next(ports) for n in names}
        c.peer_ports = {a: {b: next(ports) for b in names if b != a} for a in names}
        c.control_port = next(ports)
        return c

    # ------------------------------------------------------------ the launcher's hooks
    @property
    def secret_path(self) -> str:
        return str(Path(self.dir) / "nodes" / "cluster.secret")

    def save(self) -> None:
        """A run keeps its processes in its state file, not in cluster.json."""

    def spawn_options(self) -> dict[str, Any]:
        assert self.state is not None
        return self.state.spawn_options()  # own session, run id, lease (harness.rundir.lease)

    def spawn(self, n: NodeSpec, storage_mode: str | None = None) -> subprocess.Popen[bytes]:
        p = super().spawn(n, storage_mode)
        assert self.state is not None
        self.state.add_process(p.pid, "node", n.name)
        return p

    def quorum_for(self, n: NodeSpec) -> str:
        return ",".join(f"{v.node_id}@{HOST}:{v.port if v is n else self.peer_ports[n.name][v.name]}"
                        for v in self.nodes if v.is_controller)

    def extra_args(self, n: NodeSpec) -> list[str]:
        out = ["--advertise", f"{HOST}:{self.client_ports[n.name]}"]
        peers = ",".join(f"{self.by_name(b).node_id}={HOST}:{p}" for b, p in self.peer_ports[n.name].items())
        return out + (["--peer", peers] if peers else [])

    # ------------------------------------------------------------ proxies
    def client_bootstrap(self) -> str:
        return ",".join(f"{HOST}:{self.client_ports[b.name]}" for b in self.brokers)

    def links(self) -> list[dict[str, Any]]:
        out = []
        for a in self.nodes:
            for b, port in self.peer_ports[a.name].items():
                out.append({"src": a.name, "dst": b, "listen": port, "target": self.by_name(b).port})
            out.append({"src": CLIENT, "dst": a.name, "listen": self.client_ports[a.name], "target": a.port})
        return out

    def start_proxy(self) -> None:
        assert self.state is not None
        nodes = Path(self.dir) / "nodes"
        nodes.mkdir(parents=True, exist_ok=True)
        auth.ensure_secret_file(self.secret_path)
        links_file = nodes / "proxy-links.json"
        links_file.write_text(json.dumps(self.links(), indent=1))
        with open(nodes / "proxy.log", "ab") as err:
            self.proxy_proc = subprocess.Popen(
                [sys.executable, "-m", "harness.runtimes.proxy", "--links", str(links_file),
                 "--control-port", str(self.control_port), "--seed", str(self.seed or 0),
                 "--secret-file", self.secret_path],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, cwd=self.dir,
                **self.process_options())
        self.state.add_process(self.proxy_proc.pid, "proxy", "proxy")
        assert self.proxy_proc.stdout is not None
        line = self.proxy_proc.stdout.readline().decode().strip()
        try:
            msg = json.loads(line) if line else {"error": "proxy exited"}
        except json.JSONDecodeError:
            msg = {"error": line}
        if "control" not in msg:
            self.proxy_proc.wait(timeout=10)
            if msg.get("errno") == errno.EADDRINUSE:
                raise PortTaken(f"proxy failed to start: {msg.get('error')}")
            raise HarnessError(f"proxy failed to start: {msg.get('error')}")
        self.proxy = ProxyControl(int(msg["control"]), secret=auth.load_secret(self.secret_path))

    def start_all(self) -> None:
        for n in self.nodes:
            self.spawn(n)

    def teardown(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        self.kill_all()
        if self.proxy_proc is not None:
            if self.proxy_proc.poll() is None:
                try:
                    self.proxy_proc.kill()
                except ProcessLookupError:
                    pass
            try:
                self.proxy_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if self.proxy_proc.stdout is not None:
                self.proxy_proc.stdout.close()


class LocalNodes(NodeSets, Membership):
    """The contract's node control of a :class:`ProxiedCluster`'s processes
    (with ShutdownOutcomes and Reassignments)."""

    def __init__(self, cluster: ProxiedCluster, topo: Topology, endpoints: ControlEndpoints) -> None:
        self.cluster, self.topo, self.endpoints = cluster, topo, endpoints
        self.bootstrap = cluster.client_bootstrap
        self.paused: set[str] = set()
        #: how each node's latest SIGTERM ended (True: clean-shutdown marker written)
        self.shutdowns: dict[str, bool] = {}

    def node_names(self) -> list[str]:
        return self.topo.node_names()

    def brokers(self) -> list[str]:
        return self.topo.brokers()

    def controllers(self) -> list[str]:
        return self.topo.controllers()

    def running(self, node: str) -> bool:
        return self.cluster.by_name(node).running()

    def answering(self, node: str) -> bool:
        return self.running(node) and node not in self.paused

    def _signal(self, node: str, sig: int) -> None:
        try:
            self.cluster.signal(self.topo.id_of(node), sig)
        except ClusterError:
            pass  # it is not running (any more)

    def start(self, node: str) -> None:
        if self.running(node):
            return
        self.paused.discard(node)
        self.cluster.spawn(self.cluster.by_name(node))

    def kill(self, node: str) -> None:
        n = self.cluster.by_name(node)
        if n.running():
            self.cluster.kill(n.node_id)
        self.paused.discard(node)

    def pause(self, node: str) -> None:
        if self.running(node):
            self._signal(node, signal.SIGSTOP)
            self.paused.add(node)

    def resume(self, node: str) -> None:
        if node in self.paused and self.running(node):
            self._signal(node, signal.SIGCONT)
        self.paused.discard(node)

    def terminate(self, node: str) -> None:
        """SIGTERM: the node runs its controlled shutdown and exits; one that
        has not within the node's own grace period is killed. How it ended
        is kept for :meth:`last_shutdown_clean`."""
        if not self.running(node):
            return
        self.resume(node)
        self.shutdowns.pop(node, None)
        n = self.cluster.by_name(node)
        self._signal(node, signal.SIGTERM)
        # the grace on a thread of its own, as the simulator runs it on its
        # loop: the nemesis goes on at once (harness.dbs.parts.RemoteNodes)
        threading.Thread(target=self._grace, args=(node, n), name=f"grace-{node}", daemon=True).start()

    def _grace(self, node: str, n: Any) -> None:
        try:
            if not wait_exit(n.pid, TERMINATE_GRACE_S, n.start):
                self.kill(node)
            self.shutdowns[node] = (Path(n.data_dir) / CLEAN_SHUTDOWN).exists()
        except Exception:  # noqa: BLE001 - the run tore the cluster down meanwhile
            return

    def last_shutdown_clean(self, node: str) -> bool | None:
        """The contract's ShutdownOutcomes: whether the node's latest SIGTERM
        left its clean-shutdown marker in its data directory (the grace's
        kill, or the server's own halt when its controlled shutdown is stuck,
        leave none); read as the process ended, before anything restarts it."""
        return self.shutdowns.get(node)

    def power_loss(self, node: str) -> None:
        """Revert unfsynced writes and die (the node exits 137 mid-request)."""
        if not self.running(node):
            return
        self.resume(node)
        self.endpoints.power_loss(node)
        n = self.cluster.by_name(node)
        if not wait_exit(n.pid, 3.0, n.start):
            self.kill(node)



class ProxyNetwork:
    """The contract's :class:`~nemesis.control.Network` on the proxy: a cut
    holds a link's bytes until the heal, latency delays each chunk."""

    def __init__(self, cluster: ProxiedCluster) -> None:
        self.cluster = cluster

    def _proxy(self) -> ProxyControl:
        if self.cluster.proxy is None:
            raise HarnessError("the proxy is not running")
        return self.cluster.proxy

    def cut(self, pairs: Iterable[Link]) -> None:
        self._proxy().call(cmd="cut", pairs=sorted([list(p) for p in pairs]))

    def set_latency(self, links: Iterable[Link], ms: float, jitter_ms: float) -> None:
        self._proxy().call(cmd="delay", ms=ms, jitter=jitter_ms, links=[f"{a}->{b}" for a, b in links])

    def set_loss(self, links: Iterable[Link], probability: float) -> None:
        if probability:
            raise Unsupported("loss needs loss, which the local runtime cannot make (its proxies carry TCP streams)")


def contract(cluster: ProxiedCluster, topo: Topology, keys: list[str]) -> tuple[ClusterParts, ControlEndpoints]:
    """The cluster contract of a proxied local cluster, and its nodes'
    control endpoints (status, for tests and tools)."""
    nodes: LocalNodes
    endpoints = ControlEndpoints(lambda n: f"{HOST}:{cluster.by_name(n).control_port}",
                                 lambda: auth.load_secret(cluster.secret_path), lambda n: nodes.answering(n))
    nodes = LocalNodes(cluster, topo, endpoints)
    observer = StatusObserver(topo, cluster.client_bootstrap, keys, endpoints, nodes.live_nodes)
    nodes.on_move(observer.forget)
    parts = ClusterParts("local", CAPABILITIES, nodes, ProxyNetwork(cluster), ControlClock(endpoints), observer)
    return parts, endpoints
