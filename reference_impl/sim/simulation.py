"""The simulation: event loop, network, hosts, traces and the scripting API.

Everything random draws from one ``random.Random(seed)`` (network latency,
nemesis choices, client choices; each node incarnation gets its own rng seeded
from it), and every event goes through one heap ordered by (time, seq). Given a
seed and options, a run is therefore a pure function: the same history, the
same traces, byte for byte.

The scripting API (``at``, ``run_until``, ``run_for``, ``wait_for``, ``cut``,
``heal``, ``kill``, ``restart``, ``power_loss``, ``pause``, ``resume``,
``bump_clock``, ``shutdown``) is what the scenario tests in ``tests/sim`` use to
place faults at given times on given nodes; the nemesis schedules use the same
calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Final, Iterable

from checkers.invariants import InvariantMonitor
from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import AppendTrace, HwTrace, ProduceTrace
from reference_impl.core.messages import BrokerEndpoint, TopicPartition
from reference_impl.trace_format import encode_trace_line, stamp

from .disk import Disk
from .events import EventLoop
from .env import NodeEnv, TraceSink
from .host import DOWN, PAUSED, UP, Host
from .network import Endpoint, LinkProfile, Network

CONTROLLER_BASE: Final = 100


def node_name(nid: int) -> str:
    """The contract's name of node ``nid`` (``n1`` a broker, ``c1`` a
    controller): fault records, trace directories and real runs use it."""
    return f"c{nid - CONTROLLER_BASE}" if nid > CONTROLLER_BASE else f"n{nid}"
_RESERVED: Final = frozenset({"t", "seq", "node", "kind"})


@dataclass
class NodeCrash:
    node: int
    t: int
    error: str
    traceback: str


class Simulation(TraceSink):
    def __init__(
        self,
        seed: int,
        brokers: int = 3,
        controllers: int = 3,
        config: ProtocolConfig | None = None,
        link: LinkProfile | None = None,
        trace_dir: str | Path | None = None,
        monitor: InvariantMonitor | None = None,
        clock_drift: float = 0.0,
        max_clock_offset_ms: int = 0,
        start_delay_ms: int = 0,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.loop = EventLoop()
        self.config = config or ProtocolConfig()
        self.net = Network(self.loop, self.rng, link, request_timeout_ms=self.config.request_timeout_ms,
                           wall=self._wall_of, heartbeat_interval_ms=self.config.broker_heartbeat_interval_ms)
        self.broker_ids = tuple(range(1, brokers + 1))
        self.controller_ids = tuple(CONTROLLER_BASE + i for i in range(1, controllers + 1))
        self.voters = self.controller_ids
        self.hosts: dict[int, Host] = {}
        for nid in self.broker_ids:
            self.hosts[nid] = Host(frozenset({"broker"}), self._env(nid))
        for nid in self.controller_ids:
            self.hosts[nid] = Host(frozenset({"controller"}), self._env(nid))
        for nid, h in self.hosts.items():
            if clock_drift:
                h.clock.drift = self.rng.uniform(-clock_drift, clock_drift)
            if max_clock_offset_ms:
                h.clock.offset_ms = self.rng.randint(-max_clock_offset_ms, max_clock_offset_ms)
            self.net.attach(nid, h)
            self.net.keeps(nid, h.client_closed)
        self.monitor = monitor
        #: how long a restarted process takes to come up (a JVM's start on a
        #: real host is seconds: the differential campaign measured 5-12 s)
        self.start_delay_ms = start_delay_ms
        self._starting: set[int] = set()
        self.crashes: list[NodeCrash] = []
        #: trace events by kind (see :attr:`trace_counts`): the three the core
        #: emits most (~90% of a seed's) counted in plain ints, the rest by name
        self._appends = 0
        self._hws = 0
        self._produces = 0
        self._other_counts: dict[str, int] = {}
        self._trace_seq = 0
        #: the loop's time as an object, made once per millisecond for the
        #: monitor's typed events (:meth:`_t`): compiled, passing the int
        #: boxed it again for each of the millisecond's events
        self._t_int = -1
        self._t_obj: object = -1
        self._trace_dir = Path(trace_dir) if trace_dir is not None else None
        self._trace_files: dict[int, Any] = {}
        self._trace_listeners: list[Callable[[dict[str, Any]], None]] = []
        # what the glass box says: leaders per partition, the active controller
        # (each replica's LEO and HW, which only scenarios read, is their own
        # trace listener: script.OffsetView)
        self.leaders: dict[str, tuple[int, int]] = {}  # tp -> (leader_epoch, node)
        self.controller_leader: tuple[int, int] = (-1, -1)  # (raft epoch, node)
        self.partition_meta: dict[str, dict[str, Any]] = {}

    def _env(self, nid: int) -> NodeEnv:
        """What node ``nid``'s machine sees: the loop, the network, its
        settings, the rng that seeds its incarnations, and this simulation
        as the sink of its traces (and nothing else of it)."""
        return NodeEnv(nid, self.loop, self.net, self.config, self.voters, self.rng, self)

    def _wall_of(self, endpoint: Endpoint) -> int:
        """An endpoint's wall clock now: a node's (skewed by the clock
        nemesis), the loop's for a client (librdkafka times its requests on
        a monotonic clock)."""
        if isinstance(endpoint, int) and endpoint in self.hosts:
            return self.hosts[endpoint].now()
        return self.loop.now

    # -- identities ---------------------------------------------------------------
    @property
    def node_ids(self) -> tuple[int, ...]:
        return self.broker_ids + self.controller_ids

    def endpoint(self, nid: int) -> BrokerEndpoint:
        return BrokerEndpoint(nid, f"n{nid}.sim", 9092)

    def host(self, nid: int) -> Host:
        return self.hosts[nid]

    def node(self, nid: int) -> Any:
        """The live core ``Node`` object (None while down), for white-box asserts."""
        return self.hosts[nid].node

    # -- time -------------------------------------------------------------------------
    @property
    def now(self) -> int:
        return self.loop.now

    def at(self, t: int, fn: Callable[..., Any], *args: Any) -> None:
        self.loop.at(t, fn, *args)

    def run_until(self, t: int, stop: Callable[[], bool] | None = None) -> None:
        self.loop.run_until(t, stop)

    def run_for(self, ms: int) -> None:
        self.loop.run_until(self.loop.now + ms)

    def wait_for(self, cond: Callable[[], bool], timeout_ms: int) -> bool:
        """Run until ``cond()`` holds (checked after every event) or the timeout."""
        if cond():
            return True
        self.loop.run_until(self.loop.now + timeout_ms, cond)
        return cond()

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        for nid in self.controller_ids + self.broker_ids:
            self.hosts[nid].start("start")

    def is_up(self, nid: int) -> bool:
        return self.hosts[nid].state == UP

    def kill(self, nid: int) -> None:
        h = self.hosts[nid]
        if h.state != DOWN:
            h.kill()
            self.trace(nid, "node_stop", {"reason": "kill"})
            self._forget_leaderships(nid)

    def _forget_leaderships(self, nid: int) -> None:
        for tp, (ep, n) in list(self.leaders.items()):
            if n == nid:
                self.leaders[tp] = (ep, -1)

    def power_loss(self, nid: int) -> dict[str, int]:
        h = self.hosts[nid]
        lost = h.power_loss()
        self._forget_leaderships(nid)
        self.trace(nid, "node_stop", {"reason": "power-loss", "lost_entries": sum(lost.values())})
        return lost

    def restart(self, nid: int) -> None:
        """Start a dead node's process again: at once, or ``start_delay_ms``
        later (down meanwhile, as a process that is still starting serves
        nothing; a second restart meanwhile changes nothing)."""
        h = self.hosts[nid]
        if h.state != DOWN or nid in self._starting:
            return
        if self.start_delay_ms <= 0:
            h.start("restart")
            return
        self._starting.add(nid)
        self.loop.after(self.start_delay_ms, self._started, nid)

    def _started(self, nid: int) -> None:
        self._starting.discard(nid)
        if self.hosts[nid].state == DOWN:
            self.hosts[nid].start("restart")

    def pause(self, nid: int) -> None:
        self.hosts[nid].pause()

    def resume(self, nid: int) -> None:
        self.hosts[nid].resume()

    def shutdown(self, nid: int) -> None:
        """Controlled shutdown (SIGTERM): the node ends with Halt."""
        self.hosts[nid].controlled_shutdown()

    def bump_clock(self, nid: int, delta_ms: int) -> None:
        h = self.hosts[nid]
        h.clock.offset_ms += delta_ms
        if h.state == UP:
            self.loop.at(self.loop.now, h.on_timer, h.incarnation, -1)

    def set_clock(self, nid: int, offset_ms: int) -> None:
        self.bump_clock(nid, offset_ms - self.hosts[nid].clock.offset_ms)

    # -- network -------------------------------------------------------------------------
    def cut(self, pairs: Iterable[tuple[Endpoint, Endpoint]]) -> None:
        self.net.cut(pairs)

    def heal(self) -> None:
        self.net.heal()

    def heal_everything(self) -> None:
        """The final phase: heal the network, resume, reset clocks, restart the dead."""
        self.net.heal()
        for nid, h in self.hosts.items():
            if h.state == PAUSED:
                h.resume()
            if h.clock.offset_ms:
                self.set_clock(nid, 0)
        for nid, h in self.hosts.items():
            if h.state == DOWN:
                h.start("restart")

    # -- glass box -------------------------------------------------------------------------
    def add_trace_listener(self, fn: Callable[[dict[str, Any]], None]) -> None:
        self._trace_listeners.append(fn)

    @property
    def trace_counts(self) -> dict[str, int]:
        """How many trace events of each kind the nodes emitted so far."""
        counts = dict(self._other_counts)
        for kind, n in (("append", self._appends), ("hw", self._hws), ("produce", self._produces)):
            if n:
                counts[kind] = n
        return counts

    def trace(self, nid: int, kind: str, data: dict[str, Any]) -> None:
        """Hand a node's trace event to the trackers, the invariant monitor,
        the listeners and the node's trace file. ``data`` becomes the event,
        so the caller gives it up: appends, HWs and produces go unstamped
        (node and time given apart) when no listener wants a stamped dict;
        any other event is stamped in place (a second dict and a merge per
        event were ~3% of a seed)."""
        # seq: the simulation's total order, so traces re-read from the node
        # files merge exactly as the monitor saw them live (many events share
        # a virtual millisecond)
        self._trace_seq += 1
        seq = self._trace_seq
        now = self.loop.now
        # counted without a dict update for the three frequent kinds (one
        # lookup and one store per event were ~0.7% of a seed's loop)
        if kind == "append":
            self._appends += 1
            hot = True
        elif kind == "hw":
            self._hws += 1
            hot = True
        elif kind == "produce":
            self._produces += 1
            hot = True
        else:
            counts = self._other_counts
            counts[kind] = counts.get(kind, 0) + 1
            hot = False
        if hot and not self._trace_listeners:
            # The core's most frequent events (~90% of a seed's), whose data
            # never holds a stamp key and which no tracker follows: with no
            # listener to hand a stamped dict to, they go unstamped to the
            # monitor and the trace file (stamping each dict in place, four
            # inserts and a resize, was ~3% of a seed). What either sees is
            # what the stamped event gave it; a test compares the two paths.
            ev = data
            monitor = self.monitor
            if monitor is not None:
                monitor.observe_data(nid, now, kind, data)
        else:
            # the hot path of stamp(), inline: _RESERVED's four keys, one
            # compiled lookup each (frozenset.isdisjoint, a generic method
            # call, was ~2% of a seed)
            if "kind" not in data and "t" not in data and "seq" not in data and "node" not in data:
                # stamped in place: the event's data is the runtime's once applied
                ev = data
                ev["t"] = now
                ev["seq"] = seq
                ev["node"] = nid
                ev["kind"] = kind
            else:
                ev = {"t": now, "seq": seq, "node": nid, "kind": kind}
                stamp(ev, data, _RESERVED)
            track = _TRACKERS.get(kind)
            if track is not None:
                track(self, nid, ev)
            monitor = self.monitor
            if monitor is not None:
                monitor.observe(ev)
            for fn in self._trace_listeners:
                fn(ev)
        if self._trace_dir is not None:
            self._write(nid, now, seq, kind, ev)

    def _write(self, nid: int, now: int, seq: int, kind: str, ev: dict[str, Any]) -> None:
        # the stamps first, as the real runtime writes them (a stamped
        # event's own copies of them come out in the same places)
        self._trace_file(nid).write(encode_trace_line({"t": now, "seq": seq, "node": nid, "kind": kind, **ev}))

    # The typed hot events (effects.AppendTrace, ~90% of a seed's): with no
    # listener, the monitor reads their fields and their data dict is built
    # only for a trace file; with one, they are any other event (trace).
    # Either way the same seq, counts, monitor steps and trace lines.
    def _t(self, now: int) -> object:
        """``now`` boxed, the same object for every event of one millisecond."""
        if now != self._t_int:
            self._t_int = now
            self._t_obj = now
        return self._t_obj

    def trace_append(self, nid: Any, ev: AppendTrace) -> None:
        if self._trace_listeners:
            self.trace(nid, "append", ev.data)
            return
        self._trace_seq += 1
        self._appends += 1
        now = self.loop.now
        monitor = self.monitor
        if monitor is not None:
            # _t(now), inline: a call per event
            if now != self._t_int:
                self._t_int = now
                self._t_obj = now
            monitor.observe_append(nid, self._t_obj, ev.tp, ev.base, ev.count, ev.epoch,
                                   None if ev.one_run else ev.epochs, ev.leo)
        if self._trace_dir is not None:
            self._write(nid, now, self._trace_seq, "append", ev.data)

    def trace_hw(self, nid: Any, ev: HwTrace) -> None:
        if self._trace_listeners:
            self.trace(nid, "hw", ev.data)
            return
        self._trace_seq += 1
        self._hws += 1
        now = self.loop.now
        monitor = self.monitor
        if monitor is not None:
            if now != self._t_int:  # _t(now), inline
                self._t_int = now
                self._t_obj = now
            monitor.observe_hw(nid, self._t_obj, ev.tp, ev.hw, ev.leo, ev.role)
        if self._trace_dir is not None:
            self._write(nid, now, self._trace_seq, "hw", ev.data)

    def trace_produce(self, nid: Any, ev: ProduceTrace) -> None:
        if self._trace_listeners:
            self.trace(nid, "produce", ev.data)
            return
        self._trace_seq += 1
        self._produces += 1
        monitor = self.monitor
        if monitor is not None:
            monitor.observe_produce()
        if self._trace_dir is not None:
            self._write(nid, self.loop.now, self._trace_seq, "produce", ev.data)

    def _trace_file(self, nid: int) -> Any:
        """Node ``nid``'s trace.jsonl under the trace directory, opened on
        first use: ``<trace dir>/<node name>/`` (``n1``, ``c1``: the names
        fault records and real runs use)."""
        f = self._trace_files.get(nid)
        if f is None:
            assert self._trace_dir is not None
            d = self._trace_dir / node_name(nid)
            d.mkdir(parents=True, exist_ok=True)
            f = self._trace_files[nid] = open(d / "trace.jsonl", "wb")
        return f

    # the glass-box trackers, one per event kind that moves what the sim shows
    def _track_become_leader(self, nid: int, ev: dict[str, Any]) -> None:
        tp = str(ev.get("tp"))
        cur = self.leaders.get(tp)
        ep = ev.get("leader_epoch", -1)
        if cur is None or ep >= cur[0]:
            self.leaders[tp] = (ep, nid)

    def _track_become_follower(self, nid: int, ev: dict[str, Any]) -> None:
        # only a broker's own become_leader names a leader; a leader that
        # turns follower leaves the partition leaderless until then
        tp = str(ev.get("tp"))
        cur = self.leaders.get(tp)
        ep = ev.get("leader_epoch", -1)
        if cur is not None and cur[1] == nid and ep >= cur[0]:
            self.leaders[tp] = (ep, -1)

    def _track_raft_state(self, nid: int, ev: dict[str, Any]) -> None:
        if ev.get("role") == "leader":
            ep = ev.get("epoch", -1)
            if ep >= self.controller_leader[0]:
                self.controller_leader = (ep, nid)

    def _track_partition_metadata(self, nid: int, ev: dict[str, Any]) -> None:
        self.partition_meta[str(ev.get("tp"))] = ev

    def leader_of(self, tp: TopicPartition | str) -> int:
        """The latest leader the brokers announced (-1 if none known)."""
        cur = self.leaders.get(str(tp))
        if cur is None:
            return -1
        nid = cur[1]
        return nid if nid is not None else -1

    def active_controller(self) -> int:
        return self.controller_leader[1]

    def node_crashed(self, nid: int, error: str, tb: str) -> None:
        self.crashes.append(NodeCrash(nid, self.loop.now, error, tb))
        self.trace(nid, "node_crash", {"error": error})

    def close(self) -> None:
        for f in self._trace_files.values():
            f.close()
        self._trace_files = {}

    def release(self) -> None:
        """Let go of a finished run's state: pending events, the nodes and
        their disks. The hosts, the clients and the loop's pending events
        point at each other, so what hangs off them (logs, page caches) would
        otherwise wait for a pass of the cyclic collector; dropped here,
        reference counting frees it at once. The simulation cannot run on."""
        self.loop.clear()
        self._trace_listeners = []
        for h in self.hosts.values():
            h.node = None
            h.disk = Disk()


#: the tracker per event kind (appends and HWs, most events, have none)
_TRACKERS: dict[str, Callable[[Simulation, int, dict[str, Any]], None]] = {
    "become_leader": Simulation._track_become_leader,
    "become_follower": Simulation._track_become_follower,
    "raft_state": Simulation._track_raft_state,
    "partition_metadata": Simulation._track_partition_metadata,
}
