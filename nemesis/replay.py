"""Fault schedules as data: what a run's nemesis did, recorded in test.json in
the shared vocabulary, and played again on either runtime.

A schedule is a list of entries, one per fault operation the nemesis
completed (the final heal excluded: every run ends with one)::

    {"at_ms": 3164, "nominal_ms": 3164, "f": "start-kill", "fault": "kill",
     "target": "minority", "nodes": ["n2", "n3"]}

and one per follow-up step of a story (``step-partition``, see
``nemesis.stories``).

A start whose target the protocol's state names (``primaries``,
``controller``, ``clients``, the ISR targets) is named again when replayed,
from the cluster as it is then (``nemesis.faults.Fault.replay``), and its
completion keeps the recorded nodes as ``recorded_nodes`` where they
differ; a file whose top level says ``"targets": "as-recorded"`` (a pinned
regression schedule) replays the recorded nodes instead. A scripted
scenario's steps (``"fault": "scenario"``) are read as the faults of the
shared vocabulary they are (``nemesis.scenarios.as_fault``), and their
nodes renamed by the roles the replay binds (``nemesis.scenarios.Rebinding``).

``at_ms`` counts from the start of the test's operations; ``nominal_ms``
is when the schedule meant the op to happen (``nemesis.TimedCycle``: a
pure function of the seed and the options, the same on every runtime and
machine), ``at_ms`` when it did (later, if the nemesis was still busy with
the op before). A story's steps and a scripted scenario's ops have no
nominal time: they follow the cluster and the script. A replay applies
each entry as recorded (the same nodes, the same cut, the same offsets),
not a new draw: in the simulator at the same virtual millisecond, so the
same seed and schedule give the same history; on real processes at about
the same time.
"""

from __future__ import annotations

import json
import os
import random
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import generator as g

from .control import CLIENT
from .faults import FaultSpec, UnknownFault, expand
from . import scenarios
from .scenarios import SCENARIOS
from .stories import STORIES


class ScheduleError(ValueError):
    """A schedule file that cannot be replayed; the message is one line."""


#: the most a schedule file may hold (a test.json of a long run is well under a megabyte)
MAX_SCHEDULE_BYTES = 64 << 20


def _read(p: Path) -> str:
    """The text of the regular file ``p``, bounded: a FIFO is not waited on
    and a device (``/dev/zero``) is not read without end."""
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ScheduleError(f"schedule file {p}: not a regular file")
        if st.st_size > MAX_SCHEDULE_BYTES:
            raise ScheduleError(f"schedule file {p}: {st.st_size} bytes, more than {MAX_SCHEDULE_BYTES}")
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        return f.read(MAX_SCHEDULE_BYTES + 1).decode()


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
        entry = {"at_ms": (int(comp["time"]) - t0_ns) // 1_000_000}
        if comp.get("nominal_ms") is not None:
            entry["nominal_ms"] = comp["nominal_ms"]
        out.append({**entry, "f": comp["f"], **value})
    return out


def _fields(op: Any) -> dict[str, Any]:
    if isinstance(op, dict):
        return op
    return {"process": op.process, "time": op.time, "f": op.f, "value": op.value,
            "nominal_ms": op.extra.get("nominal_ms")}


def read_json(path: str | Path) -> Any:
    """The JSON a schedule file holds (a regular file, bounded); a one-line
    :class:`ScheduleError` for anything else."""
    p = Path(path)
    try:
        return json.loads(_read(p))
    except FileNotFoundError:
        raise ScheduleError(f"schedule file {p} not found") from None
    except ScheduleError:
        raise
    except RecursionError:
        raise ScheduleError(f"schedule file {p}: nested too deeply") from None
    except (OSError, ValueError) as e:
        raise ScheduleError(f"schedule file {p}: not JSON ({(str(e).splitlines() or [type(e).__name__])[0]})") from None


def load(path: str | Path) -> tuple[list[dict[str, Any]], tuple[FaultSpec, ...]]:
    """A schedule from a run's test.json (its ``schedule``, and the
    nemesis mix it was drawn from: the final heal's order) or a JSON list,
    with every fault it may start parsed: the mix's, then the entries'."""
    p = Path(path)
    data = read_json(p)
    entries = data.get("schedule") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ScheduleError(f"schedule file {p}: no schedule (a test.json with 'schedule', or a list)")
    for i, e in enumerate(entries):
        if not (isinstance(e, dict) and isinstance(e.get("at_ms"), int) and isinstance(e.get("fault"), str)
                and str(e.get("f", "")).startswith(("start-", "stop-", "step-"))):
            raise ScheduleError(f"schedule file {p}: entry {i} needs at_ms (int), f (start-/stop-/step-) and fault")
    # a scripted scenario's steps: faults of the shared vocabulary (roles bound again when replayed)
    entries = [scenarios.as_fault(e) if scenarios.is_step(e) else e for e in entries]
    targets = data.get("targets", "resolve") if isinstance(data, dict) else "resolve"
    if targets not in ("resolve", "as-recorded"):
        raise ScheduleError(f"schedule file {p}: targets is 'resolve' (the default) or 'as-recorded', not {targets!r}")
    if targets == "as-recorded":  # a pinned regression: the recorded nodes, whatever the state
        entries = [{**e, "as_recorded": True} for e in entries]
    mix = data.get("nemesis") if isinstance(data, dict) else None
    mix = list(mix) if isinstance(mix, list) else []
    if not all(isinstance(m, str) for m in mix):
        raise ScheduleError(f"schedule file {p}: nemesis must be a list of fault names")
    scenario = data.get("scenario") if isinstance(data, dict) else None
    mix = [f"story:{s}" for s in told(str(scenario or ""), bool(mix))] + mix
    try:
        return entries, expand([*mix, *fault_names(entries)])
    except UnknownFault as e:
        raise ScheduleError(f"schedule file {p}: {e}") from None


def named_nodes(entries: Iterable[dict[str, Any]]) -> set[str]:
    """Every node a schedule's entries name (their nodes, cuts, clock
    offsets): a replay on a cluster without one of them cannot be the
    recorded run (a schedule from another layout)."""
    out: set[str] = set()
    for e in entries:
        for k in ("nodes", "isolated", "recorded_nodes"):
            v = e.get(k)
            if isinstance(v, list):
                out.update(str(n) for n in v)
        for pair in e.get("cut") or ():
            if isinstance(pair, (list, tuple)):
                out.update(str(n) for n in pair)
        if isinstance(e.get("offsets_ms"), dict):
            out.update(map(str, e["offsets_ms"]))
    return out


def check_nodes(entries: Iterable[dict[str, Any]], have: Iterable[str], path: str) -> None:
    """Refuse a schedule naming nodes the cluster lacks (the pseudo-node
    ``client`` stands for every client, on every cluster)."""
    unknown = sorted(named_nodes(entries) - set(have) - {CLIENT})
    if unknown:
        raise ScheduleError(f"schedule file {path} names nodes this cluster does not have: {', '.join(unknown)} "
                            f"(it has {', '.join(have)}): give the recorded run's --brokers/--controllers")


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


def steps_after(entries: tuple[dict[str, Any], ...]) -> tuple[tuple[dict[str, Any], tuple[dict[str, Any], ...]], ...]:
    """The entries that are nemesis ops (starts and stops), each with the
    story steps recorded after it and before the next op: on a replay the
    steps act on the runtime's clock (``Cluster.step_after``) as the story's own
    timers did, not as ops of the generator (which would ask the clients'
    generator more often than the recorded run did, and move their
    draws). Steps before the first op go with the first."""
    out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    lead: list[dict[str, Any]] = []
    for e in sorted(entries, key=lambda e: e["at_ms"]):
        if str(e["f"]).startswith("step-"):
            (out[-1][1] if out else lead).append(e)
        else:
            out.append((e, []))
    if out and lead:
        out[0][1][:0] = lead
    return tuple((e, tuple(steps)) for e, steps in out)


@dataclass(frozen=True)
class Replay(g.Gen):
    """The entries as nemesis ops, each at its recorded time (``at_ms``, or
    at once if the nemesis is busy past it), so the simulator places them
    as the recorded run did. Nothing is drawn from the generator's rng, so
    the clients' choices are the recorded run's too. The entry rides along
    under ``_replay`` (never recorded), and the story steps that follow it
    under ``_steps``, each with its delay from the op (:func:`steps_after`):
    the history shows the ops as the first run did, each with its recorded
    nominal time. What an entry leaves to be drawn (a search's new fault
    names a target alone) is drawn from the test's ``seed`` and the entry's
    place (``_draw``)."""

    entries: tuple[dict[str, Any], ...]
    seed: int = 0
    i: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ops", steps_after(self.entries))

    def op(self, ctx: g.Context):
        ops = self._ops  # type: ignore[attr-defined]
        if self.i >= len(ops):
            return None
        if not ctx.free_threads():
            return g.PENDING, self
        e, steps = ops[self.i]
        t = max(ctx.time, e["at_ms"] * 1_000_000)
        op = {"f": e["f"], "value": {"fault": e["fault"]}, "process": "nemesis", "time": t, "_replay": e,
              "_draw": random.Random(f"nemesis/{self.seed}/replay/{self.i}").getrandbits(64)}
        if e.get("nominal_ms") is not None:
            op["nominal_ms"] = e["nominal_ms"]
        if steps:
            op["_steps"] = tuple((max(0, s["at_ms"] - t // 1_000_000), s) for s in steps)
        return op, Replay(self.entries, self.seed, self.i + 1)
