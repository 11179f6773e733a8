"""The ``sim`` backend: one seed of a test in the deterministic simulator.

The simulator (``reference_impl.sim``) brings what is its own: virtual time,
the simulated network and disks, simulated clients (the workload's client
protocol with librdkafka's outcome rules), and the cluster contract over
them (``reference_impl.sim.control.SimCluster``). The harness brings the
rest, as for real processes: the test configuration, the nemesis (the same
fault vocabulary and schedule, ``nemesis``, driven here in virtual time by
:class:`VirtualNemesis`), the checkers and the run directory.

The history holds virtual time only, so a seed replays byte for byte.
"""

from __future__ import annotations

import dataclasses
import gc
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import generator as g
from checkers.availability import FinalState, LivenessBound, check_availability, facts_of, liveness_bound, \
    merge_availability, read_timeline
from checkers.invariants import InvariantMonitor
from harness.config import TestConfig
from nemesis import Nemesis, replay
from nemesis.stories import step_ops
from reference_impl import accel
from reference_impl.core.config import ProtocolConfig, Variants
from reference_impl.core.messages import NewTopic, TopicPartition
from reference_impl.sim.clients import Admin, Arrivals, ClientConfig, Consumer, GroupMember, Workload, sim_history
from reference_impl.sim.control import SimCluster
from reference_impl.sim.inspect import cluster_state
from reference_impl.sim.network import LinkProfile
from reference_impl.sim.simulation import Simulation

#: Kafka's defaults except for timeouts shortened so that faults play out
#: within a minute of simulated time (``protocol`` settings override them)
SIM_TIMINGS: dict[str, Any] = {
    "replica_lag_time_max_ms": 5000,
    "broker_session_timeout_ms": 4000,
    "broker_heartbeat_interval_ms": 500,
    "replica_fetch_backoff_ms": 200,
}


#: the group coordinator as db reference runs it (harness/dbs/reference/db.py),
#: for runs whose consumers are in a group
SIM_GROUPS: dict[str, Any] = {
    "group_initial_rebalance_delay_ms": 0,
    "offsets_topic_num_partitions": 1,
}


def protocol_config(cfg: TestConfig) -> ProtocolConfig:
    groups = {**SIM_GROUPS, "offsets_topic_replication_factor": min(3, cfg.brokers)} \
        if cfg.sub_via == "subscribe" else {}
    props = {**SIM_TIMINGS, **groups, **cfg.protocol}
    props.setdefault("min_insync_replicas", cfg.min_isr)
    props.setdefault("default_replication_factor", cfg.rf)
    return ProtocolConfig.from_properties(props, variants=Variants().with_overrides(dict(cfg.variants)))


def sim_bound(pc: ProtocolConfig, client: ClientConfig) -> LivenessBound:
    """The liveness bound of a simulated run (``checkers.availability.bound``):
    its protocol timings, no process start time, the simulated producers'
    metadata backoff and request timeout."""
    return liveness_bound({f.name: getattr(pc, f.name) for f in dataclasses.fields(pc) if f.name.endswith("_ms")},
                          start_ms=0,
                          client_refresh_ms=client.metadata_backoff_ms,
                          client_request_timeout_ms=client.request_timeout_ms)


def sim_rules(pc: ProtocolConfig) -> dict[str, Any]:
    """The election rules the simulated controllers follow (for a cause)."""
    return {"unclean_election": pc.unclean_allowed(), "elr": pc.elr_enabled(),
            "recovery_strategy": pc.recovery_strategy_for()}


class VirtualNemesis:
    """The nemesis thread of the interpreter, in virtual time: asks the
    nemesis generator for its next op, waits (an event at the op's time, or
    after a sleep) and invokes it, recording the invocation and the
    completion as a real run does (both ``info``, the completion's value
    holding what the fault did)."""

    def __init__(self, sim: Simulation, gen: g.Gen, invoke: Callable[[dict[str, Any]], dict[str, Any]],
                 record: Callable[..., None], rng: random.Random, t0: int, end: int | None) -> None:
        self.sim, self.gen, self.invoke, self.record = sim, gen, invoke, record
        self.rng, self.t0, self.end = rng, t0, end
        self.done = False

    def _ctx(self) -> g.Context:
        return g.Context(time=(self.sim.now - self.t0) * 1_000_000, rng=self.rng, free=frozenset({"nemesis"}),
                         process_of={"nemesis": "nemesis"}, threads=frozenset({"nemesis"}))

    def step(self) -> None:
        if self.done or (self.end is not None and self.sim.now >= self.end):
            self.done = True
            return
        r = self.gen.op(self._ctx()) if self.gen is not None else None
        if r is None or r[0] == g.PENDING:
            self.done = True  # alone on its thread, a pending nemesis waits for nothing
            return
        op, gen2 = r
        at = self.t0 + -(-op["time"] // 1_000_000)
        if at > self.sim.now:
            self.sim.at(at, self.step)
            return
        self.gen = gen2
        if op.get("_sleep"):
            self.sim.at(self.sim.now + int(op["_sleep"]) // 1_000_000, self.step)
            return
        self.play(op)
        self.step()

    def play(self, op: dict[str, Any]) -> None:
        inv = {k: v for k, v in op.items() if k not in ("time", "process", "f", "value") and k[:1] != "_"}
        self.record("nemesis", "info", op["f"], op.get("value"), **inv)
        res = self.invoke(op)
        self.record("nemesis", "info", op["f"], res.get("value"), **inv)
        self.gen = self.gen.update(self._ctx(), {**op, "type": "info"}) if self.gen is not None else None

    def run_to_end(self) -> None:
        """Play the (finite) generator to its end at once (the final heal)."""
        while True:
            r = self.gen.op(self._ctx()) if self.gen is not None else None
            if r is None or r[0] == g.PENDING:
                return
            op, self.gen = r
            if not op.get("_sleep"):
                self.play(op)


class Probes:
    """The final phase's probe writes in the simulator (as real runs'
    ``workloads.queue.Probes``): one acks=all writer per partition sends from
    the heal on, again :data:`PROBE_PAUSE_MS` after a send that failed,
    until one is acknowledged or the liveness bound ran out. A send is
    retried inside the producer until its delivery timeout, so the first
    acknowledgement's time is when the partition took writes again."""

    def __init__(self, sim: Simulation, wl: Workload, tps: list[TopicPartition], bound_ms: int,
                 idempotent: bool = False) -> None:
        self.sim, self.wl = sim, wl
        self.deadline = sim.now + bound_ms
        self.writers = {tp: wl.add_probe_writer(idempotent) for tp in tps}
        self.pausing: set[TopicPartition] = set()
        for tp in tps:
            self._send(tp)

    def _send(self, tp: TopicPartition) -> None:
        self.pausing.discard(tp)
        if self.sim.now < self.deadline and not self.wl.stopped:
            self.writers[tp].send(tp, self.wl.value(), done=lambda type_, _res, tp=tp: self._done(tp, type_))

    def _done(self, tp: TopicPartition, type_: str) -> None:
        if type_ != "ok":
            self.pausing.add(tp)
            self.sim.loop.after(PROBE_PAUSE_MS, self._send, tp)

    def finished(self) -> bool:
        return not self.pausing and not any(w.busy for w in self.writers.values())


#: pause between a failed probe write and the next (workloads.queue.PROBE_PAUSE_S)
PROBE_PAUSE_MS = 250


@dataclass
class SimRun:
    """The pieces of one simulated test, built and wired; :meth:`run` plays it."""

    cfg: TestConfig
    seed: int
    run_dir: Path | None = None
    client_config: ClientConfig = field(default_factory=ClientConfig)
    #: called with this run right after the final heal (tests make a fault
    #: there that the heal does not undo, e.g. pause the controllers)
    after_heal: Callable[["SimRun"], None] | None = None

    def __post_init__(self) -> None:
        o = self.cfg
        self.monitor = InvariantMonitor(seed=self.seed, min_isr=o.min_isr)
        self.sim = Simulation(
            self.seed, o.brokers, o.controllers, protocol_config(o),
            link=LinkProfile(o.link_latency_ms, o.link_jitter_ms),
            trace_dir=(self.run_dir / "nodes") if self.run_dir else None,
            monitor=self.monitor, clock_drift=o.clock_drift,
        )
        self.history = sim_history(self.sim, self.run_dir / "history.jsonl" if self.run_dir else None)
        self.tps = [TopicPartition(t, p) for t in o.topic_names() for p in range(o.partitions)]
        if o.retries is not None:  # the simulator's producers retry as librdkafka's, by default without end
            self.client_config = dataclasses.replace(self.client_config, retries=o.retries)
        self.wl = Workload(self.sim, self.history, self.tps, self.client_config)
        for i in range(o.concurrency):
            acks = o.acks_for_thread(i)
            self.wl.add_producer(acks, idempotent=o.idempotent_for_thread(i))
        for _ in range(o.consumers):
            if o.sub_via == "subscribe":  # one group, as the real workload's (kraftwerk-<name>-<seed>)
                self.wl.add_group_member(f"kraftwerk-{o.name}-{self.seed}", static=o.static_members)
            else:
                self.wl.add_consumer()
        self.cluster = SimCluster(self.sim, [str(tp) for tp in self.tps],
                                  lambda: [c.ep.name for c in self.wl.producers + self.wl.consumers],
                                  net_cut=o.net_cut)
        self.nemesis: Nemesis | None = None
        self.faults = 0
        if o.has_nemesis():
            rng = random.Random(self.sim.rng.getrandbits(64))
            self.nemesis = Nemesis(o.nemesis_plan(self.sim.config), self.cluster, rng, record=self._record_step)
        self.setup_ok = False
        self.generating = False
        self.arrivals = Arrivals(self.sim, self.wl.producers, o.rate)
        self.final_readers: list[Consumer] = []
        self.t0 = 0
        #: what the nemesis did (``nemesis.replay``), for test.json
        self.schedule: list[dict[str, Any]] = []
        self.t_end = 0
        self.bound = sim_bound(self.sim.config, self.client_config)
        #: the cluster's state when the bound after the heal ran out (the
        #: cause of a partition still unavailable), else at the end
        self.state: dict[str, Any] | None = None

    # -- phases ----------------------------------------------------------------------------------------
    def setup(self) -> bool:
        """Start the nodes, create the topics, wait for every partition to have a live leader."""
        o, sim = self.cfg, self.sim
        sim.start()
        admin = Admin(sim)
        topics = tuple(NewTopic(t, o.partitions, o.rf, configs=(("min.insync.replicas", str(o.min_isr)),))
                       for t in o.topic_names())
        sim.at(sim.now + 100, admin.create_topics, topics)

        def ready() -> bool:
            return admin.created and all(sim.leader_of(tp) in sim.hosts and sim.is_up(sim.leader_of(tp)) for tp in self.tps)

        self.setup_ok = sim.wait_for(ready, int(o.setup_timeout * 1000))
        return self.setup_ok

    def start_workload(self) -> None:
        o, sim = self.cfg, self.sim
        self.t0 = sim.now
        self.t_end = self.t0 + int(o.time_limit * 1000)
        self.generating = True
        if o.crash_clients:  # Jepsen's pace: each client about once per interval
            period = max(1, int(o.crash_client_interval * 1000 / (o.concurrency + len(self.wl.consumers))))
            self.wl.crash_period_ms, self.wl.next_crash_at = period, self.t0 + period
        for c in self.wl.consumers:
            if isinstance(c, GroupMember):
                c.start()
        self.arrivals.start()
        for c in self.wl.consumers:
            sim.at(self.t0 + sim.rng.randint(0, self.client_config.poll_interval_ms), self._consumer_loop, c)
        if self.nemesis is not None:
            rng = random.Random(sim.rng.getrandbits(64))
            end = None if o.scenario else self.t_end
            self.driver = VirtualNemesis(sim, self.nemesis.schedule(), self._invoke, self.wl.record, rng, self.t0, end)
            sim.at(self.t0, self.driver.step)
        sim.at(self.t_end, self._stop_generating)

    def _record_step(self, f: str, value: dict[str, Any]) -> None:
        """A story's follow-up step, recorded at the virtual moment it acts
        (``nemesis.stories.step_ops``, as on real hosts)."""
        for v in step_ops(value):
            self.wl.record("nemesis", "info", f, v)

    def _invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        assert self.nemesis is not None
        if op["f"].startswith("start-"):
            self.faults += 1
        return self.nemesis.invoke(op)

    def _consumer_loop(self, c: Consumer) -> None:
        if not self.generating:
            return
        c.poll(done=lambda _got: self.sim.loop.after(self.client_config.poll_interval_ms, self._consumer_loop, c))

    def _stop_generating(self) -> None:
        self.generating = False
        self.arrivals.stop()

    def final_phase(self) -> None:
        """Heal everything, restart the dead, wait, then final reads per key."""
        o, sim = self.cfg, self.sim
        if self.nemesis is not None:
            self.driver.gen = None
            final = VirtualNemesis(sim, self.nemesis.final(), self.nemesis.invoke, self.wl.record, self.driver.rng,
                                   self.t0, None)
            final.run_to_end()
            sim.heal_everything()  # belt and braces, as a real run's heal_all
        probes = self._start_probes()
        if self.nemesis is not None:
            sim.run_for(int(self.nemesis.recovery_seconds() * 1000))
            if self.cluster.nodes.dead_nodes():
                # a controlled shutdown begun under the faults may complete
                # only once they heal: the node halts after the heal, and is
                # started again as an operator would
                sim.heal_everything()
                sim.run_for(int(self.nemesis.recovery_seconds() * 1000))
        # phases synchronise, as the interpreter's do: the final reads begin
        # once every operation in flight has completed (a send retried
        # through the faults may be acknowledged up to its delivery timeout)
        clients = self.wl.producers + self.wl.consumers
        sim.wait_for(lambda: not any(c.busy for c in clients), self.client_config.delivery_timeout_ms
                     + self.client_config.request_timeout_ms)
        sim.wait_for(probes.finished, self.bound.total_ms + self.client_config.delivery_timeout_ms)
        deadline = int(o.final_read_timeout * 1000)
        for tp in self.tps:
            r = self.wl.add_final_reader()
            self.final_readers.append(r)
            r.poll(tps=[tp], final=True, from_start=True, until=dict(self.wl.max_acked), deadline_ms=deadline)
        sim.wait_for(lambda: not any(r.busy for r in self.final_readers), deadline + 2 * self.client_config.request_timeout_ms)
        if self.state is None:
            self._snapshot()
        self.wl.finish()

    def _start_probes(self) -> "Probes":
        """From the heal on: the test's fault after it, if any, then a probe
        writer per partition (:class:`Probes`) and the state's snapshot
        when the bound runs out."""
        if self.after_heal is not None:
            self.after_heal(self)
        probes = Probes(self.sim, self.wl, self.tps, self.bound.total_ms, idempotent=bool(self.cfg.idempotent))
        self.sim.at(self.sim.now + self.bound.total_ms, self._snapshot)
        return probes

    def _snapshot(self) -> None:
        self.state = cluster_state(self.sim, min_isr=self.cfg.min_isr, rules=sim_rules(self.sim.config),
                                   t_ns=self.sim.now * 1_000_000)

    def run(self, release: bool = False) -> dict[str, Any]:
        """Play the seed and return results.json (also written to the run
        directory, if any). With ``release`` the simulation is let go of
        once the results are taken (:meth:`release`): what a batch of seeds
        wants; without it the finished simulation stays for inspection.

        The cyclic collector is off for the whole run, not only inside the
        event loop: each time it came back between phases its first pass
        walked every object the run had made so far, and a released run
        leaves it little to find."""
        wall0 = time.perf_counter()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            try:
                if self.setup():
                    self.start_workload()
                    self.sim.run_until(self.t_end)
                    self.final_phase()
                else:
                    self.wl.finish()
            finally:
                # whatever stopped the run, what was recorded reaches the disk
                self.history.close()
                self.sim.close()
            results = self.results(time.perf_counter() - wall0)
            self.schedule = replay.schedule_of(self.history.ops, self.t0 * 1_000_000)
            if release:
                self.release()
        finally:
            if gc_was_enabled:
                gc.enable()
        return results

    def release(self) -> None:
        """Free the finished seed at once: its history's operations, the
        nodes, disks and pending events (:meth:`Simulation.release`). A
        finished simulation is one large reference cycle; left to the cyclic
        collector, a seed's garbage cost a pass over every operation and
        batch it made (1.1 s of collector time for four 60 s seeds run back
        to back, against 0.4 s for release and collector together). The
        results (and the run directory) are unaffected."""
        self.history.ops.clear()
        self.sim.release()

    # -- verdict -------------------------------------------------------------------------------------------
    def test_json(self) -> dict[str, Any]:
        """What the run directory's test.json says about the checking (the
        options ``kraftwerk check`` reads back: keys, strict_*, liveness and
        its bound)."""
        return {**self.cfg.model_copy(update={"seed": self.seed}).test_json(), "liveness_bound": self.bound.as_dict()}

    def availability(self, ops: list[Any]) -> dict[str, Any]:
        """The availability checker (``checkers.availability``) on the
        history, the traces (when the run has a directory) and the state
        the final phase saw."""
        timeline = read_timeline(self.run_dir) if self.run_dir is not None else None
        return check_availability(facts_of(ops), [str(tp) for tp in self.tps], bound=self.bound,
                                  timeline=timeline if timeline is not None and timeline.files else None,
                                  state=FinalState.from_dict(self.state) if self.state else None,
                                  policy=self.cfg.liveness)

    def results(self, wall_s: float) -> dict[str, Any]:
        """results.json: the checkers' verdict (:func:`checkers.check.check_history`,
        the call the real harness makes) with the invariant monitor merged in
        (:func:`checkers.check.merge_invariants`), plus the simulator's own
        statistics. A final read that stopped below a key's highest
        acknowledged offset says so in the history (``incomplete`` on the
        final poll), which :mod:`checkers.final_reads` reads; the simulator
        adds no verdict of its own."""
        from checkers.check import check_history

        ops = self.history.ops
        inv = self.monitor.summary()
        out = check_history(ops, model="queue", engine="inline", test=self.test_json(), invariants=inv)
        error = None if self.setup_ok else "set-up failed: not every partition had a live leader in time"
        if error:
            out["valid"] = False if out["valid"] is False else "unknown"
            out["error"] = error
        merge_availability(out, self.availability(ops))
        sim = self.sim
        # completions per function and type: the checkers' own count of the
        # same operations (stats.by_f), not a second pass over the history
        by_f = out.get("stats", {}).get("by_f") or {}
        counts = {f"{f}:{t}": n for f, types in by_f.items() for t, n in types.items()}
        fr = out.get("checkers", {}).get("final-reads") or {}
        out["stats"] = {
            **out.get("stats", {}),
            "history_sha256": self.history.digest(),
            "completions": dict(sorted(counts.items())),
            "virtual_ms": sim.now,
            "workload_ms": max(0, self.t_end - self.t0),
            "steps": sim.loop.steps,
            "wall_s": round(wall_s, 3),
            "sim_speed": round((sim.now / 1000.0) / wall_s, 1) if wall_s > 0 else None,
            # compiled (mypyc) or pure Python, and why: the same seed gives the
            # same history either way, only the speed differs
            "accelerator": accel.status(),
            "messages": {"sent": sim.net.sent, "delivered": sim.net.delivered, "dropped": sim.net.dropped},
            "faults": self.faults,
            "skipped_arrivals": self.arrivals.skipped,
            "final_read_incomplete": list(fr.get("incomplete_keys", [])),
            "trace_events": dict(sorted(sim.trace_counts.items())),
            "node_crashes": [{"node": c.node, "t": c.t, "error": c.error} for c in sim.crashes[:10]],
        }
        out = {"valid": out.pop("valid"), "seed": self.seed, **out}
        if sim.crashes:
            out["crash_tracebacks"] = [c.traceback for c in sim.crashes[:3]]
        return out
