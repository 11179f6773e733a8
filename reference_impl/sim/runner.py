"""One seed, end to end: cluster set-up, workload, nemesis, final phase,
checkers.

Given a run directory (the harness makes it and writes test.json and
results.json, as for real runs), the seed writes ``history.jsonl`` and
``nodes/<node>/trace.jsonl`` into it. The history holds virtual time only,
so a seed replays byte for byte.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.invariants import InvariantMonitor
from reference_impl import accel
from reference_impl.core.messages import NewTopic, TopicPartition

from .clients import Admin, Arrivals, ClientConfig, Consumer, Workload
from .history import History
from .nemesis import Nemesis
from .network import LinkProfile
from .options import SimOptions
from .simulation import Simulation

@dataclass
class SimRun:
    """The pieces of one simulated test, built and wired; :meth:`run` plays it."""

    opts: SimOptions
    seed: int
    run_dir: Path | None = None
    client_config: ClientConfig = field(default_factory=ClientConfig)

    def __post_init__(self) -> None:
        o = self.opts
        self.monitor = InvariantMonitor(seed=self.seed, min_isr=o.min_isr)
        self.sim = Simulation(
            self.seed, o.brokers, o.controllers, o.protocol_config(),
            link=LinkProfile(o.latency_ms, o.jitter_ms),
            trace_dir=(self.run_dir / "nodes") if self.run_dir else None,
            monitor=self.monitor, clock_drift=o.clock_drift,
        )
        self.history = History(self.run_dir / "history.jsonl" if self.run_dir else None)
        self.tps = [TopicPartition(t, p) for t in o.topic_names() for p in range(o.partitions)]
        self.wl = Workload(self.sim, self.history, self.tps, self.client_config)
        for i in range(o.producers):
            acks = o.acks if o.acks != "mixed" else ("all" if i % 2 == 0 else "1")
            self.wl.add_producer(acks, idempotent=o.idempotent and acks == "all")
        for _ in range(o.consumers):
            self.wl.add_consumer()
        self.nemesis = Nemesis(self.sim, self.wl.record, o.faults(), int(o.nemesis_interval_s * 1000),
                               client_names=lambda: [c.ep.name for c in self.wl.producers + self.wl.consumers])
        self.setup_ok = False
        self.generating = False
        self.arrivals = Arrivals(self.sim, self.wl.producers, o.rate)
        self.final_readers: list[Consumer] = []
        self.t0 = 0
        self.t_end = 0

    # -- phases ----------------------------------------------------------------------------------------
    def setup(self) -> bool:
        """Start the nodes, create the topics, wait for every partition to have a live leader."""
        o, sim = self.opts, self.sim
        sim.start()
        admin = Admin(sim)
        topics = tuple(NewTopic(t, o.partitions, o.rf, configs=(("min.insync.replicas", str(o.min_isr)),))
                       for t in o.topic_names())
        sim.at(sim.now + 100, admin.create_topics, topics)

        def ready() -> bool:
            return admin.created and all(sim.leader_of(tp) in sim.hosts and sim.is_up(sim.leader_of(tp)) for tp in self.tps)

        self.setup_ok = sim.wait_for(ready, int(o.setup_timeout_s * 1000))
        return self.setup_ok

    def start_workload(self) -> None:
        o, sim = self.opts, self.sim
        self.t0 = sim.now
        self.t_end = self.t0 + int(o.time_limit_s * 1000)
        self.generating = True
        self.arrivals.start()
        for c in self.wl.consumers:
            sim.at(self.t0 + sim.rng.randint(0, self.client_config.poll_interval_ms), self._consumer_loop, c)
        self.nemesis.schedule(self.t0 + int(o.warmup_s * 1000), self.t_end)
        sim.at(self.t_end, self._stop_generating)

    def _consumer_loop(self, c: Consumer) -> None:
        if not self.generating:
            return
        c.poll(done=lambda _got: self.sim.loop.after(self.client_config.poll_interval_ms, self._consumer_loop, c))

    def _stop_generating(self) -> None:
        self.generating = False
        self.arrivals.stop()

    def final_phase(self) -> None:
        """Heal everything, restart the dead, wait, then final reads per key."""
        o, sim = self.opts, self.sim
        self.nemesis.final_heal()
        sim.run_for(int(o.final_wait_s * 1000))
        deadline = int(o.final_read_s * 1000)
        for tp in self.tps:
            r = self.wl.add_final_reader()
            self.final_readers.append(r)
            r.poll(tps=[tp], final=True, from_start=True, until=dict(self.wl.max_acked), deadline_ms=deadline)
        sim.wait_for(lambda: not any(r.busy for r in self.final_readers), deadline + 2 * self.client_config.request_timeout_ms)
        self.wl.finish()

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
        options ``kraftwerk check`` reads back: keys, strict_*)."""
        return {"kraftwerk": "sim", "seed": self.seed, "options": self.opts.to_json(),
                "keys": [str(tp) for tp in self.tps]}

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
            "faults": self.nemesis.started,
            "skipped_arrivals": self.arrivals.skipped,
            "final_read_incomplete": list(fr.get("incomplete_keys", [])),
            "trace_events": dict(sorted(sim.trace_counts.items())),
            "node_crashes": [{"node": c.node, "t": c.t, "error": c.error} for c in sim.crashes[:10]],
        }
        out = {"valid": out.pop("valid"), "seed": self.seed, **out}
        if sim.crashes:
            out["crash_tracebacks"] = [c.traceback for c in sim.crashes[:3]]
        return out
