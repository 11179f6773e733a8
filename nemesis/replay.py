"""Fault schedules as data: what a run's nemesis did, recorded in test.json in
the shared vocabulary, and played again on either runtime.

A schedule is a list of entries, one per fault operation the nemesis
completed (the final heal excluded: every run ends with one)::

    {"at_ms": 3164, "f": "start-kill", "fault": "kill",
     "target": "minority", "nodes": ["n2", "n3"]}

and one per follow-up step of a story (``step-partition``, see
``nemesis.stories``).

``at_ms`` counts from the start of the test's operations. A replay applies
each entry as recorded (the same nodes, the same cut, the same offsets),
not a new draw: in the simulator at the same virtual millisecond, so the
same seed and schedule give the same history; on real processes at about
the same time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import generator as g

from .faults import FaultSpec, UnknownFault, expand
from .scenarios import SCENARIOS
from .stories import STORIES


class ScheduleError(ValueError):
    """A schedule file that cannot be replayed; the message is one line."""


def schedule_of(ops: Iterable[Any], t0_ns: int = 0) -> list[dict[str, Any]]:
    """The schedule a history's nemesis operations tell: each completion
    (the second of each invocation/completion pair of the nemesis process)
    with its time relative to ``t0_ns``, in time order. A story's
    follow-up steps (``step-...``) are paired among themselves: on real
    hosts they act on a timer thread, so a step may fall between the
    nemesis thread's invocation and its completion."""
    # the nemesis's operations picked out before any is copied into a dict:
    # a seed's history is mostly client operations (30k of them in a 30 s
    # simulated seed, whose dicts cost ~2% of its instructions)
    nem = [_fields(o) for o in ops if (o["process"] if isinstance(o, dict) else o.process) == "nemesis"]
    steps = [o for o in nem if str(o["f"]).startswith("step-")]
    ops_ = [o for o in nem if not str(o["f"]).startswith("step-")]
    out = []
    for comp in sorted(ops_[1::2] + steps[1::2], key=lambda o: int(o["time"])):
        value = comp.get("value") or {}
        if not isinstance(value, dict) or value.get("final") or "fault" not in value:
            continue
        entry = {"at_ms": (int(comp["time"]) - t0_ns) // 1_000_000, "f": comp["f"], **value}
        out.append(entry)
    return out


def _fields(op: Any) -> dict[str, Any]:
    if isinstance(op, dict):
        return op
    return {"process": op.process, "time": op.time, "f": op.f, "value": op.value}


def load(path: str | Path) -> tuple[list[dict[str, Any]], tuple[FaultSpec, ...]]:
    """A schedule from a run's test.json (its ``schedule``, and the
    nemesis mix it was drawn from: the final heal's order) or a JSON list,
    with every fault it may start parsed: the mix's, then the entries'."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ScheduleError(f"schedule file {p} not found") from None
    except (OSError, ValueError) as e:
        raise ScheduleError(f"schedule file {p}: not JSON ({str(e).splitlines()[0]})") from None
    entries = data.get("schedule") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ScheduleError(f"schedule file {p}: no schedule (a test.json with 'schedule', or a list)")
    for i, e in enumerate(entries):
        if not (isinstance(e, dict) and isinstance(e.get("at_ms"), int) and isinstance(e.get("fault"), str)
                and str(e.get("f", "")).startswith(("start-", "stop-", "step-"))):
            raise ScheduleError(f"schedule file {p}: entry {i} needs at_ms (int), f (start-/stop-/step-) and fault")
    mix = data.get("nemesis") if isinstance(data, dict) else None
    mix = list(mix) if isinstance(mix, list) else []
    scenario = data.get("scenario") if isinstance(data, dict) else None
    mix = [f"story:{s}" for s in told(str(scenario or ""), bool(mix))] + mix
    try:
        return entries, expand([*mix, *fault_names(entries)])
    except UnknownFault as e:
        raise ScheduleError(f"schedule file {p}: {e}") from None


def told(scenario: str, with_mix: bool) -> tuple[str, ...]:
    """The stories a ``scenario`` setting tells as faults of the mix (ahead
    of the ``nemesis`` mix): stories given with a mix, several stories, or
    a story with no script; none for a scripted scenario (``last-replica-
    standing`` alone plays its script)."""
    names = tuple(n for n in scenario.split(",") if n)
    if not names or any(n not in STORIES for n in names):
        return ()
    if len(names) == 1 and names[0] in SCENARIOS and not with_mix:
        return ()
    return names


def fault_names(entries: list[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(e["fault"] for e in entries))


@dataclass(frozen=True)
class Replay(g.Gen):
    """The entries as nemesis ops, each after a sleep until its time, so
    the simulator places them as the recorded run did (a sleep, then the
    op, on the nemesis thread). The entry rides along under ``_replay``
    (never recorded): the history shows the ops as the first run did."""

    entries: tuple[dict[str, Any], ...]
    i: int = 0
    slept: bool = False

    def op(self, ctx: g.Context):
        if self.i >= len(self.entries):
            return None
        if not ctx.free_threads():
            return g.PENDING, self
        e = self.entries[self.i]
        if not self.slept:
            dt = e["at_ms"] * 1_000_000 - ctx.time
            o, _ = g.Sleep(max(0, dt)).op(ctx)
            if o == g.PENDING:
                return g.PENDING, self
            return o, Replay(self.entries, self.i, True)
        op = {"f": e["f"], "value": {"fault": e["fault"]}, "process": "nemesis", "time": ctx.time, "_replay": e}
        return op, Replay(self.entries, self.i + 1, False)
