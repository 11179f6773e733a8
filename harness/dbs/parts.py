"""The cluster contract (``nemesis.control``) in small parts the dbs share.

Jepsen splits a db's faults into a small required protocol and optional
capability protocols (``jepsen.db``, ``jepsen.net.proto``); the contract
does the same (node control, network, clock, observer), and each db here
builds its cluster from parts rather than being all of them at once:

* :class:`ClusterParts`: the bundle the nemesis drives (runtime,
  capabilities, ``after`` on a timer thread, and the four parts);
* :class:`Topology`: the nodes' names, ids and roles, as the test's layout;
* :class:`RemoteNodes`: node control of daemons on a backend's hosts
  (``Remote``) by signals (SIGKILL, SIGTERM with a grace, SIGSTOP/SIGCONT),
  power loss by the hosts' kraftwerk fs mounts; both hosted dbs (the
  reference broker and Kafka) use it, each saying how a node is launched
  and where its clean-shutdown marker lies;
* :class:`ControlEndpoints`: the reference broker's control endpoint (status,
  clock offset, power loss) with the cluster secret, local or hosted;
* :class:`SteppedClock`: a clock made by setting an offset (strobes in the
  calling thread), over a control endpoint (:class:`ControlClock`) or
  libfaketime (Kafka's);
* :class:`MetadataObserver`: leaders, ISRs and replicas from a Metadata
  request, with the active controller and broker epochs from node status
  (:class:`StatusObserver`) or, for Kafka, from its files.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness.dbs.admin import alter_partition_reassignment, unregister_broker
from harness.errors import HarnessError
from harness.rundir.timers import Timers
from nemesis.control import Capability, Clock, Link, Network, NodeControl, Observer, Unsupported
from reference_impl.server import auth

#: how long an observer waits for a partition's leader before it reports no replicas
REPLICAS_WAIT_S = 15.0


@dataclass
class ClusterParts:
    """One db's cluster as a fault sees it (``nemesis.control.Cluster``)."""

    runtime: str
    capabilities: frozenset[Capability] | frozenset[str]
    nodes: NodeControl
    net: Network
    clock: Clock
    observer: Observer
    timers: Timers = field(default_factory=Timers)

    def after(self, delay_ms: int, fn: Callable[[], None]) -> None:
        self.timers.after(delay_ms, fn)

    def step_after(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Real clocks order no events within a millisecond: as :meth:`after`."""
        self.timers.after(delay_ms, fn)


@dataclass(frozen=True)
class Topology:
    """The nodes' names, node ids and roles (``TestConfig.layout``)."""

    layout: tuple[tuple[str, int, tuple[str, ...]], ...]

    @classmethod
    def of(cls, layout: Iterable[tuple[str, int, Iterable[str]]]) -> "Topology":
        return cls(tuple((n, i, tuple(r)) for n, i, r in layout))

    def node_names(self) -> list[str]:
        return [n for n, _, _ in self.layout]

    def brokers(self) -> list[str]:
        return [n for n, _, r in self.layout if "broker" in r]

    def controllers(self) -> list[str]:
        return [n for n, _, r in self.layout if "controller" in r]

    def id_of(self, name: str) -> int:
        return next(i for n, i, _ in self.layout if n == name)

    def name_of(self, node_id: int) -> str | None:
        return next((n for n, i, _ in self.layout if i == node_id), None)

    def roles_of(self, name: str) -> tuple[str, ...]:
        return next(r for n, _, r in self.layout if n == name)


class Membership:
    """The membership faults' requests (KIP-455 reassignments, KIP-631
    UnregisterBroker) through a broker of the cluster (:mod:`harness.dbs.admin`),
    nodes named as the contract names them."""

    topo: Topology
    bootstrap: Callable[[], str]

    def reassign(self, key: str, replicas: list[str]) -> None:
        """Asked on a thread of its own, as the simulator's admin endpoint
        asks on its loop: the nemesis goes on at once (waiting here, a
        cluster without a controller quorum held it for every broker's
        timeout and the rest of a replayed schedule played late). The
        outcome is kept in :attr:`reassigned` (key -> None or the error).

        Whoever reads the partition's metadata through a cache is told
        (:meth:`on_move`) when the move is asked and again when the
        controller has taken it: an answer read before either no longer
        stands for "now" (a replay's next move, 0.36 s after a
        decommission's, read the replicas as they were before it)."""
        ids, boot = [self.topo.id_of(r) for r in replicas], self.bootstrap()
        self._moved(key)
        threading.Thread(target=self._reassign, args=(boot, key, ids), name=f"reassign-{key}", daemon=True).start()

    def on_move(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(key)`` when a reassignment of ``key`` is asked and when
        the controller has accepted it."""
        self.__dict__.setdefault("move_listeners", []).append(fn)

    def _moved(self, key: str) -> None:
        for fn in self.__dict__.get("move_listeners", []):
            fn(key)

    def _reassign(self, bootstrap: str, key: str, ids: list[int]) -> None:
        done = self.__dict__.setdefault("reassigned", {})
        try:
            alter_partition_reassignment(bootstrap, key, ids)
            done[key] = None
        except Exception as e:  # noqa: BLE001 - refused, or the run tore its hosts down meanwhile
            done[key] = f"{type(e).__name__}: {e}"[:300]
        self._moved(key)

    def unregister(self, node: str) -> None:
        unregister_broker(self.bootstrap(), self.topo.id_of(node))


class NodeSets:
    """The contract's node sets, derived from each node's process state: one
    definition for every node control (a host's daemons, local processes)."""

    paused: set[str]

    def node_names(self) -> list[str]: ...
    def running(self, node: str) -> bool: ...
    def answering(self, node: str) -> bool: ...

    def dead_nodes(self) -> list[str]:
        return [n for n in self.node_names() if not self.running(n)]

    def paused_nodes(self) -> list[str]:
        return sorted(n for n in self.paused if self.running(n))

    def live_nodes(self) -> list[str]:
        return [n for n in self.node_names() if self.answering(n)]


class RemoteNodes(NodeSets, Membership):
    """Node control of one daemon per host of a backend (``Remote``): the
    contract's NodeControl, ShutdownOutcomes, TornWrites and Reassignments.

    ``launch(node)`` starts the node's daemon; ``marker(node)`` is the path
    of its clean-shutdown marker on its host; ``grace_s`` how long a SIGTERM
    may take before a SIGKILL ends it. A power loss crashes the node's
    kraftwerk fs mount (``disks``, storage lazyfs); without one,
    ``lose_unfsynced(node)`` makes it (or refuses)."""

    def __init__(self, topo: Topology, hosts: Any, bootstrap: Callable[[], str], launch: Callable[[str], None],
                 marker: Callable[[str], str], grace_s: float,
                 lose_unfsynced: Callable[[str], None]) -> None:
        self.topo, self.hosts, self.bootstrap = topo, hosts, bootstrap
        self.launch, self.marker, self.grace_s, self.lose_unfsynced = launch, marker, grace_s, lose_unfsynced
        self.paused: set[str] = set()
        #: how each node's latest SIGTERM ended (True: its clean-shutdown marker was written)
        self.shutdowns: dict[str, bool] = {}
        #: nodes sent a SIGTERM whose process has not been started again
        #: since (shutting down, or down after it): the observer says so
        self.sigtermed: set[str] = set()
        #: storage lazyfs: each node's data directory through kraftwerk fs
        self.disks: Any = None

    def node_names(self) -> list[str]:
        return self.topo.node_names()

    def brokers(self) -> list[str]:
        return self.topo.brokers()

    def controllers(self) -> list[str]:
        return self.topo.controllers()

    def running(self, node: str) -> bool:
        return bool(self.hosts.running(node))

    def answering(self, node: str) -> bool:
        """Runs and is not paused: a request to it can be answered."""
        return self.running(node) and node not in self.paused

    def start(self, node: str) -> None:
        if self.running(node):
            return
        self.paused.discard(node)
        self.sigtermed.discard(node)
        self.launch(node)

    def kill(self, node: str) -> None:
        self.hosts.signal(node, signal.SIGCONT)
        self.hosts.signal(node, signal.SIGKILL)
        self.hosts.wait_exit(node, 10)
        self.paused.discard(node)

    def kill_all(self) -> None:
        """Every node's daemon ended at teardown: all woken and killed
        first, then each waited for, so the kills land together rather
        than one node's wait at a time."""
        names = self.node_names()
        for n in names:
            self.hosts.signal(n, signal.SIGCONT)
            self.hosts.signal(n, signal.SIGKILL)
        for n in names:
            self.hosts.wait_exit(n, 10)

    def terminate(self, node: str) -> None:
        """SIGTERM: the node's controlled shutdown; SIGKILL after the grace,
        on a thread of its own, as the simulator runs the grace on its loop:
        the nemesis goes on at once (waiting here, a shutdown stuck without a
        controller quorum held the nemesis 30 s and the rest of a replayed
        schedule never ran). How it ended is kept for :meth:`last_shutdown_clean`
        (None until then: the node is *stopping*)."""
        self.shutdowns.pop(node, None)
        self.sigtermed.add(node)
        self.hosts.signal(node, signal.SIGCONT)
        self.paused.discard(node)
        self.hosts.signal(node, signal.SIGTERM)
        threading.Thread(target=self._grace, args=(node,), name=f"grace-{node}", daemon=True).start()

    def _grace(self, node: str) -> None:
        try:
            if not self.hosts.wait_exit(node, self.grace_s):
                self.kill(node)
            self.shutdowns[node] = self.hosts.exec(node, ["test", "-e", self.marker(node)], 30.0)[0] == 0
        except Exception:  # noqa: BLE001 - the run tore its hosts down meanwhile
            return

    def last_shutdown_clean(self, node: str) -> bool | None:
        """Whether the node's latest SIGTERM left its clean-shutdown marker
        (read as the process ended, before anything restarts it)."""
        return self.shutdowns.get(node)

    def pause(self, node: str) -> None:
        if self.running(node):
            self.hosts.signal(node, signal.SIGSTOP)
            self.paused.add(node)

    def resume(self, node: str) -> None:
        if node in self.paused:
            self.hosts.signal(node, signal.SIGCONT)
            self.paused.discard(node)

    def power_loss(self, node: str) -> None:
        """The node's un-fsynced writes are lost and it is down: SIGKILL, then
        its kraftwerk fs mount crashes; else what ``lose_unfsynced`` does."""
        if self.disks is not None:
            self.kill(node)
            self.disks.crash(node)
        else:
            self.lose_unfsynced(node)

    def torn_power_loss(self, node: str) -> None:
        """SIGKILL, then a torn crash of the node's filesystem: each file keeps
        its fsynced bytes and a seeded prefix of the rest (storage lazyfs)."""
        if self.disks is None:
            raise HarnessError("a torn write needs --storage lazyfs (kraftwerk fs under each node)")
        self.kill(node)
        self.disks.crash(node, torn=True)



class ControlEndpoints:
    """Each reference node's control endpoint (``reference_impl/server/control.py``)
    over HTTP with the cluster secret: ``address(node)`` is its host:port,
    ``answering(node)`` whether the node can answer now (running, not paused)."""

    def __init__(self, address: Callable[[str], str], secret: Callable[[], bytes | None],
                 answering: Callable[[str], bool]) -> None:
        self.address, self.secret, self.answering = address, secret, answering

    def call(self, node: str, method: str, path: str, body: dict[str, Any] | None = None,
             timeout: float = 3.0) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {auth.HEADER: f"Bearer {auth.token(self.secret(), auth.CONTROL)}"}
        if data:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(f"http://{self.address(node)}{path}", data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def status(self, node: str, timeout: float = 2.0) -> dict[str, Any] | None:
        """The node's ``/status``; None while it cannot answer."""
        if not self.answering(node):
            return None
        try:
            return self.call(node, "GET", "/status", timeout=timeout)
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def set_clock(self, node: str, offset_ms: int) -> None:
        if self.answering(node):
            self.call(node, "POST", "/clock", {"offset_ms": int(offset_ms)})

    def power_loss(self, node: str) -> None:
        """Ask the node to revert its un-fsynced writes and exit (137, mid-request)."""
        try:
            self.call(node, "POST", "/power-loss", {}, timeout=3)
        except (OSError, urllib.error.URLError, ValueError):
            pass  # the node exits before answering


class NoNetwork:
    """The Network of a runtime that cannot cut or slow links (db kafka on
    local processes): healing is a no-op, any fault is refused in one line
    (the capability check refuses it before a run starts)."""

    def cut(self, pairs: Iterable[Link]) -> None:
        if list(pairs):
            raise Unsupported("partitions need a kernel backend (netns, docker or ssh) here")

    def set_latency(self, links: Iterable[Link], ms: float, jitter_ms: float) -> None:
        if ms or jitter_ms:
            raise Unsupported("latency needs a backend that delays links here")

    def set_loss(self, links: Iterable[Link], probability: float) -> None:
        if probability:
            raise Unsupported("loss needs a kernel backend (netns, docker or ssh) here")


class SteppedClock:
    """The contract's Clock by setting each node's offset. A strobe flips it
    on a thread of its own, then leaves it at 0, as the simulator flips it
    on its loop: the nemesis goes on at once and the nodes of one strobe
    flip together (in the nemesis's thread, a strobe of four nodes held the
    nemesis 5.7 s, and a replayed schedule ran that much late); a reset or
    another strobe of the node ends it."""

    def set_offset(self, node: str, ms: int) -> None:
        raise NotImplementedError

    def _guard(self) -> threading.Lock:
        return self.__dict__.setdefault("_strobe_lock", threading.Lock())

    def _next_strobe(self, node: str) -> int:
        strobes: dict[str, int] = self.__dict__.setdefault("_strobes", {})
        strobes[node] = strobes.get(node, 0) + 1
        return strobes[node]

    def _strobing(self, node: str, token: int) -> bool:
        return self.__dict__.get("_strobes", {}).get(node) == token

    def reset(self, node: str) -> None:
        with self._guard():  # no flip of an ended strobe lands after it
            self._next_strobe(node)
            self.set_offset(node, 0)

    def strobe(self, node: str, delta_ms: int, period_ms: int, duration_ms: int) -> None:
        with self._guard():
            token = self._next_strobe(node)
        threading.Thread(target=self._flip, args=(node, token, delta_ms, period_ms, duration_ms),
                         name=f"strobe-{node}", daemon=True).start()

    def _flip(self, node: str, token: int, delta_ms: int, period_ms: int, duration_ms: int) -> None:
        end = time.monotonic() + duration_ms / 1000
        flip = False
        try:
            while time.monotonic() < end:
                flip = not flip
                with self._guard():
                    if not self._strobing(node, token):
                        return
                    self.set_offset(node, delta_ms if flip else 0)
                time.sleep(period_ms / 1000)
            with self._guard():
                if self._strobing(node, token):
                    self.set_offset(node, 0)
        except Exception:  # noqa: BLE001 - the node went away (killed, torn down): its clock with it
            return


class ControlClock(SteppedClock):
    """A reference node's clock, through its control endpoint (``POST /clock``)."""

    def __init__(self, endpoints: ControlEndpoints) -> None:
        self.endpoints = endpoints

    def set_offset(self, node: str, ms: int) -> None:
        self.endpoints.set_clock(node, ms)


#: how many times :meth:`MetadataObserver.own_isrs` asks before it gives up
#: on an answer from the broker itself (each ask takes about 50 ms here)
OWN_ASKS = 6


class MetadataObserver:
    """The contract's Observer: leaders, ISRs and replicas as a Metadata
    response lists them (any broker answers; during a reassignment the
    replicas are the target and the leaving ones together), by node name.
    The active controller and broker epochs come from the db's own
    sources: a subclass says how."""

    #: how long one Metadata answer stands for "now": the looks of one
    #: decision (a state target's ISR, leader and replicas of every
    #: partition, the ledger's looks) share it instead of asking again, each
    #: ask up to 4 s when brokers do not answer (a replay on Kafka played
    #: its schedule 5 s late, and 63 s once, through these asks)
    FRESH_S = 0.5

    def __init__(self, topo: Topology, bootstrap: Callable[[], str], keys: list[str],
                 listener: Callable[[str], str] | None = None) -> None:
        self.topo, self.bootstrap, self._keys = topo, bootstrap, keys
        #: a broker's own client listener (``host:port``), where the db's
        #: brokers answer only once caught up to their registration (Kafka)
        self.listener = listener
        self._seen: dict[str, tuple[float, Any]] = {}  # topic: (when asked, its metadata or None)
        #: topic: when the harness last changed it (:meth:`forget`); an ask
        #: begun before that, answered after, is not kept
        self._changed: dict[str, float] = {}
        self._lock = threading.Lock()

    def keys(self) -> list[str]:
        return self._keys

    def forget(self, key: str) -> None:
        """The cluster changed ``key``'s partition (a reassignment asked or
        accepted): the next look asks again, however fresh the last answer."""
        topic = key.rpartition("-")[0]
        with self._lock:
            self._seen.pop(topic, None)
            self._changed[topic] = time.monotonic()

    def _topic(self, topic: str) -> Any:
        with self._lock:
            when, md = self._seen.get(topic, (-1e9, None))
        if time.monotonic() - when < self.FRESH_S:
            return md
        asked = time.monotonic()
        try:  # the ask outside the lock: a story's timer asks beside the nemesis
            md = AdminClient({"bootstrap.servers": self.bootstrap(), "log_level": 0,
                              "socket.timeout.ms": 3000}).list_topics(topic=topic, timeout=4)
        except KafkaException:
            md = None
        with self._lock:
            if self._changed.get(topic, -1e9) < asked:
                self._seen[topic] = (time.monotonic(), md)
        return md

    def _partition(self, key: str) -> Any:
        topic, _, part = key.rpartition("-")
        md = self._topic(topic)
        try:
            return md.topics[topic].partitions[int(part)] if md is not None else None
        except KeyError:
            return None

    def _names(self, ids: Iterable[int]) -> list[str]:
        return [n for n in (self.topo.name_of(i) for i in ids) if n]

    def leader_of(self, key: str) -> str | None:
        p = self._partition(key)
        return self.topo.name_of(p.leader) if p is not None and p.leader >= 0 else None

    def isr_of(self, key: str) -> list[str]:
        p = self._partition(key)
        return self._names(p.isrs) if p is not None else []

    def replicas_of(self, key: str) -> list[str]:
        """Once a leader is known (for at most :data:`REPLICAS_WAIT_S`): a
        leaderless partition's metadata may list no replicas yet."""
        deadline = time.monotonic() + REPLICAS_WAIT_S
        while True:
            p = self._partition(key)
            if p is not None and p.leader >= 0:
                return self._names(p.replicas)
            if time.monotonic() > deadline:
                return []
            time.sleep(0.3)

    def own_isrs(self, node: str) -> dict[str, list[str]] | None:
        """The ISRs one broker lists, asked of it alone (None without a
        :attr:`listener`; ``{}`` if it does not answer). librdkafka sends a
        request to whichever broker it knows, the bootstrap's answer having
        named them all, and says which answered (``orig_broker_id``, or the
        bootstrap connection by name): only the node's own answer counts,
        asked again up to :data:`OWN_ASKS` times."""
        if self.listener is None:
            return None
        where = self.listener(node)
        for _ in range(OWN_ASKS):
            try:
                md = AdminClient({"bootstrap.servers": where, "log_level": 0,
                                  "socket.timeout.ms": 2000}).list_topics(timeout=2)
            except KafkaException:
                return {}
            if self.topo.name_of(md.orig_broker_id) == node or md.orig_broker_name == f"{where}/bootstrap":
                return self._isrs(md)
        return {}

    def _isrs(self, md: Any) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key in self._keys:
            topic, _, part = key.rpartition("-")
            t = md.topics.get(topic)
            p = t.partitions.get(int(part)) if t is not None else None
            if p is not None:
                out[key] = self._names(p.isrs)
        return out

    def active_controller(self) -> str | None:
        raise NotImplementedError

    def broker_epoch(self, node: str) -> int | None:
        raise NotImplementedError


class StatusObserver(MetadataObserver):
    """The reference nodes' Observer: the active controller and each broker's
    epoch from the nodes' own ``/status``."""

    def __init__(self, topo: Topology, bootstrap: Callable[[], str], keys: list[str], endpoints: ControlEndpoints,
                 live_nodes: Callable[[], list[str]]) -> None:
        super().__init__(topo, bootstrap, keys)
        self.endpoints, self.live_nodes = endpoints, live_nodes

    def broker_epoch(self, node: str) -> int | None:
        """The running incarnation's broker epoch (None: down, paused, not
        registered yet, or not answering)."""
        epoch = (self.endpoints.status(node) or {}).get("broker_epoch")
        return int(epoch) if epoch is not None else None

    def active_controller(self) -> str | None:
        """The quorum leader of the highest epoch a live node knows."""
        best: tuple[int, int] | None = None
        for n in self.live_nodes():
            raft = (self.endpoints.status(n) or {}).get("raft") or {}
            if raft.get("leader") is not None and raft.get("epoch") is not None:
                cand = (int(raft["epoch"]), int(raft["leader"]))
                best = cand if best is None or cand > best else best
        return self.topo.name_of(best[1]) if best else None
