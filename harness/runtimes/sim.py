"""The ``sim`` backend: one seed of a test in the deterministic simulator.

The simulator (``reference_impl.sim``) brings what is its own: virtual time,
the simulated network and disks, simulated clients (the queue workload's
client, one per worker thread, with librdkafka's outcome rules), and the
cluster contract over them (``reference_impl.sim.control.SimCluster``). The
harness brings the rest, as for real processes: the test configuration, the
generator (``harness.lifecycle.runner.build_generator``: the workload, its
rate, crashed clients, the nemesis schedule, the final heal, the recovery
sleep, the final reads), played on the simulator's event loop by the
virtual-time interpreter (``harness.lifecycle.virtual``), the checkers and
the run directory. This module builds and wires the simulator's side
(:class:`SimRun`); the lifecycle hands it the driver.

The history holds virtual time only, so a seed replays byte for byte.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from checkers.availability import FinalState, HistoryFacts, LivenessBound, check_availability, liveness_bound, \
    merge_availability, read_timeline
from checkers.availability.factpass import FactPass
from checkers.check import check_history
from checkers.history.op import Op
from checkers.invariants import InvariantMonitor
from checkers.queue.scan import scan_ops
from harness.config import TestConfig
from harness.config.placement import Placement, as_created, assignment
from harness.config.timings import sim_settings
from nemesis import replay
from nemesis.faults import clock_hold_ms
from nemesis.stories import step_ops
from reference_impl import accel
from reference_impl.core.config import ProtocolConfig, Variants
from reference_impl.core.controller.replication_control import round_robin
from reference_impl.core.messages import NewTopic, TopicPartition
from reference_impl.sim.clients import Admin, ClientConfig, ClientSettings, SimClient, Workload, sim_history
from reference_impl.sim.control import SimCluster
from reference_impl.sim.inspect import cluster_state
from reference_impl.sim.network import LinkProfile
from reference_impl.sim.simulation import Simulation

def protocol_config(cfg: TestConfig) -> ProtocolConfig:
    props = {**sim_settings(cfg.brokers), **cfg.protocol}
    props.setdefault("min_insync_replicas", cfg.min_isr)
    props.setdefault("default_replication_factor", cfg.rf)
    if cfg.flush_messages:  # --flush-messages, as the nodes on real processes take it (log.flush.interval.messages)
        props.setdefault("log_flush_interval_messages", cfg.flush_messages)
    return ProtocolConfig.from_properties(props, variants=Variants().with_overrides(dict(cfg.variants)))


#: how far past the workload a seed's loop may run before the run is called
#: stuck (the final heal, recovery and final reads take well under this)
STUCK_AFTER_MS = 3_600_000


def client_config(o: TestConfig) -> ClientConfig:
    """The simulated clients' settings, as the real queue client sets
    librdkafka's (``workloads.queue.QueueClient``): the delivery timeout
    (``message.timeout.ms``) a second under the op timeout, the request
    timeout at most 5 s, the final read's deadline."""
    delivery = max(1000, int(o.op_timeout * 1000) - 1000)
    return ClientConfig(request_timeout_ms=min(delivery, 5000), delivery_timeout_ms=delivery,
                        final_read_timeout_ms=int(o.final_read_timeout * 1000))


def client_settings(o: TestConfig, seed: int, thread: int) -> ClientSettings:
    """What thread ``thread``'s client is, as ``harness.lifecycle.runner.client_factory``
    makes the real one: its acks and idempotence, its retries (``--retries``;
    else none for a producer that is not idempotent, so NOT_ENOUGH_REPLICAS
    is a definite failure, and librdkafka's default for one that is), the
    run's group (``kraftwerk-<name>-<seed>``) with ``--sub-via subscribe``,
    the thread's instance id with ``--static-members``."""
    idem = o.idempotent_for_thread(thread)
    retries = o.retries if o.retries is not None else (None if idem else 0)
    group = f"kraftwerk-{o.name}-{seed}" if o.sub_via == "subscribe" else None
    instance = f"kraftwerk-{o.name}-{seed}-t{thread}" if group is not None and o.static_members else None
    return ClientSettings(o.acks_for_thread(thread), idem, retries, group, instance)


def sim_bound(pc: ProtocolConfig, client: ClientConfig, clock_ms: int = 0, start_ms: int = 0) -> LivenessBound:
    """The liveness bound of a simulated run (``checkers.availability.bound``):
    its protocol timings, its process start time (``start_delay_ms``, none by
    default), the simulated producers' metadata backoff and request timeout,
    its clock faults' hold."""
    return liveness_bound({f.name: getattr(pc, f.name) for f in dataclasses.fields(pc) if f.name.endswith("_ms")},
                          start_ms=start_ms,
                          client_refresh_ms=client.metadata_backoff_ms,
                          client_request_timeout_ms=client.request_timeout_ms, clock_ms=clock_ms)


def sim_rules(pc: ProtocolConfig) -> dict[str, Any]:
    """The election rules the simulated controllers follow (for a cause)."""
    return {"unclean_election": pc.unclean_allowed(), "elr": pc.elr_enabled(),
            "recovery_strategy": pc.recovery_strategy_for()}


def the_models_own(o: TestConfig) -> bool:
    """Whether the pinned placement is the one the model's round-robin
    gives with every broker up (``round_robin`` from n1, the topics in
    order): such a pin is not sent, so a replay of a simulated run asks
    the controller exactly what the run asked and plays the same history
    (a manual assignment is taken as soon as its brokers registered, the
    round-robin only once ``rf`` of them are unfenced)."""
    if o.placement is None:
        return True
    ids = {n: i for n, i, _ in o.layout()}
    brokers = sorted(i for _, i, roles in o.layout() if "broker" in roles)
    for k, topic in enumerate(o.topic_names()[:o.topics]):
        own = round_robin(brokers, o.partitions, o.rf, k * o.partitions)
        if own != [tuple(ids[n] for n in o.placement[f"{topic}-{p}"]) for p in range(o.partitions)]:
            return False
    return True


def sim_topic(o: TestConfig, topic: str) -> NewTopic:
    """The CreateTopics entry of one of the test's topics: with a pinned
    placement other than the model's own (an input topic) its replica
    assignment by node id, which the model's controller takes as a manual
    assignment, else the partition count and replication factor for its
    round-robin from n1."""
    configs = (("min.insync.replicas", str(o.min_isr)),)
    if o.placement is not None and topic in o.topic_names()[:o.topics] and not the_models_own(o):
        ids = {n: i for n, i, _ in o.layout()}
        replicas = assignment(o.placement, topic, o.partitions, ids)
        return NewTopic(topic, o.partitions, o.rf, configs, tuple(tuple(r) for r in replicas))
    return NewTopic(topic, o.partitions, o.rf, configs=configs)


@dataclass
class SimRun:
    """The pieces of one simulated test, built and wired: the simulated
    cluster (the contract over it: :attr:`cluster`), the history, each
    worker thread's simulated client (:meth:`client`). :meth:`run` sets the
    cluster up and hands the loop to ``driver``, which plays the test's
    generator on it (``harness.lifecycle.runner.sim_run`` wires the
    virtual-time interpreter)."""

    cfg: TestConfig
    seed: int
    run_dir: Path | None = None
    driver: Callable[["SimRun"], None] | None = None
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
            monitor=self.monitor, clock_drift=o.clock_drift, start_delay_ms=o.start_delay_ms,
        )
        self.history = sim_history(self.sim, self.run_dir / "history.jsonl" if self.run_dir else None)
        self.tps = [TopicPartition(t, p) for t in o.topic_names() for p in range(o.partitions)]
        self.wl = Workload(self.sim, self.tps, client_config(o), threads=o.concurrency)
        self._settings = [client_settings(o, self.seed, t) for t in range(o.concurrency)]
        self.cluster = SimCluster(self.sim, [str(tp) for tp in self.tps], self.wl.endpoint_names, net_cut=o.net_cut)
        self.setup_ok = False
        self.t0 = 0
        self.t_end = 0
        self.stuck = False
        #: what the nemesis did (``nemesis.replay``), for test.json
        self.schedule: list[dict[str, Any]] = []
        self._scheduled = False  # :attr:`schedule` taken from the checkers' walk (:meth:`results`)
        #: each input partition's replicas once the topics were created, for test.json
        self.placement: Placement = {}
        self.bound = sim_bound(self.sim.config, client_config(o), clock_hold_ms(o.faults()), o.start_delay_ms)
        #: the cluster's state when the bound after the final heal ran out
        #: (the cause of a partition still unavailable), else at the end
        self.state: dict[str, Any] | None = None
        self._healed_at: int | None = None

    # -- phases ----------------------------------------------------------------------------------------
    def setup(self) -> bool:
        """Start the nodes, create the topics, wait for every partition to have a live leader."""
        o, sim = self.cfg, self.sim
        sim.start()
        admin = Admin(sim)
        topics = tuple(sim_topic(o, t) for t in o.topic_names())
        sim.at(sim.now + 100, admin.create_topics, topics)

        def ready() -> bool:
            return admin.created and all(sim.leader_of(tp) in sim.hosts and sim.is_up(sim.leader_of(tp)) for tp in self.tps)

        self.setup_ok = sim.wait_for(ready, int(o.setup_timeout * 1000))
        obs = self.cluster.observer
        self.placement = as_created((k, obs.replicas_of(k)) for k in o.keys())
        return self.setup_ok

    def client(self, thread: int, process: int) -> SimClient:
        """The client of worker thread ``thread`` as process ``process``."""
        return self.wl.client(thread, process, self._settings[thread])

    def record_step(self, f: str, value: dict[str, Any]) -> None:
        """A story's follow-up step, recorded at the virtual moment it acts
        (``nemesis.stories.step_ops``, as on real hosts)."""
        for v in step_ops(value):
            self.history.append("nemesis", "info", f, v)

    def play(self, start: Callable[[], None], done: Callable[[], bool]) -> None:
        """The test's operations from now (their time 0): ``start`` begins
        them on the loop, which runs until ``done()`` (checked after every
        event)."""
        o, sim = self.cfg, self.sim
        self.t0 = sim.now
        self.t_end = self.t0 + int(o.time_limit * 1000)
        start()
        if not done():
            sim.loop.run_until(self.t_end + STUCK_AFTER_MS, done)
        self.stuck = not done()

    def healed(self) -> None:
        """The final heal was made (the nemesis's last ``stop`` op): the
        test's fault after it, if any, and the cluster's snapshot once the
        liveness bound runs out from here (a later heal op moves it)."""
        first = self._healed_at is None
        self._healed_at = self.sim.now
        if first and self.after_heal is not None:
            self.after_heal(self)
        self.sim.at(self.sim.now + self.bound.total_ms, self._bound_ran_out, self.sim.now)

    def _bound_ran_out(self, healed_at: int) -> None:
        if healed_at == self._healed_at and self.state is None:
            self._snapshot()

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
        if self.driver is None:
            raise ValueError("SimRun has no driver: build it with harness.lifecycle.runner.sim_run")
        wall0 = time.perf_counter()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            try:
                if self.setup():
                    self.driver(self)
                    if self.state is None:
                        self._snapshot()
            finally:
                # whatever stopped the run, what was recorded reaches the disk
                self.wl.stop()
                self.history.close()
                self.sim.close()
            self._scheduled = False
            try:
                results = self.results(time.perf_counter() - wall0)
            finally:
                if not self._scheduled:  # the checkers stopped before reading the history: the schedule all the same
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
        self.wl.clients.clear()
        self.wl.pairs.clear()
        self.sim.release()

    # -- verdict -------------------------------------------------------------------------------------------
    def test_json(self) -> dict[str, Any]:
        """What the run directory's test.json says about the checking (the
        options ``kraftwerk check`` reads back: keys, strict_*, liveness and
        its bound)."""
        return {**self.cfg.model_copy(update={"seed": self.seed}).test_json(), "liveness_bound": self.bound.as_dict()}

    def availability(self, facts: HistoryFacts) -> dict[str, Any]:
        """The availability checker (``checkers.availability``) on the
        history's facts, the traces (when the run has a directory) and the
        state the final phase saw."""
        timeline = read_timeline(self.run_dir) if self.run_dir is not None else None
        return check_availability(facts, [str(tp) for tp in self.tps], bound=self.bound,
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
        adds no verdict of its own.

        The history's operations are walked once: the queue checker's scan
        of them (:func:`checkers.queue.scan.scan_ops`, which ``check_history``
        takes as it takes the list) feeds the availability checker's pass
        on the same walk, and hands over the nemesis's operations, of which
        :attr:`schedule` is made (a walk of its own over a 60 s seed's 58k
        operations cost ~2 ms)."""
        facts = FactPass()
        nemesis: list[Op] = []
        scan = scan_ops(self.history.ops, facts=facts, nemesis=nemesis)
        self.schedule = replay.schedule_of(nemesis, self.t0 * 1_000_000)
        self._scheduled = True
        inv = self.monitor.summary()
        out = check_history(scan, model="queue", engine="inline", test=self.test_json(), invariants=inv)
        error = None if self.setup_ok else "set-up failed: not every partition had a live leader in time"
        if self.stuck:
            error = f"the generator did not finish within {STUCK_AFTER_MS // 1000} s of virtual time after the workload"
        if error:
            out["valid"] = False if out["valid"] is False else "unknown"
            out["error"] = error
        merge_availability(out, self.availability(facts.finish()))
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
            "faults": sum(1 for e in self.schedule if str(e.get("f", "")).startswith("start-")),
            "final_read_incomplete": list(fr.get("incomplete_keys", [])),
            "trace_events": dict(sorted(sim.trace_counts.items())),
            "node_crashes": [{"node": c.node, "t": c.t, "error": c.error} for c in sim.crashes[:10]],
        }
        out = {"valid": out.pop("valid"), "seed": self.seed, **out}
        if sim.crashes:
            out["crash_tracebacks"] = [c.traceback for c in sim.crashes[:3]]
        return out
