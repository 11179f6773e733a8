"""Scripting scenarios: a small cluster, topics with chosen replica orders,
raw client requests, and taps on traces and messages.

The scenario tests (``tests/sim``) tell the seeds' narratives step by step:
"cut broker 1 from the leader", "wait until broker 2 leads", "power-loss broker
3". ``Scenario`` wraps a :class:`Simulation` with helpers that run the loop
until a reply or a condition arrives, so a test reads like the narrative.
"""

from __future__ import annotations

from typing import Any, Callable

from checkers.invariants import InvariantMonitor
from reference_impl.core.config import ProtocolConfig, Variants
from reference_impl.core.messages import (
    ClientFetchRequest,
    ClientFetchResponse,
    CreateTopicsRequest,
    Errors,
    FetchPartitionRequest,
    MetadataRequest,
    NewTopic,
    ProduceRequest,
    TopicPartition,
)

from .clients import Endpoint, sim_history
from .simulation import Simulation

#: short timeouts so that narratives play out in a few simulated seconds
SCENARIO_CONFIG = dict(
    replica_lag_time_max_ms=3000,
    broker_session_timeout_ms=3000,
    broker_heartbeat_interval_ms=300,
    replica_fetch_backoff_ms=100,
)


class OffsetView:
    """Each replica's log end offset and high watermark, ``(node, tp) ->
    offset``, as its own trace events report them (``append``, ``hw``,
    ``truncate``, ``loaded``): what the narratives assert on ("replica 2 at
    LEO 104"). A trace listener, so a run that does not look at them does not
    pay for them."""

    def __init__(self) -> None:
        self.leo: dict[tuple[Any, str], Any] = {}
        self.hw: dict[tuple[Any, str], Any] = {}

    def __call__(self, ev: dict[str, Any]) -> None:
        kind = ev.get("kind")
        if kind not in ("append", "hw", "truncate", "loaded"):
            return
        key = (ev.get("node"), str(ev.get("tp")))
        if kind == "append":
            self.leo[key] = ev.get("leo", -1)
        elif kind == "hw":
            self.hw[key] = ev.get("hw", -1)
            if "leo" in ev:
                self.leo[key] = ev["leo"]
        elif kind == "truncate":
            self.leo[key] = ev.get("to", -1)
        else:
            self.leo[key] = ev.get("leo", -1)
            self.hw[key] = ev.get("hw", -1)


class Scenario:
    def __init__(self, seed: int = 1, brokers: int = 3, controllers: int = 3, min_isr: int = 2,
                 variants: dict[str, bool] | None = None, **config: Any) -> None:
        props = dict(SCENARIO_CONFIG)
        props.update(config)
        props["min_insync_replicas"] = min_isr
        cfg = ProtocolConfig.from_properties(props, variants=Variants().with_overrides(variants or {}))
        self.min_isr = min_isr
        self.monitor = InvariantMonitor(seed=seed, min_isr=min_isr)
        self.sim = Simulation(seed, brokers, controllers, cfg, monitor=self.monitor)
        self.events: list[dict[str, Any]] = []
        self.sim.add_trace_listener(self.events.append)
        self.offsets = OffsetView()
        self.sim.add_trace_listener(self.offsets)
        self.client = Endpoint(self.sim, "script")
        self.messages: list[tuple[Any, Any, Any]] = []
        self.history = sim_history(self.sim)

    # -- plumbing -------------------------------------------------------------------------------------------
    def tap_messages(self, pred: Callable[[Any, Any, Any], bool]) -> list[tuple[Any, Any, Any]]:
        """Record every message (src, dst, msg) for which ``pred`` holds, as sent."""
        got: list[tuple[Any, Any, Any]] = []

        def tap(src: Any, dst: Any, msg: Any) -> None:
            if pred(src, dst, msg):
                got.append((src, dst, msg))

        self.sim.net.taps.append(tap)
        return got

    def wait(self, cond: Callable[[], bool], timeout_ms: int = 30_000, what: str = "condition") -> None:
        if not self.sim.wait_for(cond, timeout_ms):
            raise AssertionError(f"timed out after {timeout_ms} simulated ms waiting for {what} "
                                 f"(t={self.sim.now}, leaders={self.sim.leaders})")

    def request(self, node: int, make: Callable[[Any], Any], timeout_ms: int = 10_000) -> Any:
        """Send one client request and run until its reply (None on timeout)."""
        box: list[Any] = []
        self.client.request(node, make, box.append, timeout_ms)
        self.sim.wait_for(lambda: bool(box), timeout_ms + 1)
        return box[0] if box else None

    # -- cluster ---------------------------------------------------------------------------------------------
    def start(self, topic: str = "t", replicas: tuple[int, ...] = (1, 2, 3), partitions: int = 1,
              timeout_ms: int = 30_000) -> list[TopicPartition]:
        """Start every node and create ``topic`` with the given replica order
        (the first replica is the preferred, hence first, leader)."""
        sim = self.sim
        sim.start()
        self.wait(lambda: {e.get("broker") for e in self.events if e["kind"] == "broker_unfenced"} >= set(sim.broker_ids),
                  timeout_ms, "every broker registered and unfenced")
        nt = NewTopic(topic, partitions, len(replicas), configs=(("min.insync.replicas", str(self.min_isr)),),
                      assignments=tuple(replicas for _ in range(partitions)))
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        created: list[Any] = []

        def create() -> None:
            self.client.request(sim.broker_ids[0], lambda ref: CreateTopicsRequest(ref, (nt,)),
                                lambda m: created.append(m) if m is not None and all(
                                    r.error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS) for r in m.results)
                                else sim.loop.after(200, create), 5000)

        sim.at(sim.now + 100, create)
        self.wait(lambda: bool(created) and all(sim.leader_of(tp) == replicas[0] for tp in tps), timeout_ms,
                  "topic creation and first leader")
        # followers fetching and every replica in the ISR
        self.wait(lambda: all(set(self.isr_of(tp)) == set(replicas) for tp in tps), timeout_ms, "full ISR")
        return tps

    def isr_of(self, tp: TopicPartition | str) -> list[int]:
        """The ISR of the partition as the newest controller record says."""
        m = self.sim.partition_meta.get(str(tp))
        return list(m.get("isr", [])) if m else []

    def leader_isr(self, node: int, tp: TopicPartition | str) -> tuple[list[int], str] | None:
        """(ISR, state) from the newest ``isr`` event of ``node`` for ``tp``."""
        for e in reversed(self.events):
            if e["kind"] == "isr" and e["node"] == node and e.get("tp") == str(tp):
                return list(e["isr"]), e.get("state", "")
        return None

    def meta(self, tp: TopicPartition | str) -> dict[str, Any]:
        return dict(self.sim.partition_meta.get(str(tp)) or {})

    def leo(self, node: int, tp: TopicPartition | str) -> int:
        return self.offsets.leo.get((node, str(tp)), -1)

    def hw(self, node: int, tp: TopicPartition | str) -> int:
        return self.offsets.hw.get((node, str(tp)), -1)

    def isolate(self, node: int, from_: list[Any] | None = None) -> set[tuple[Any, Any]]:
        others = from_ if from_ is not None else [n for n in self.sim.node_ids if n != node]
        pairs = {(node, o) for o in others} | {(o, node) for o in others}
        self.sim.cut(pairs)
        return pairs

    # -- clients -----------------------------------------------------------------------------------------------
    def produce(self, node: int, tp: TopicPartition, values: list[int], acks: int = -1,
                timeout_ms: int = 5000) -> Any:
        """One ProduceRequest (one batch of ``values``) straight to ``node``."""
        return self.request(node, lambda ref: ProduceRequest(ref, tp, acks, len(values), tuple(values),
                                                             timeout_ms=timeout_ms), timeout_ms + 1000)

    def produce_async(self, node: int, tp: TopicPartition, values: list[int], acks: int = -1,
                      timeout_ms: int = 5000) -> list[Any]:
        box: list[Any] = []
        self.client.request(node, lambda ref: ProduceRequest(ref, tp, acks, len(values), tuple(values),
                                                             timeout_ms=timeout_ms), box.append, timeout_ms + 1000)
        return box

    def produce_to_leader(self, tp: TopicPartition, value: int, acks: int = -1, timeout_ms: int = 20_000) -> tuple[str, Any]:
        """Like a producer: follow the leader and retry retriable errors until
        ok or the deadline. Returns ("ok", offset) or ("error", last error)."""
        deadline = self.sim.now + timeout_ms
        last: Any = None
        while self.sim.now < deadline:
            leader = self.sim.leader_of(tp)
            if leader < 0 or not self.sim.is_up(leader):
                self.sim.run_for(100)
                continue
            r = self.produce(leader, tp, [value], acks, timeout_ms=3000)
            if r is not None and r.error == Errors.NONE:
                return "ok", r.base_offset
            last = r.error if r is not None else "timeout"
            self.sim.run_for(100)
        return "error", last

    def read_all(self, tp: TopicPartition, timeout_ms: int = 20_000) -> dict[int, Any]:
        """Read the partition from offset 0 up to its HW through the current leader."""
        out: dict[int, Any] = {}
        pos = 0
        deadline = self.sim.now + timeout_ms
        idle = 0
        while self.sim.now < deadline and idle < 3:
            leader = self.sim.leader_of(tp)
            if leader < 0 or not self.sim.is_up(leader):
                self.sim.run_for(100)
                continue
            r = self.request(leader, lambda ref: ClientFetchRequest(ref, (FetchPartitionRequest(tp, pos),), max_wait_ms=50))
            if not isinstance(r, ClientFetchResponse):
                self.sim.run_for(100)
                continue
            pr = r.partitions[0]
            if pr.error != Errors.NONE or not pr.batches:
                idle += 1 if pr.error == Errors.NONE else 0
                self.sim.run_for(100)
                continue
            idle = 0
            for b in pr.batches:
                for i in range(b.count):
                    if b.base_offset + i >= pos:
                        out[b.base_offset + i] = b.payload[i] if b.payload is not None else None
                pos = max(pos, b.next_offset)
        return out

    def metadata(self, node: int | None = None) -> Any:
        return self.request(node or self.sim.broker_ids[0], lambda ref: MetadataRequest(ref, None))

    def kinds(self) -> dict[str, int]:
        return dict(self.monitor.counts)

    def trace(self, kind: str, node: int | None = None, **match: Any) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind and (node is None or e["node"] == node)
                and all(str(e.get(k)) == str(v) for k, v in match.items())]
