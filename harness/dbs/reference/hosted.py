"""``--db reference`` on real hosts: the bundled broker, one ``kraftwerk node``
daemon per host, driven only through the host contract (``Remote``:
``exec``, ``upload``/``download``, ``start_daemon``, ``signal``, ``address``,
``teardown``) and a kernel ``Network`` (:mod:`harness.runtimes.net.iptables`). So one
db runs on every real backend (netns, docker, ssh); the local backend keeps
its per-link proxies (:mod:`harness.dbs.reference.db`).

Each node listens on ``<its address>:9092`` for clients and peers (so Kafka's
Metadata gives clients real addresses, and a grudge between two addresses is
a grudge between two nodes) and serves its control endpoint on ``:9093``,
which client partitions never cut (the harness's control path: clock skew,
power loss, status). Node data lives on the node's host
(``Remote.node_dir``); at teardown the node's logs and trace come back to
``<run>/nodes/<name>/`` unless the host shares this machine's filesystem.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness.config import TestConfig
from harness.dbs.external import ensure_topics
from harness.dbs.parts import ClusterParts, ControlClock, ControlEndpoints, RemoteNodes, StatusObserver, Topology
from harness.errors import HarnessError
from harness.lazyfs.nodes import for_hosts
from harness.runtimes.net.latency import Delayers
from harness.rundir.state import RunState
from harness.runtimes import collect_files
from harness.runtimes.net.iptables import IptablesNetwork
from nemesis.control import Capability
from reference_impl.core.storage import CLEAN_SHUTDOWN
from reference_impl.server import auth

NODE_PORT = 9092
CONTROL_PORT = 9093
#: how long a SIGTERM may take before the node is killed (its own grace is 30 s)
TERMINATE_GRACE_S = 40.0
#: files of a node's data directory that come back to the run directory
COLLECT = ("trace.jsonl", "node.log", "stderr.log")

#: what the kernel backends make (LATENCY: NFQUEUE and a delayer per host,
#: :mod:`harness.runtimes.net.latency`); LOSE_UNFSYNCED and TORN_WRITE are
#: the FUSE layer's, with storage lazyfs (:func:`capabilities_for`)
CAPABILITIES = frozenset({
    Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.POWER_LOSS, Capability.CLOCK,
    Capability.CLOCK_STROBE, Capability.PARTITION, Capability.PARTITION_CLIENTS, Capability.LOSS,
    Capability.LATENCY, Capability.EXEC, Capability.FILES, Capability.REASSIGN, Capability.UNREGISTER,
})
FS_CAPABILITIES = frozenset({Capability.LOSE_UNFSYNCED, Capability.TORN_WRITE})


def capabilities_for(cfg: TestConfig) -> frozenset[Capability]:
    """What a hosted reference cluster of this configuration can make: the
    filesystem's faults only over its mounts (storage lazyfs)."""
    return CAPABILITIES | (FS_CAPABILITIES if cfg.storage == "lazyfs" else frozenset())


@dataclass
class HostedReference:
    """The reference broker on the hosts of one real backend; its cluster
    contract (:attr:`cluster`) is in parts: signal-based node control over
    the hosts (:class:`~harness.dbs.parts.RemoteNodes`), the iptables network,
    each node's control endpoint as its clock and its status as observer."""

    cfg: TestConfig
    run_dir: Path
    state: RunState | None
    hosts: Any  # a Remote: NetnsHosts, DockerHosts or SshHosts
    node_args: list[str] = field(default_factory=list)
    net: IptablesNetwork = field(init=False)
    secret: bytes | None = field(default=None, init=False)
    _storage_mode: str = field(default="os", init=False)

    def __post_init__(self) -> None:
        self.topo = Topology.of(self.cfg.layout())
        names = self.topo.node_names()
        self.net = IptablesNetwork(
            names, {n: self.hosts.address(n) for n in names}, self.hosts.client_address,
            self._exec_for_net, mode=self.cfg.net_cut,
            exempt_ports=(CONTROL_PORT, *getattr(self.hosts, "control_ports", (22,))),
            delayers=Delayers(self.hosts),
        )
        self.endpoints = ControlEndpoints(lambda n: f"{self.hosts.address(n)}:{CONTROL_PORT}", lambda: self.secret,
                                          lambda n: self.nodes.answering(n))
        self.nodes = RemoteNodes(self.topo, self.hosts, self.client_bootstrap, self._launch,
                                 lambda n: f"{self._dirs(n)[1]}/{CLEAN_SHUTDOWN}", TERMINATE_GRACE_S,
                                 self._lose_unfsynced)
        self.cluster = ClusterParts(
            str(self.hosts.runtime), capabilities_for(self.cfg), self.nodes, self.net, ControlClock(self.endpoints),
            StatusObserver(self.topo, self.client_bootstrap, self.cfg.keys(), self.endpoints, self.nodes.live_nodes))

    def _exec_for_net(self, node: str, argv: Any, stdin: str | None) -> tuple[int, str, str]:
        return self.hosts.exec(node, list(argv), 30.0, stdin=stdin)

    # ------------------------------------------------------------ set-up
    def node_argv(self, name: str, storage_mode: str) -> list[str]:
        addr = self.hosts.address(name)
        node_id = self.topo.id_of(name)
        quorum = ",".join(f"{self.topo.id_of(v)}@{self.hosts.address(v)}:{NODE_PORT}" for v in self.topo.controllers())
        return [
            *self.hosts.kraftwerk_argv(name), "node",
            "--id", str(node_id), "--roles", ",".join(self.topo.roles_of(name)),
            "--listen", f"{addr}:{NODE_PORT}", "--advertise", f"{addr}:{NODE_PORT}",
            "--controller-quorum", quorum, *self._dirs(name),
            "--control", f"{addr}:{CONTROL_PORT}", "--storage-mode", storage_mode,
            "--seed", str((self.cfg.seed or 0) * 101 + node_id),
            "--secret-file", self._remote_secret(name),
            # a host's own address is not loopback: the node refuses it unless told
            "--allow-non-loopback",
            *self.node_args,
        ]

    def _remote_secret(self, name: str) -> str:
        """Where the node's host keeps the cluster secret: beside the node's
        directory (the same file as ours where the filesystem is shared)."""
        return str(PurePosixPath(self.hosts.node_dir(name)).parent / "cluster.secret")

    def _ship_secret(self) -> None:
        """One secret per run (reference_impl/server/auth.py), on every host,
        owner-only; only its path is ever on a command line."""
        local = self.run_dir / "nodes" / "cluster.secret"
        local.parent.mkdir(parents=True, exist_ok=True)
        self.secret = auth.load_secret(auth.ensure_secret_file(str(local)))
        for n in self.topo.node_names():
            remote = self._remote_secret(n)
            self.hosts.exec(n, ["mkdir", "-p", str(PurePosixPath(remote).parent)], 10.0)
            self.hosts.upload(n, local, remote)
            self.hosts.exec(n, ["chmod", "600", remote], 10.0)

    def _dirs(self, name: str) -> list[str]:
        if self.nodes.disks is None:
            return ["--data-dir", self.hosts.node_dir(name)]
        return ["--data-dir", self.nodes.disks.data_dir(name), "--log-dir", self.hosts.node_dir(name)]

    def setup(self) -> None:
        self.boot()
        ensure_topics(self.client_bootstrap(), self.cfg, timeout=60, expect_brokers=self.cfg.brokers, check_rf=True)

    def boot(self) -> None:
        """Chains, secret, storage, every node started and answering."""
        self.net.setup()
        self._ship_secret()
        self._storage_mode = "memory-cache" if self.cfg.storage == "pagecache" else "os"
        if self.cfg.storage == "lazyfs":
            self.nodes.disks = for_hosts(self.hosts, self.run_dir, self.state, self.cfg.seed or 0,
                                         torn=self.cfg.torn_writes)
            for n in self.topo.node_names():
                self.nodes.disks.mount(n)
        for n in self.topo.node_names():
            self.nodes.start(n)
        self.wait_ready(60)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for n in self.topo.node_names():
            while self.endpoints.status(n, timeout=1.0) is None:
                if not self.hosts.running(n):
                    raise HarnessError(f"node {n} exited at start-up: {self._log_tail(n)}")
                if time.monotonic() > deadline:
                    raise HarnessError(f"node {n} not answering on {self.hosts.address(n)}:{CONTROL_PORT} after {timeout:.0f}s")
                time.sleep(0.1)

    def _log_tail(self, n: str) -> str:
        rc, out, _ = self.hosts.exec(n, ["tail", "-n", "1", f"{self.hosts.node_dir(n)}/stderr.log"], 10.0)
        return out.strip()[:300] or "(empty log)"

    def client_bootstrap(self) -> str:
        return ",".join(f"{self.hosts.address(n)}:{NODE_PORT}" for n in self.topo.brokers())

    def _launch(self, node: str) -> None:
        d = self.hosts.node_dir(node)
        self.hosts.exec(node, ["mkdir", "-p", d], 10.0)
        self.hosts.start_daemon(node, self.node_argv(node, self._storage_mode), f"{d}/stderr.log",
                                {"PYTHONHASHSEED": "0"})

    def _lose_unfsynced(self, node: str) -> None:
        """Without kraftwerk fs, the broker's own memory-cache mode reverts
        its un-fsynced writes and the node exits 137 mid-request."""
        if not self.hosts.running(node):
            return
        self.nodes.resume(node)
        self.endpoints.power_loss(node)
        if not self.hosts.wait_exit(node, 3):
            self.nodes.kill(node)

    # ------------------------------------------------------------ teardown
    def teardown(self) -> None:
        self.cluster.timers.cancel_all()
        try:
            self.nodes.kill_all()
            self._collect()
            if self.nodes.disks is not None:
                self.nodes.disks.teardown()
        finally:
            try:
                if not getattr(self.hosts, "ephemeral_net", True):  # hosts that outlive the run (ssh)
                    self.net.teardown()
            finally:
                self.hosts.teardown()

    def _collect(self) -> None:
        collect_files(self.hosts, self.topo.node_names(), COLLECT, self.hosts.node_dir,
                      lambda n: self.run_dir / "nodes" / n)


__all__ = ["CONTROL_PORT", "HostedReference", "NODE_PORT"]
