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
from dataclasses import dataclass
from functools import partial
from typing import Any

import generator as g

from .control import Cluster
from .faults import Fault, FaultSpec, clock_held_ms, make_faults
from .stories import Record, Timings
from . import replay, scenarios


def draw_rng(seed: int, *path: object) -> random.Random:
    """A generator of its own for one draw of the fault schedule, a pure
    function of the test's seed and the draw's place (cycle, step): seeded
    from a string, which CPython hashes with SHA-512, so the same on every
    machine and under any PYTHONHASHSEED. Nothing else moves it: not the
    clients' choices, not the pace of the run, not the protocol state a
    fault's target was read from."""
    return random.Random("/".join(str(x) for x in ("nemesis", seed, *path)))


MS = 1_000_000

#: each fault's quiet gap before its start and its duration, as fractions of
#: the interval: ``lo + span * u`` with u uniform in [0, 1)
SEQUENTIAL_SPREAD = ((0.5, 1.0), (0.5, 1.0))
OVERLAP_SPREAD = ((0.5, 1.0), (0.2, 1.8))


@dataclass(frozen=True)
class TimedCycle(g.Gen):
    """start/stop cycles of one fault group on a timetable fixed by the seed
    alone: step ``k`` (a start, then its stop, then the next start...) draws
    from :func:`draw_rng` ``(seed, cycle, k)`` its gap after the previous
    step's *nominal* time (a start's quiet gap ``interval * (0.5 + u)``; a
    stop's duration ``interval * (0.2 + 1.8 u)`` in overlap mode,
    ``interval * (0.5 + u)`` in sequential mode), a start's fault and the
    seed of the draws its fault makes (its targets: ``_draw``, never
    recorded). So asking again never moves the next op (generators stay
    pure), the nominal times (``nominal_ms``, recorded beside the op's
    actual time) are the same on every runtime and machine whatever the
    clients do, and an op whose nominal time has passed while the nemesis
    thread was busy goes at once. A fault may end before or long after the
    protocol's timeouts (an ISR shrinks only after replica.lag.time.max.ms).
    Several run side by side under ``any_`` and their faults overlap, as
    with Jepsen's composed nemesis packages; one alone is the sequential
    schedule (one fault at a time, each start followed by its stop)."""

    faults: tuple[FaultSpec, ...]
    interval_ns: int
    seed: int
    k: int = 0
    #: the nominal time (ns from the start of the operations) of the last step
    at: int = 0
    current: FaultSpec | None = None
    cycle: int = 0
    spread: tuple[tuple[float, float], tuple[float, float]] = OVERLAP_SPREAD
    #: no step is meant for this time or later (None: no end)
    end: int | None = None

    def _step(self) -> tuple[int, FaultSpec | None, dict[str, Any]]:
        """Step k's draws: its nominal time, the fault it starts (None for
        a stop) and the op. Drawn once per instance (memoised on it): the
        generator is asked on every client op, and each answer builds the
        successor, most of which are never asked."""
        got = self.__dict__.get("_drawn")
        if got is not None:
            return got
        rng = draw_rng(self.seed, self.cycle, self.k)
        lo, span = self.spread[0 if self.current is None else 1]
        # whole milliseconds: a nominal time both runtimes can keep exactly
        nominal = self.at + int(self.interval_ns * (lo + span * rng.random())) // MS * MS
        step: dict[str, Any]
        fault: FaultSpec | None
        if self.current is None:
            fault = rng.choice(self.faults)
            step = {"f": f"start-{fault.op_name}", "value": {"fault": fault.name}, "_draw": rng.getrandbits(64)}
        else:
            fault = None
            step = {"f": f"stop-{self.current.op_name}", "value": {"fault": self.current.name}}
        got = (nominal, fault, step)
        object.__setattr__(self, "_drawn", got)
        return got

    def op(self, ctx: g.Context):
        if not ctx.free_threads():
            return g.PENDING, self
        nominal, fault, step = self._step()
        if self.end is not None and nominal >= self.end:
            return None
        if nominal >= ctx.time:
            # the step waits for its time: the same answer on every ask until
            # then, made once (callers copy an op before changing it, as the
            # library's generators and both interpreters do)
            waiting = self.__dict__.get("_waiting")
            if waiting is None:
                waiting = ({**step, "process": "nemesis", "time": nominal, "nominal_ms": nominal // MS},
                           self._successor(nominal, fault))
                object.__setattr__(self, "_waiting", waiting)
            return waiting
        op = {**step, "process": "nemesis", "time": ctx.time, "nominal_ms": nominal // MS}
        return op, self._successor(nominal, fault)

    def _successor(self, nominal: int, fault: FaultSpec | None) -> "TimedCycle":
        """The cycle after this step, made once per instance (memoised on
        it, as the draws): under ``any_`` the nemesis is asked beside the
        clients on every ask while its next step waits for its time, and
        building a frozen dataclass for each answer, thrown away unless the
        step is due, was most of what a nemesis run's asks cost."""
        got = self.__dict__.get("_next")
        if got is None:
            got = TimedCycle(self.faults, self.interval_ns, self.seed, self.k + 1, nominal, fault, self.cycle,
                             self.spread, self.end)
            object.__setattr__(self, "_next", got)
        return got


def sequential(faults: tuple[FaultSpec, ...], interval_ns: int, seed: int, end_ns: int | None = None) -> g.Gen:
    """One fault at a time: a quiet gap of ``interval * (0.5..1.5)``, a
    fault of the mix, held ``interval * (0.5..1.5)``, its stop; again
    (until ``end_ns``, nominally)."""
    return TimedCycle(tuple(faults), interval_ns, seed, spread=SEQUENTIAL_SPREAD, end=end_ns)


def overlapping(faults: tuple[FaultSpec, ...], interval_ns: int, seed: int, end_ns: int | None = None) -> g.Gen:
    """One TimedCycle per history op name (kill, leader-kill and
    controller-kill share ``start-kill``/``stop-kill``, so they take turns)."""
    groups: dict[str, list[FaultSpec]] = {}
    for f in faults:
        groups.setdefault(f.op_name, []).append(f)
    return g.any_(*[TimedCycle(tuple(fs), interval_ns, seed, cycle=i, end=end_ns)
                    for i, fs in enumerate(groups.values())])


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

    def __init__(self, plan: NemesisPlan, cluster: Cluster, seed: int, record: Record | None = None) -> None:
        """``seed`` is the test's: the schedule and every draw a fault makes
        come from it alone (:func:`draw_rng`), so both runtimes derive
        them the same way. ``record(f, value)`` writes a nemesis operation
        the faults make on their own, a story's follow-up step, to the
        runtime's history."""
        self.plan = plan
        self.cluster = cluster
        self.seed = seed
        self.record = record
        timings = Timings(plan.lag_ms, plan.session_ms, int(plan.interval_s * 1000))
        self.faults: dict[str, Fault] = make_faults(plan.faults, cluster, draw_rng(seed, "faults"), timings, record)
        missing = [n for n in replay.fault_names(list(plan.schedule)) if n not in self.faults]
        if missing:
            raise ValueError(f"the schedule replays {', '.join(missing)}, which the plan's faults do not hold")
        self.script = scenarios.ScenarioRunner(plan.scenario, cluster) if plan.scenario else None
        #: the longest a clock change of this run holds timers once reset
        #: (:func:`nemesis.faults.clock_held_ms`), for the recovery wait
        self.clock_held_ms = 0

    def schedule(self, end_ns: int | None = None) -> g.Gen:
        """The nemesis's ops: a recorded schedule, a script, or the seed's
        timetable; ``end_ns``: no op is meant for that time or later (the
        test's time limit, judged on the nominal time, so where a schedule
        ends does not hang on how busy the nemesis was; a replay's ops are
        judged on their recorded times)."""
        if self.plan.schedule:
            rep = replay.Replay(self.plan.schedule, self.seed)
            return rep if end_ns is None else g.TimeLimit(end_ns, rep, end_ns)
        if self.plan.scenario:
            return scenarios.generator(self.plan.scenario)
        interval = int(self.plan.interval_s * g.NS)
        if self.plan.mode == "overlap":
            return overlapping(self.plan.faults, interval, self.seed, end_ns)
        return sequential(self.plan.faults, interval, self.seed, end_ns)

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
        """Time to let elections, ISR expansion and catch-up happen after the
        heal, and before that for the wall-clock timers a clock reset set
        back to catch up: else the final reads may meet a broker whose stale
        metadata still makes it a partition's leader, or an ISR a fetch
        backoff still keeps short. The clock term is what this run's clock
        faults did (:attr:`clock_held_ms`), so it is asked when the wait
        starts (``generator.sleep_for``); the availability checker's bound
        keeps the most a mix can do (:func:`nemesis.faults.clock_hold_ms`)."""
        return max(5.0, min(15.0, self.plan.interval_s * 2)) + self.clock_held_ms / 1000.0

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        f: str = op["f"]
        action, _, name = f.partition("-")
        fault_name = (op.get("value") or {}).get("fault")
        try:
            if self.script is not None:
                v = op.get("value") or {}
                result = self.script.heal_all() if v.get("final") else self.script.run(int(v["step"]))
            elif action in ("start", "step") and "_replay" in op:
                result = self.faults[fault_name].replay(op["_replay"], _draws(op))
            elif action == "start":
                result = self.faults[fault_name].start(_draws(op))
            elif fault_name in self.faults:
                result = self.faults[fault_name].stop()
            else:  # final heal: every fault with this op name
                result = {}
                for fn, fault in self.faults.items():
                    if fault.op_name == name:
                        result[fn] = fault.stop()
        except Exception as e:
            return {"value": {**(op.get("value") or {}), "error": f"{type(e).__name__}: {e}"[:300]}}
        finally:
            for delay, step in op.get("_steps", ()):
                self.cluster.step_after(delay, partial(self._replay_step, step))
        self.clock_held_ms = max(self.clock_held_ms, clock_held_ms(result))
        return {"value": {**(op.get("value") or {}), **result}}

    def _replay_step(self, entry: dict[str, Any]) -> None:
        """A recorded story step, applied as recorded and recorded again,
        when its time comes (``nemesis.replay.steps_after``)."""
        try:
            done = self.faults[entry["fault"]].replay(entry)
        except Exception as e:
            done = {"error": f"{type(e).__name__}: {e}"[:300]}
        self.clock_held_ms = max(self.clock_held_ms, clock_held_ms(done))
        if self.record is not None:
            self.record(entry["f"], {"fault": entry["fault"], **done})

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


def _draws(op: dict[str, Any]) -> random.Random | None:
    """The generator a start's draws come from (its targets, a story's
    steps): seeded by the schedule's ``_draw`` for that start, so a draw
    that reads protocol state (a partition's leader) never moves the next
    fault's."""
    d = op.get("_draw")
    return random.Random(d) if d is not None else None


__all__ = ["Nemesis", "NemesisPlan", "TimedCycle", "draw_rng", "overlapping", "sequential"]
