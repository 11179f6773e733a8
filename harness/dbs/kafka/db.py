"""``--db kafka``: real Apache Kafka (4.4 by default) in KRaft mode.

One JVM per node, started through the backend's host contract only
(``exec``, ``upload``, ``start_daemon``, ``signal``, ``address``): the db
writes each node's ``server.properties`` (``harness.dbs.kafka.props``), formats
its storage with the test's cluster id (``kafka.tools.StorageTool format``,
where the ``eligible.leader.replicas.version`` feature is chosen), and runs
``kafka.Kafka``. Layout and names are the test config's (brokers ``n1..`` with
node.id 1.., dedicated controllers ``c1..`` with node.id 101.., or
``--combined``). Node ``<name>``'s files are ``<run>/nodes/<name>/``:
``server.properties``, ``data/``, ``server.log`` (log4j), ``stdout.log``.

Faults: SIGKILL, SIGTERM (Kafka's controlled shutdown), SIGSTOP/SIGCONT, and
the wall clock through libfaketime: every JVM is started with
``LD_PRELOAD=libfaketime`` reading an offset from ``<node>/faketime`` on
every call (``FAKETIME_NO_CACHE=1``), so rewriting that file moves the
node's clock while it runs. Only ``CLOCK_REALTIME`` is faked
(``FAKETIME_DONT_FAKE_MONOTONIC=1``): Kafka's ``Time.milliseconds()`` is the
wall clock (session timeouts, ISR lag, purgatory deadlines), while the JVM's
own monotonic clock stays true, as an NTP step leaves it. libfaketime's
"monotonic fix" for ``pthread_cond_timedwait`` is off
(``FAKETIME_FORCE_MONOTONIC_FIX=0``): with it, every timed wait of the JVM's
threads contends on one lock, and a broker took ~40 s of CPU to start
instead of ~2 s.

Ready means: every broker registered (Metadata lists it) and every topic's
partitions have a leader.

Backends: ``local`` (:class:`harness.runtimes.local.LocalHosts`, every
node on 127.0.0.1 with ports of its own; no partitions: a broker advertises
one address that every peer dials, so per-link proxies cannot cut it), and
``netns``, ``docker`` and ``ssh`` (each node a host with its own address,
PLAINTEXT on 9092 and CONTROLLER on 9094, and partitions made by iptables on
each node's host, :class:`harness.runtimes.net.iptables.IptablesNetwork`, as for the
reference broker on real hosts; only each host's sshd port is exempt from a
cut).
A node's files live in the host's node directory (``Remote.node_dir``);
where the host does not share this machine's filesystem (ssh) the jars go
over once per content (:func:`harness.dbs.kafka.dist.archive`, unpacked by the
host's ``install_archive``) and the logs come back to ``<run>/nodes/<name>/``
at teardown.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness.config import TestConfig
from harness.dbs.external import ensure_topics
from harness.dbs.kafka import dist, props, releases
from harness.dbs.kafka.observe import OBSERVER, MetadataPoller, quorum_leader, quorum_state
from harness.dbs.kafka.props import NodePlan
from harness.dbs.kafka.watch import QuorumWatch, SmallIsrSamples
from harness.dbs.parts import ClusterParts, MetadataObserver, NoNetwork, RemoteNodes, SteppedClock, Topology
from harness.errors import HarnessError
from harness.lazyfs.nodes import for_hosts
from harness.rundir.state import RunState
from harness.runtimes import collect_files
from harness.runtimes.local import LocalHosts, allocate_ports
from harness.runtimes.net.iptables import IptablesNetwork
from harness.runtimes.net.latency import Delayers

#: BrokerLifecycleManager's line for an accepted registration
REGISTERED = r"Successfully registered broker [0-9]+ with broker epoch [0-9]+"
#: Kafka's clean-shutdown marker in each log directory (CleanShutdownFileHandler)
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#: how long Kafka's controlled shutdown may take before a SIGKILL ends it
TERMINATE_GRACE_S = 30.0

#: heaps for a shared 2-core machine: brokers 384 MiB, controllers 192 MiB,
#: the serial collector and the client compiler only (start-up in ~3 s)
JVM_FLAGS = ["-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
             "-XX:-UsePerfData", "-Djava.awt.headless=true"]


def heap_for(roles: tuple[str, ...]) -> str:
    return "-Xmx384m" if "broker" in roles else "-Xmx192m"


def harness_jvm(roles: tuple[str, ...]) -> list[str]:
    """The JVM options of a node with these roles as runs start it: the
    small heap and :data:`JVM_FLAGS`."""
    return [heap_for(roles), *JVM_FLAGS]


def new_cluster_id(seed: int) -> str:
    """A Kafka cluster id (a UUID, URL-safe base64 without padding), from the seed."""
    raw = uuid.UUID(int=(seed * 0x9E3779B97F4A7C15 + 1) % (1 << 128)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def preflight(cfg: TestConfig) -> None:
    """Before anything starts: the ports are free, java (and libfaketime for
    clock faults) is installed, and the Kafka release is fetched."""
    if cfg.base_port:
        allocate_ports(2 * cfg.node_count(), cfg.base_port)
    if shutil.which("java") is None:
        raise HarnessError("--db kafka needs java on PATH (scripts/bootstrap installs it)")
    if wants_clock(cfg) and not os.path.exists(LIBFAKETIME):
        raise HarnessError(f"clock faults on --db kafka need libfaketime ({LIBFAKETIME}; apt package faketime)")
    if not cfg.kafka_home:  # the release's table row refuses before Maven is asked
        releases.check_variants(dist.check_version(cfg.kafka_version), cfg.variants)
    kafka = dist.ensure(cfg.kafka_version, cfg.kafka_home)
    releases.check_variants(kafka.version, cfg.variants)


def host_needs(cfg: TestConfig) -> list[tuple[list[str], str]]:
    """What a real host needs for Kafka's JVMs, as (``test`` arguments, the
    refusal's words): libfaketime where a fault moves a clock (without it
    LD_PRELOAD is ignored and no clock ever moves)."""
    if not wants_clock(cfg):
        return []
    return [(["-e", LIBFAKETIME], f"has no {LIBFAKETIME}, which clock faults on --db kafka preload "
                                  "(apt package faketime)")]


def ro_paths(cfg: TestConfig) -> list[str]:
    """Kafka's jars, which the docker runtime mounts read-only into every container."""
    return [str(dist.ensure(cfg.kafka_version, cfg.kafka_home).libs.resolve())]


def wants_clock(cfg: TestConfig) -> bool:
    """Whether any fault of the run moves a clock (``clock``, ``clock-strobe``,
    with any target, from the mix or a replayed schedule): the JVMs then start
    under libfaketime, which is the only way their clocks move."""
    return any(s.kind in ("clock", "clock-strobe") for s in cfg.faults())


def server_overrides(cfg: TestConfig) -> dict[str, str]:
    """What the test sets over the generated ``server.properties``:
    ``--flush-messages`` as ``log.flush.interval.messages`` (as the
    reference's nodes and the simulator take it), then ``--kafka-config``,
    which wins."""
    flush = {"log.flush.interval.messages": str(cfg.flush_messages)} if cfg.flush_messages else {}
    return {**flush, **props.parse_overrides(cfg.kafka_config)}


def capabilities_for(cfg: TestConfig) -> frozenset[str]:
    """The faults db kafka can make on ``cfg.backend`` (``nemesis.control``'s
    Capability values), known before anything starts so the runner refuses
    the rest: signals, libfaketime clocks, reassignment and UnregisterBroker everywhere;
    kernel partitions, loss and latency where each node is a host of its own
    (not local: a broker advertises one address every peer dials); power
    loss and torn writes only through kraftwerk fs (storage lazyfs)."""
    caps = {"kill", "terminate", "pause", "clock", "clock-strobe", "reassign", "unregister"}
    if cfg.backend != "local":
        caps |= {"partition", "partition-clients", "loss", "latency"}
    if cfg.storage == "lazyfs":
        caps |= {"power-loss", "lose-unfsynced", "torn-write"}
    return frozenset(caps)


#: a node's files that come back to the run directory from a host of its own
COLLECT = ("server.properties", "server.log", "stdout.log")

#: fixed ports on backends where every node has an address of its own
BROKER_PORT, CONTROLLER_PORT = 9092, 9094


def plan(cfg: TestConfig, hosts: Any, ports: list[int] | None) -> list[NodePlan]:
    """Each node's address and ports: its own ports on 127.0.0.1 (``ports``,
    two per node), or the fixed ones at its own address."""
    if ports is None:
        return [NodePlan(name, nid, tuple(roles), hosts.address(name), BROKER_PORT, CONTROLLER_PORT)
                for name, nid, roles in cfg.layout()]
    it = iter(ports)
    return [NodePlan(name, nid, tuple(roles), hosts.address(name), next(it), next(it))
            for name, nid, roles in cfg.layout()]


@dataclass
class KafkaDB:
    """Kafka's JVMs on a backend's hosts; its cluster contract
    (:attr:`cluster`) is in parts: signal-based node control over the hosts
    (:class:`~harness.dbs.parts.RemoteNodes`), the iptables network (none on
    the local backend), libfaketime clocks, and an observer reading Metadata,
    the controllers' quorum-state files and each broker's registrations."""

    cfg: TestConfig
    run_dir: Path
    state: RunState
    hosts: Any = None
    kafka: dist.KafkaDist | None = field(default=None, init=False)
    plans: list[NodePlan] = field(default_factory=list, init=False)
    #: a kernel Network (netns, docker, ssh); None on the local backend
    net: IptablesNetwork | None = field(default=None, init=False)
    #: per node: (classpath, log4j config) as the node's host sees them
    on_host: dict[str, tuple[str, str]] = field(default_factory=dict, init=False)
    #: per node: how many times its process was started (the observer tells lives apart)
    lives: dict[str, int] = field(default_factory=dict, init=False)
    #: per node: the server.properties written
    node_props: dict[str, dict[str, str]] = field(default_factory=dict, init=False)
    #: the servers' JVM options by roles (the storage tool always runs with
    #: :func:`harness_jvm`): a benchmark may start Kafka as its users do
    jvm_options: Callable[[tuple[str, ...]], list[str]] = harness_jvm

    def __post_init__(self) -> None:
        if self.hosts is None:
            self.hosts = LocalHosts(self.state)
        self.topo = Topology.of(self.cfg.layout())
        self.by_name: dict[str, NodePlan] = {}
        names = self.topo.node_names()
        if self.hosts.runtime != "local":
            self.net = IptablesNetwork(names, {n: self.hosts.address(n) for n in names}, self.hosts.client_address,
                                       self._exec_for_net, mode=self.cfg.net_cut,
                                       exempt_ports=getattr(self.hosts, "control_ports", (22,)),
                                       delayers=Delayers(self.hosts))
        self.nodes = RemoteNodes(self.topo, self.hosts, self.client_bootstrap, self._launch,
                                 lambda n: str(self.host_dir(n) / "data" / CLEAN_SHUTDOWN_FILE), TERMINATE_GRACE_S,
                                 _no_unfsynced_loss)
        self.registrations = Registrations(self.hosts, self.host_dir)
        observer = KafkaObserver(self.topo, self.client_bootstrap, self.cfg.keys(), self.nodes, self.registrations,
                                 self.host_dir, self.listener)
        self.nodes.on_move(observer.forget)
        self.cluster = ClusterParts(
            str(self.hosts.runtime), capabilities_for(self.cfg), self.nodes, self.net or NoNetwork(),
            FaketimeClock(self.hosts, self.host_dir), observer)

    def _exec_for_net(self, node: str, argv: Any, stdin: str | None) -> tuple[int, str, str]:
        return self.hosts.exec(node, list(argv), 30.0, stdin=stdin)

    # ------------------------------------------------------------ set-up
    def setup(self, ready_timeout: float = 90.0, topics: bool = True) -> None:
        """Fetch Kafka, configure and format every node, start them, and wait
        until every broker is registered (and the test's topics have leaders)."""
        cfg = self.cfg
        self.kafka = dist.ensure(cfg.kafka_version, cfg.kafka_home)
        local = self.hosts.runtime == "local"
        self.plans = plan(cfg, self.hosts, allocate_ports(2 * cfg.node_count(), cfg.base_port) if local else None)
        self.by_name = {n.name: n for n in self.plans}
        if self.net is not None:
            self.net.setup()
        self._ship_kafka()
        cluster_id = new_cluster_id(cfg.seed or 0)
        if cfg.storage == "lazyfs":  # data/ through kraftwerk fs: power loss drops what Kafka did not fsync
            self.nodes.disks = self.make_disks()
            for n in self.plans:
                self.nodes.disks.mount(n.name)
        for n in self.plans:
            self._write_config(n)
            self._format(n, cluster_id)
        for n in self.plans:
            self.nodes.start(n.name)
        if topics:
            ensure_topics(self.client_bootstrap(), cfg, timeout=ready_timeout, expect_brokers=cfg.brokers,
                          check_rf=True, alive=self._check_alive)
            self.start_observer()
        else:
            self.wait_brokers(ready_timeout)

    def start_observer(self) -> None:
        """Poll leader, epochs, ISR, ELR and HW into ``nodes/observer/trace.jsonl``
        (``harness.dbs.kafka.observe``) while the run lasts."""
        names = {n.node_id: n.name for n in self.plans}
        row = releases.release_for(self.version(), home=True)
        self.observer_poller = MetadataPoller(self.client_bootstrap(), self.cfg.topic_names(), names,
                                              self.node_dir(OBSERVER) / "trace.jsonl",
                                              describe_partitions=row.describe_partitions,
                                              quorum=QuorumWatch(self._quorum_files, names),
                                              small_isr=SmallIsrSamples(self.cfg.min_isr),
                                              settings=self._observer_settings())
        self.observer_poller.start()

    def _observer_settings(self) -> dict[str, Any]:
        """What the checks of the observer's trace (``checkers.observed``)
        need to know: the release and the quorum's timeouts as written."""
        p = self.node_props.get(self.topo.controllers()[0], {}) if self.topo.controllers() else {}
        keys = {"fetch_timeout_ms": "controller.quorum.fetch.timeout.ms",
                "election_timeout_ms": "controller.quorum.election.timeout.ms"}
        return {"kafka_version": self.version(), "min_isr": self.cfg.min_isr,
                **{name: int(p[k]) for name, k in keys.items() if k in p}}

    def _quorum_files(self) -> dict[str, tuple[int, dict[str, Any] | None, bool]]:
        """Each controller's process start count, quorum-state ({} while
        the file is missing, None while the node is down or paused), and
        whether that process was sent a SIGTERM (shutting down)."""
        live = set(self.nodes.live_nodes())
        return {c: (self.lives.get(c, 0), (quorum_state(self.nodes.hosts, c, self.host_dir(c)) or {})
                    if c in live else None, c in self.nodes.sigtermed)
                for c in self.topo.controllers()}

    def wait_brokers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                admin = AdminClient({"bootstrap.servers": self.client_bootstrap(), "log_level": 0,
                                     "socket.timeout.ms": 3000})
                if len(admin.list_topics(timeout=5).brokers) >= self.cfg.brokers:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise HarnessError(f"Kafka brokers not all registered after {timeout:.0f}s")
            time.sleep(0.5)

    def make_disks(self) -> Any:
        """Each node's ``data/`` through kraftwerk fs, mounted where the JVM
        writes it: here for namespaces (they share this machine's mount
        table), on the node's own host for containers and ssh hosts (a mount
        made here is never seen there, and a power loss would drop nothing)."""
        return for_hosts(self.hosts, self.run_dir, self.state, self.cfg.seed or 0, torn=self.cfg.torn_writes)

    def node_dir(self, name: str) -> Path:
        """Where the node's files are collected in the run directory."""
        return self.run_dir / "nodes" / name

    def host_dir(self, name: str) -> PurePosixPath:
        """The node's directory on its host (the same path where the host
        shares this machine's filesystem)."""
        on_host = getattr(self.hosts, "node_dir", None)
        return PurePosixPath(on_host(name) if on_host is not None else self.node_dir(name))

    def _ship_kafka(self) -> None:
        """The jars and the log4j config where each host's JVM can read
        them: this machine's paths on a shared filesystem (docker mounts
        them), else an archive unpacked once per content on the host."""
        assert self.kafka is not None
        local = (self.kafka.classpath(), str(dist.LOG4J))
        install = getattr(self.hosts, "install_archive", None)
        if install is None or getattr(self.hosts, "shared_fs", True):
            self.on_host = {n.name: local for n in self.plans}
            return
        digest, path = dist.archive(self.kafka)
        dirs = install(f"kafka-{self.kafka.version}-{digest}", path)
        self.on_host = {n: (f"{d}/libs/*", f"{d}/{dist.LOG4J.name}") for n, d in dirs.items()}

    def _write_config(self, n: NodePlan) -> None:
        d = self.host_dir(n.name)
        self.node_dir(n.name).mkdir(parents=True, exist_ok=True)
        code, _, err = self.hosts.exec(n.name, ["mkdir", "-p", str(d)], timeout=30)
        if code != 0:
            raise HarnessError(f"{n.name}: cannot make {d}: {err.strip()[:200]}")
        p = props.server_properties(
            n, self.plans, str(d / "data"), brokers=self.cfg.brokers, rf=self.cfg.rf, min_isr=self.cfg.min_isr,
            partitions=self.cfg.partitions, variants=self.cfg.variants,
            overrides=server_overrides(self.cfg),
        )
        p = self.node_props[n.name] = releases.applicable(self.version(), p)
        with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
            f.write(props.render(p))
        try:
            self.hosts.upload(n.name, Path(f.name), str(d / "server.properties"))
            (Path(f.name)).write_text("+0\n")
            self.hosts.upload(n.name, Path(f.name), str(d / "faketime"))
        finally:
            os.unlink(f.name)

    def _java(self, n: NodePlan, main: str, *args: str, server: bool = False) -> list[str]:
        classpath, log4j = self.on_host[n.name]
        jvm = self.jvm_options(n.roles) if server else harness_jvm(n.roles)
        return ["java", *jvm, "-cp", classpath,
                f"-Dlog4j2.configurationFile={log4j}", f"-Dkafka.logs.dir={self.host_dir(n.name)}", main, *args]

    def _format(self, n: NodePlan, cluster_id: str) -> None:
        d = self.host_dir(n.name)
        argv = self._java(n, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(d / "server.properties"))
        for feat in props.format_features(self.cfg.variants, self.version()):
            argv += ["--feature", feat]
        code, out, err = self.hosts.exec(n.name, argv, timeout=120)
        if code != 0:
            lines = [ln for ln in (err + out).splitlines() if ln.strip()]
            raise HarnessError(f"formatting {n.name}'s storage failed: {(lines or ['exit %d' % code])[-1][:300]}")
        if self.nodes.disks is not None:
            # StorageTool does not fsync what it writes (seen on 3.9.2: a power loss
            # in the run dropped data/bootstrap.checkpoint and the node never started
            # again). A real cluster is formatted long before its first power loss,
            # and the kernel has written those pages back by then.
            self.nodes.disks.sync(n.name)

    def _check_alive(self) -> None:
        for n in self.plans:
            if n.name not in self.nodes.paused and not self.hosts.running(n.name):
                self.collect()
                raise HarnessError(f"Kafka node {n.name} exited at start-up: {_last_error(self.node_dir(n.name))}")

    def client_bootstrap(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.plans if "broker" in n.roles)

    def listener(self, name: str) -> str:
        """One broker's client listener, ``host:port``."""
        n = self.by_name[name]
        return f"{n.host}:{n.port}"

    def version(self) -> str:
        return self.kafka.version if self.kafka else self.cfg.kafka_version

    def _launch(self, name: str) -> None:
        n = self.by_name[name]
        d = self.host_dir(name)
        env = {"LD_PRELOAD": LIBFAKETIME, "FAKETIME_TIMESTAMP_FILE": str(d / "faketime"),
               "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
               "FAKETIME_FORCE_MONOTONIC_FIX": "0"} if wants_clock(self.cfg) else {}
        self.registrations.started(name)
        self.lives[name] = self.lives.get(name, 0) + 1
        self.hosts.start_daemon(name, self._java(n, "kafka.Kafka", str(d / "server.properties"), server=True),
                                str(d / "stdout.log"), env)

    # ------------------------------------------------------------ teardown
    def teardown(self) -> None:
        self.cluster.timers.cancel_all()
        poller = getattr(self, "observer_poller", None)
        if poller is not None:
            poller.stop()
        try:
            self.nodes.kill_all()
            self.collect()
            if self.nodes.disks is not None:
                self.nodes.disks.teardown()
        finally:
            try:
                if self.net is not None and not getattr(self.hosts, "ephemeral_net", True):
                    self.net.teardown()
            finally:
                self.hosts.teardown()

    def collect(self) -> None:
        """Bring each node's logs back to ``<run>/nodes/<name>/`` from a host
        that does not share this machine's filesystem (ssh)."""
        collect_files(self.hosts, self.topo.node_names(), COLLECT, lambda n: str(self.host_dir(n)), self.node_dir)


def _no_unfsynced_loss(node: str) -> None:
    raise HarnessError("power loss on --db kafka needs --storage lazyfs (--backend netns, docker or ssh)")


class Registrations:
    """Each broker's registrations, from its own ``server.log`` lines
    ``Successfully registered broker N with broker epoch E``
    (BrokerLifecycleManager), counted from the moment its process started."""

    def __init__(self, hosts: Any, host_dir: Callable[[str], PurePosixPath]) -> None:
        self.hosts, self.host_dir = hosts, host_dir
        #: per node: how many registrations its server.log held when its process started
        self.before: dict[str, int] = {}

    def epochs(self, name: str) -> list[int]:
        """The broker epochs the node's server.log records, oldest first."""
        code, out, _ = self.hosts.exec(name, ["grep", "-a", "-o", "-E", REGISTERED,
                                              str(self.host_dir(name) / "server.log")], timeout=10)
        return [int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.strip()] if code == 0 else []

    def started(self, name: str) -> None:
        self.before[name] = len(self.epochs(name))

    def current(self, name: str) -> int | None:
        """The running process's broker epoch (None while it is down or has
        not registered since it started)."""
        if not self.hosts.running(name) or name not in self.before:
            return None
        mine = self.epochs(name)[self.before[name]:]
        return mine[-1] if mine else None


class FaketimeClock(SteppedClock):
    """A JVM's wall clock through libfaketime, which rereads the node's
    ``faketime`` file on every call (``FAKETIME_NO_CACHE``)."""

    def __init__(self, hosts: Any, host_dir: Callable[[str], PurePosixPath]) -> None:
        self.hosts, self.host_dir = hosts, host_dir

    def set_offset(self, node: str, ms: int) -> None:
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write(f"{ms / 1000:+.3f}\n")
        try:
            self.hosts.upload(node, Path(f.name), str(self.host_dir(node) / "faketime"))
        finally:
            os.unlink(f.name)


class KafkaObserver(MetadataObserver):
    """Kafka's Observer: Metadata for partitions; the active controller from
    the controllers' ``quorum-state`` files (Metadata names a random broker
    as controller in KRaft mode, not the active one); each broker's epoch
    from its registrations."""

    def __init__(self, topo: Topology, bootstrap: Callable[[], str], keys: list[str], nodes: RemoteNodes,
                 registrations: Registrations, host_dir: Callable[[str], PurePosixPath],
                 listener: Callable[[str], str] | None = None) -> None:
        super().__init__(topo, bootstrap, keys, listener)
        self.nodes, self.registrations, self.host_dir = nodes, registrations, host_dir

    def broker_epoch(self, node: str) -> int | None:
        return self.registrations.current(node)

    def active_controller(self) -> str | None:
        live = set(self.nodes.live_nodes())
        voters = [n for n in self.topo.controllers() if n in live]
        return quorum_leader({n: quorum_state(self.nodes.hosts, n, self.host_dir(n)) for n in voters},
                             self.topo.name_of)


def _last_error(d: Path) -> str:
    for name in ("stdout.log", "server.log"):
        try:
            lines = (d / name).read_text(errors="replace").splitlines()
        except OSError:
            continue
        bad = [ln for ln in lines if "ERROR" in ln or "Exception" in ln]
        if bad:
            return bad[-1].strip()[:300]
    return "(no error in its logs)"
