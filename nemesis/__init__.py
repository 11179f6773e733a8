"""Faults and their heals.

Every fault is a pair of history operations on the ``nemesis`` process,
``start-<fault>`` and ``stop-<fault>`` (docs/architecture.md), with the
targets resolved when the fault is applied (a leader is whoever leads *then*)
and recorded in the completion's value. ``final()`` heals everything, and
``heal_all()`` does so again outside the history as the harness's last word.

The fault vocabulary is ``nemesis.faults``; every fault drives the cluster
contract (``nemesis.control``), which the local backend and the simulator
both implement, and nothing else.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

import generator as g

from .control import Cluster
from .faults import Fault, FaultSpec, make_faults
from .stories import Record, Timings
from . import replay, scenarios


@dataclass(frozen=True)
class Schedule(g.Gen):
    """sleep ~interval, start a random fault, sleep ~interval, stop it, repeat.
    One fault at a time, so every start has its stop before the next begins."""

    faults: tuple[FaultSpec, ...]
    interval_ns: int
    phase: str = "sleep-before-start"
    current: FaultSpec | None = None

    def _sleep(self, ctx: g.Context, nxt: str, current: FaultSpec | None):
        dt = int(self.interval_ns * (0.5 + ctx.rng.random()))
        o, _ = g.Sleep(dt).op(ctx)
        if o == g.PENDING:
            return g.PENDING, self
        return o, replace(self, phase=nxt, current=current)

    def op(self, ctx: g.Context):
        if not ctx.free_threads():
            return g.PENDING, self
        if self.phase == "sleep-before-start":
            return self._sleep(ctx, "start", None)
        if self.phase == "start":
            fault = ctx.rng.choice(self.faults)
            return (
                {"f": f"start-{fault.op_name}", "value": {"fault": fault.name}, "process": "nemesis", "time": ctx.time},
                replace(self, phase="sleep-before-stop", current=fault),
            )
        if self.phase == "sleep-before-stop":
            return self._sleep(ctx, "stop", self.current)
        assert self.current is not None
        return (
            {"f": f"stop-{self.current.op_name}", "value": {"fault": self.current.name}, "process": "nemesis",
             "time": ctx.time},
            replace(self, phase="sleep-before-start", current=None),
        )


@dataclass(frozen=True)
class TimedCycle(g.Gen):
    """start/stop cycles of one fault group on a timetable fixed by the seed:
    each fault's quiet interval before it is ``interval * (0.5 + u_k)`` and
    its duration ``interval * (0.2 + 1.8 u_k)``, with u_k from Random(seed,
    k), so asking again never moves the next op (generators stay pure) and
    a fault may end before or long after the protocol's timeouts (an ISR
    shrinks only after replica.lag.time.max.ms). Several run side by side
    under ``any_`` and their faults overlap, as with Jepsen's composed
    nemesis packages."""

    faults: tuple[FaultSpec, ...]
    interval_ns: int
    seed: int
    k: int = 0
    at: int = 0
    current: FaultSpec | None = None

    def op(self, ctx: g.Context):
        rng = random.Random(self.seed * 1_000_003 + self.k)
        u = rng.random()
        spread = 0.5 + u if self.current is None else 0.2 + 1.8 * u
        at = self.at + int(self.interval_ns * spread)
        fault: FaultSpec | None
        if self.current is None:
            fault = rng.choice(self.faults)
            op = {"f": f"start-{fault.op_name}", "value": {"fault": fault.name}}
        else:
            fault = None
            op = {"f": f"stop-{self.current.op_name}", "value": {"fault": self.current.name}}
        if not ctx.free_threads():
            return g.PENDING, self
        op.update(process="nemesis", time=max(at, ctx.time))
        return op, replace(self, k=self.k + 1, at=op["time"], current=fault)


def overlapping(faults: tuple[FaultSpec, ...], interval_ns: int, seed: int) -> g.Gen:
    """One TimedCycle per history op name (kill, leader-kill and
    controller-kill share ``start-kill``/``stop-kill``, so they take turns)."""
    groups: dict[str, list[FaultSpec]] = {}
    for f in faults:
        groups.setdefault(f.op_name, []).append(f)
    return g.any_(*[TimedCycle(tuple(fs), interval_ns, seed + i) for i, fs in enumerate(groups.values())])


@dataclass(frozen=True)
class NemesisPlan:
    """What the nemesis of one test does: the faults to draw from, how often,
    sequential or overlapping, or a scripted scenario instead. ``faults``
    holds every fault the plan may start, those a replayed ``schedule``
    names included (``TestConfig.nemesis_plan``)."""

    faults: tuple[FaultSpec, ...] = ()
    interval_s: float = 5.0
    mode: str = "sequential"
    scenario: str | None = None
    #: protocol timeouts the stories wait on (``nemesis.stories``)
    lag_ms: int = 5000
    session_ms: int = 4000
    #: a recorded schedule to replay instead (``nemesis.replay``)
    schedule: tuple[dict[str, Any], ...] = ()


class Nemesis:
    """Dispatches nemesis ops to fault implementations."""

    def __init__(self, plan: NemesisPlan, cluster: Cluster, rng: random.Random, record: Record | None = None) -> None:
        """``record(f, value)`` writes a nemesis operation the faults make
        on their own, a story's follow-up step, to the runtime's history."""
        self.plan = plan
        self.cluster = cluster
        self.rng = rng
        timings = Timings(plan.lag_ms, plan.session_ms, int(plan.interval_s * 1000))
        self.faults: dict[str, Fault] = make_faults(plan.faults, cluster, rng, timings, record)
        missing = [n for n in replay.fault_names(list(plan.schedule)) if n not in self.faults]
        if missing:
            raise ValueError(f"the schedule replays {', '.join(missing)}, which the plan's faults do not hold")
        self.script = scenarios.ScenarioRunner(plan.scenario, cluster) if plan.scenario else None

    def schedule(self) -> g.Gen:
        if self.plan.schedule:
            return replay.Replay(self.plan.schedule)
        if self.plan.scenario:
            return scenarios.generator(self.plan.scenario)
        interval = int(self.plan.interval_s * g.NS)
        if self.plan.mode == "overlap":
            return overlapping(self.plan.faults, interval, self.rng.randrange(1 << 30))
        return Schedule(self.plan.faults, interval)

    def _op_names(self) -> list[str]:
        if self.plan.scenario:
            steps = scenarios.SCENARIOS[self.plan.scenario]
            return list(dict.fromkeys(s[0].split("-", 1)[1] for s in steps if s[0] != "sleep"))
        return list(dict.fromkeys(f.op_name for f in self.faults.values()))

    def final(self) -> g.Gen:
        """stop-<op> once per distinct op name: heal every fault type in use."""
        names = self._op_names()
        return g.from_list(
            {"f": f"stop-{n}", "value": {"fault": "all", "final": True}, "process": "nemesis"} for n in names
        )

    def recovery_seconds(self) -> float:
        """Time to let elections, ISR expansion and catch-up happen after the heal."""
        return max(5.0, min(15.0, self.plan.interval_s * 2))

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        f: str = op["f"]
        action, _, name = f.partition("-")
        fault_name = (op.get("value") or {}).get("fault")
        try:
            if self.script is not None:
                v = op.get("value") or {}
                result = self.script.heal_all() if v.get("final") else self.script.run(int(v["step"]))
            elif action in ("start", "step") and "_replay" in op:
                result = self.faults[fault_name].replay(op["_replay"])
            elif action == "start":
                result = self.faults[fault_name].start()
            elif fault_name in self.faults:
                result = self.faults[fault_name].stop()
            else:  # final heal: every fault with this op name
                result = {}
                for fn, fault in self.faults.items():
                    if fault.op_name == name:
                        result[fn] = fault.stop()
        except Exception as e:
            return {"value": {**(op.get("value") or {}), "error": f"{type(e).__name__}: {e}"[:300]}}
        return {"value": {**(op.get("value") or {}), **result}}

    def heal_all(self) -> None:
        if self.script is not None:
            try:
                self.script.heal_all()
            except Exception:
                pass
        for fault in self.faults.values():
            try:
                fault.stop()
            except Exception:
                pass


__all__ = ["Nemesis", "NemesisPlan", "Schedule"]
