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

import json
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness.runtimes import collect_files
from harness.config import TestConfig
from harness.dbs.external import ensure_topics
from harness.dbs.admin import alter_partition_reassignment, unregister_broker
from harness.dbs.signals import PausesBySignal
from harness.errors import HarnessError
from harness.runtimes.net.iptables import CLIENT, IptablesNetwork
from harness.runtimes.net.latency import Delayers
from harness.rundir.state import RunState
from harness.rundir.timers import Timers
from reference_impl.core.storage import CLEAN_SHUTDOWN
from reference_impl.server import auth
from nemesis.control import Capability

NODE_PORT = 9092
CONTROL_PORT = 9093
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
class HostedReference(PausesBySignal):
    """The reference broker on the hosts of one real backend; also the
    cluster contract's node control, clock and observer for its nemeses."""

    cfg: TestConfig
    run_dir: Path
    state: RunState | None
    hosts: Any  # a Remote: NetnsHosts, DockerHosts or SshHosts
    node_args: list[str] = field(default_factory=list)
    net: IptablesNetwork = field(init=False)
    paused: set[str] = field(default_factory=set, init=False)
    #: how each node's latest SIGTERM ended (True: clean-shutdown marker written)
    shutdowns: dict[str, bool] = field(default_factory=dict, init=False)
    secret: bytes | None = field(default=None, init=False)
    _storage_mode: str = field(default="os", init=False)
    #: storage "lazyfs": each node's data directory through kraftwerk fs
    disks: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.timers = Timers()
        names = self.cfg.node_names()
        self.roles = {n: r for n, _, r in self.cfg.layout()}
        self.ids = {n: i for n, i, _ in self.cfg.layout()}
        self.net = IptablesNetwork(
            names, {n: self.hosts.address(n) for n in names}, self.hosts.client_address,
            self._exec_for_net, mode=self.cfg.net_cut,
            exempt_ports=(CONTROL_PORT, *getattr(self.hosts, "control_ports", (22,))),
            delayers=Delayers(self.hosts),
        )

    @property
    def runtime(self) -> str:
        return str(self.hosts.runtime)

    @property
    def capabilities(self) -> frozenset[Capability]:
        return capabilities_for(self.cfg)

    def _exec_for_net(self, node: str, argv: Any, stdin: str | None) -> tuple[int, str, str]:
        return self.hosts.exec(node, list(argv), 30.0, stdin=stdin)

    # ------------------------------------------------------------ set-up
    def node_argv(self, name: str, storage_mode: str) -> list[str]:
        addr = self.hosts.address(name)
        voters = [n for n in self.node_names() if "controller" in self.roles[n]]
        quorum = ",".join(f"{self.ids[v]}@{self.hosts.address(v)}:{NODE_PORT}" for v in voters)
        return [
            *self.hosts.kraftwerk_argv(name), "node",
            "--id", str(self.ids[name]), "--roles", ",".join(self.roles[name]),
            "--listen", f"{addr}:{NODE_PORT}", "--advertise", f"{addr}:{NODE_PORT}",
            "--controller-quorum", quorum, *self._dirs(name),
            "--control", f"{addr}:{CONTROL_PORT}", "--storage-mode", storage_mode,
            "--seed", str((self.cfg.seed or 0) * 101 + self.ids[name]),
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
        for n in self.node_names():
            remote = self._remote_secret(n)
            self.hosts.exec(n, ["mkdir", "-p", str(PurePosixPath(remote).parent)], 10.0)
            self.hosts.upload(n, local, remote)
            self.hosts.exec(n, ["chmod", "600", remote], 10.0)

    def _dirs(self, name: str) -> list[str]:
        if self.disks is None:
            return ["--data-dir", self.hosts.node_dir(name)]
        return ["--data-dir", self.disks.data_dir(name), "--log-dir", self.hosts.node_dir(name)]

    def setup(self) -> None:
        self.boot()
        ensure_topics(self.client_bootstrap(), self.cfg, timeout=60, expect_brokers=self.cfg.brokers, check_rf=True)

    def boot(self) -> None:
        """Chains, secret, storage, every node started and answering."""
        self.net.setup()
        self._ship_secret()
        self._storage_mode = "memory-cache" if self.cfg.storage == "pagecache" else "os"
        if self.cfg.storage == "lazyfs":
            from harness.lazyfs.nodes import for_hosts

            self.disks = for_hosts(self.hosts, self.run_dir, self.state, self.cfg.seed or 0, torn=self.cfg.torn_writes)
            for n in self.node_names():
                self.disks.mount(n)
        for n in self.node_names():
            self.start(n)
        self.wait_ready(60)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for n in self.node_names():
            while self.status(n, timeout=1.0) is None:
                if not self.hosts.running(n):
                    raise HarnessError(f"node {n} exited at start-up: {self._log_tail(n)}")
                if time.monotonic() > deadline:
                    raise HarnessError(f"node {n} not answering on {self.hosts.address(n)}:{CONTROL_PORT} after {timeout:.0f}s")
                time.sleep(0.1)

    def _log_tail(self, n: str) -> str:
        rc, out, _ = self.hosts.exec(n, ["tail", "-n", "1", f"{self.hosts.node_dir(n)}/stderr.log"], 10.0)
        return out.strip()[:300] or "(empty log)"

    def client_bootstrap(self) -> str:
        return ",".join(f"{self.hosts.address(n)}:{NODE_PORT}" for n in self.brokers())

    # ------------------------------------------------------------ NodeControl
    def node_names(self) -> list[str]:
        return self.cfg.node_names()

    def brokers(self) -> list[str]:
        return [n for n in self.node_names() if "broker" in self.roles[n]]

    def controllers(self) -> list[str]:
        return [n for n in self.node_names() if "controller" in self.roles[n]]

    def start(self, node: str) -> None:
        if self.hosts.running(node):
            return
        self.paused.discard(node)
        d = self.hosts.node_dir(node)
        self.hosts.exec(node, ["mkdir", "-p", d], 10.0)
        self.hosts.start_daemon(node, self.node_argv(node, self._storage_mode), f"{d}/stderr.log",
                                {"PYTHONHASHSEED": "0"})

    def kill(self, node: str) -> None:
        self.hosts.signal(node, signal.SIGKILL)
        self.hosts.wait_exit(node, 10)
        self.paused.discard(node)

    def terminate(self, node: str) -> None:
        self.shutdowns.pop(node, None)
        self.resume(node)
        self.hosts.signal(node, signal.SIGTERM)
        if not self.hosts.wait_exit(node, 40):
            self.kill(node)
        marker = f"{self._dirs(node)[1]}/{CLEAN_SHUTDOWN}"
        self.shutdowns[node] = self.hosts.exec(node, ["test", "-e", marker], 30.0)[0] == 0

    def last_shutdown_clean(self, node: str) -> bool | None:
        """The contract's ShutdownOutcomes: whether the node's latest SIGTERM
        left its clean-shutdown marker in its data directory (the grace's
        kill, or the server's own halt when its controlled shutdown is
        stuck, leave none); read as the process ended, before any restart."""
        return self.shutdowns.get(node)

    def resume_all(self) -> list[str]:
        out = sorted(n for n in self.paused if self.hosts.running(n))
        for n in sorted(self.paused):
            self.resume(n)
        return out

    def power_loss(self, node: str) -> None:
        """Revert unfsynced writes and die: with storage lazyfs the node is
        SIGKILLed, then its filesystem crashes; otherwise the broker's own
        memory-cache mode reverts them (the node exits 137 mid-request)."""
        if self.disks is not None:
            self.kill(node)
            self.disks.crash(node)
            return
        if not self.hosts.running(node):
            return
        self.resume(node)
        try:
            self._http(node, "POST", "/power-loss", {}, timeout=3)
        except (OSError, urllib.error.URLError, ValueError):
            pass
        if not self.hosts.wait_exit(node, 3):
            self.kill(node)

    def torn_power_loss(self, node: str) -> None:
        """SIGKILL, then a torn crash of the node's filesystem: each file
        keeps its fsynced bytes and a seeded prefix of the rest (storage
        lazyfs; the runner refuses the fault otherwise)."""
        if self.disks is None:
            raise HarnessError("a torn write needs --storage lazyfs (kraftwerk fs under each node)")
        self.kill(node)
        self.disks.crash(node, torn=True)

    def dead_nodes(self) -> list[str]:
        return [n for n in self.node_names() if not self.hosts.running(n)]

    def paused_nodes(self) -> list[str]:
        return sorted(self.paused)

    def live_nodes(self) -> list[str]:
        return [n for n in self.node_names() if self.hosts.running(n) and n not in self.paused]

    # ------------------------------------------------------------ Clock (the broker's injectable clock)
    def _http(self, node: str, method: str, path: str, body: dict | None = None, timeout: float = 3.0) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {auth.HEADER: f"Bearer {auth.token(self.secret, auth.CONTROL)}"}
        if data:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(f"http://{self.hosts.address(node)}:{CONTROL_PORT}{path}", data=data,
                                     method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def status(self, node: str, timeout: float = 2.0) -> dict[str, Any] | None:
        if not self.hosts.running(node) or node in self.paused:
            return None
        try:
            return self._http(node, "GET", "/status", timeout=timeout)
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def set_clock(self, node: str, offset_ms: int) -> None:
        if self.hosts.running(node) and node not in self.paused:
            self._http(node, "POST", "/clock", {"offset_ms": int(offset_ms)})

    set_offset = set_clock

    def strobe(self, node: str, delta_ms: int, period_ms: int, duration_ms: int) -> None:
        end = time.monotonic() + duration_ms / 1000
        flip = False
        while time.monotonic() < end:
            flip = not flip
            self.set_clock(node, delta_ms if flip else 0)
            time.sleep(period_ms / 1000)
        self.set_clock(node, 0)

    def reset(self, node: str) -> None:
        self.set_clock(node, 0)

    # ------------------------------------------------------------ Observer
    def keys(self) -> list[str]:
        return self.cfg.keys()

    def _partition(self, key: str) -> Any:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        topic, _, part = key.rpartition("-")
        try:
            md = AdminClient({"bootstrap.servers": self.client_bootstrap(), "log_level": 0,
                              "socket.timeout.ms": 3000}).list_topics(topic=topic, timeout=4)
            return md.topics[topic].partitions[int(part)]
        except (KafkaException, KeyError):
            return None

    def _name(self, node_id: int) -> str | None:
        return next((n for n, i in self.ids.items() if i == node_id), None)

    def leader_of(self, key: str) -> str | None:
        p = self._partition(key)
        return self._name(p.leader) if p is not None else None

    def isr_of(self, key: str) -> list[str]:
        p = self._partition(key)
        return [x for x in (self._name(i) for i in (p.isrs if p is not None else [])) if x]

    def unregister(self, node: str) -> None:
        """UnregisterBroker (KIP-631) through a broker to the reference
        controller (:mod:`harness.dbs.admin`)."""
        unregister_broker(self.client_bootstrap(), self.ids[node])

    def reassign(self, key: str, replicas: list[str]) -> None:
        """AlterPartitionReassignments (KIP-455) through a broker to the
        reference controller (:mod:`harness.dbs.admin`)."""
        alter_partition_reassignment(self.client_bootstrap(), key, [self.ids[r] for r in replicas])

    def replicas_of(self, key: str) -> list[str]:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            p = self._partition(key)
            if p is not None and p.leader >= 0:
                return [x for x in (self._name(i) for i in p.replicas) if x]
            time.sleep(0.3)
        return []

    def broker_epoch(self, name: str) -> int | None:
        """The running incarnation's broker epoch, from its own status
        (None: down, paused, not registered yet, or not answering)."""
        epoch = (self.status(name) or {}).get("broker_epoch")
        return int(epoch) if epoch is not None else None

    def active_controller(self) -> str | None:
        best: tuple[int, int] | None = None
        for n in self.live_nodes():
            raft = (self.status(n) or {}).get("raft") or {}
            if raft.get("leader") is not None and raft.get("epoch") is not None:
                cand = (int(raft["epoch"]), int(raft["leader"]))
                best = cand if best is None or cand > best else best
        return self._name(best[1]) if best else None

    # ------------------------------------------------------------ the contract's parts
    @property
    def cluster(self) -> "HostedReference":
        """The cluster contract (``nemesis.control``) the nemesis drives."""
        return self

    def after(self, delay_ms: int, fn: Any) -> None:
        self.timers.after(delay_ms, fn)

    @property
    def nodes(self) -> "HostedReference":
        return self

    @property
    def clock(self) -> "HostedReference":
        return self

    @property
    def observer(self) -> "HostedReference":
        return self

    def node_link_names(self) -> list[str]:
        return [f"{a}->{b}" for a in self.node_names() for b in self.node_names() if a != b]

    # ------------------------------------------------------------ teardown
    def teardown(self) -> None:
        self.timers.cancel_all()
        try:
            for n in self.node_names():
                self.hosts.signal(n, signal.SIGCONT)
                self.hosts.signal(n, signal.SIGKILL)
            for n in self.node_names():
                self.hosts.wait_exit(n, 10)
            self._collect()
            if self.disks is not None:
                self.disks.teardown()
        finally:
            try:
                if not getattr(self.hosts, "ephemeral_net", True):  # hosts that outlive the run (ssh)
                    self.net.teardown()
            finally:
                self.hosts.teardown()

    def _collect(self) -> None:
        collect_files(self.hosts, self.node_names(), COLLECT, self.hosts.node_dir,
                      lambda n: self.run_dir / "nodes" / n)


__all__ = ["CLIENT", "CONTROL_PORT", "HostedReference", "NODE_PORT"]
