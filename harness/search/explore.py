"""Coverage-guided search over fault schedules in the simulator
(``kraftwerk explore``).

A random seed reaches a rare protocol state only by luck; the search keeps
every schedule that reached a state no earlier run reached and spends its
runs on variations of those. States are read from the nodes' traces, the
protocol's own words (:func:`states`): per partition the ISR size, ELR
size, LastKnownELR size, leader recovery state and whether it has a leader,
as the controllers recorded them; each election's kind; each node stop's
reason (an unclean shutdown, a power loss); each truncation's reason; the
leaders' ISR states (committed, pending shrink or expand, and the maximal
ISR beside it). Nothing in it knows a variant or a bug.

``signal`` chooses what counts as new: ``states`` (the above), ``branches``
(the arcs of ``reference_impl/core`` a run executed, ``harness.search.branches``:
measured only when the workers run pure Python, which the caller arranges)
or ``both``.

A schedule is the list of fault operations a run's test.json records
(``nemesis.replay``). A mutation (:func:`mutate`) adds a fault (a kind and
target of the generic mix, resolved when it starts), drops one, moves one
in time, or retargets one (another fault of the mix of the same kind, its
target resolved anew: never a target the mix leaves out, such as a
majority's power loss).
Each run uses a new seed, so the clients' load varies too. The search stops
at the first invalid run, which stays as a run directory that
``kraftwerk sim --schedule RUN_DIR/test.json`` replays.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.config import TestConfig
from harness.lifecycle.runner import run_seed
from harness.rundir.trust import trusted_dir
from harness.search.branches import Arcs
from nemesis.faults import GENERIC, FaultSpec, expand, parse

Schedule = list[dict[str, Any]]

#: what a run may reach that the search keeps it for
SIGNALS = ("states", "branches", "both")


def _trace_events(run_dir: Path) -> Iterator[dict[str, Any]]:
    for f in sorted((run_dir / "nodes").glob("*/trace.jsonl")):
        with f.open() as fh:
            for line in fh:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def states(events: Iterator[dict[str, Any]]) -> set[str]:
    """The protocol states a run's traces show, as short strings."""
    out: set[str] = set()
    for e in events:
        kind = e.get("kind")
        if kind == "partition_metadata" and e.get("node", 0) > 100:
            out.add(f"partition isr={len(e.get('isr') or ())} elr={len(e.get('elr') or ())} "
                    f"lkelr={len(e.get('last_known_elr') or ())} recovery={e.get('recovery_state')} "
                    f"leader={'yes' if e.get('leader', -1) >= 0 else 'no'}")
        elif kind == "election":
            out.add(f"election {e.get('data_kind')}")
        elif kind == "node_stop":
            out.add(f"stop {e.get('reason')}" + (" lost-entries" if e.get("lost_entries") else ""))
        elif kind == "truncate":
            out.add(f"truncate {e.get('reason')}")
        elif kind == "isr":
            out.add(f"leader-isr {e.get('state')} isr={len(e.get('isr') or ())} "
                    f"maximal={len(e.get('maximal_isr') or ())}")
        elif kind in ("broker_fenced", "node_halt", "loaded"):
            out.add(kind)
    return out


def pairs(schedule: Schedule) -> list[tuple[int, int | None]]:
    """(start index, its stop's index or None) for each fault of a
    schedule: a stop closes the open start of its fault name."""
    open_: dict[str, int] = {}
    out: list[tuple[int, int | None]] = []
    for i, e in enumerate(schedule):
        if e["f"].startswith("start-"):
            if e["fault"] in open_:
                out.append((open_.pop(e["fault"]), None))
            open_[e["fault"]] = i
        elif e["fault"] in open_:
            out.append((open_.pop(e["fault"]), i))
    out.extend((i, None) for i in open_.values())
    return sorted(out)


#: what a mutation adds by default: every generic fault
GENERIC_MIX: tuple[FaultSpec, ...] = expand(GENERIC)


def _fresh(spec: FaultSpec, at_ms: int, target: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"at_ms": at_ms, "f": f"start-{spec.op_name}", "fault": spec.name}
    if target is not None:
        entry["target"] = target
    return entry


def mutate(schedule: Schedule, rng: random.Random, horizon_ms: int,
           mix: tuple[FaultSpec, ...] = GENERIC_MIX) -> Schedule:
    """One mutation of ``schedule``: add, drop, move or retarget a fault
    (a recorded entry names its fault, which is parsed to find its kind)."""
    s = [dict(e) for e in schedule]
    ps = pairs(s)
    op = rng.choice(("add", "add", "drop", "move", "retarget")) if ps else "add"
    if op == "add":
        spec = rng.choice(mix)
        at = rng.randrange(0, max(1, horizon_ms - 1000))
        dur = rng.randint(300, max(400, min(20_000, horizon_ms - at)))
        s += [_fresh(spec, at), {"at_ms": min(horizon_ms, at + dur), "f": f"stop-{spec.op_name}",
                                 "fault": spec.name}]
    else:
        i, j = rng.choice(ps)
        if op == "drop":
            s = [e for k, e in enumerate(s) if k not in (i, j)]
        elif op == "move":
            shift = rng.randint(-5000, 5000)
            for k in (i, j):
                if k is not None:
                    s[k]["at_ms"] = max(0, min(horizon_ms, s[k]["at_ms"] + shift))
        else:  # another fault of the mix of the same kind, its target resolved anew
            recorded = parse(s[i]["fault"])
            spec = rng.choice([n for n in mix if n.kind == recorded.kind] or [recorded])
            s[i] = _fresh(spec, s[i]["at_ms"], spec.target or rng.choice(spec.targets()))
            if j is not None:
                s[j] = {**s[j], "fault": spec.name}
    s.sort(key=lambda e: e["at_ms"])
    return s


@dataclass
class Outcome:
    """One run of the search, as the worker reports it."""

    seed: int
    valid: Any
    states: set[str]
    schedule: Schedule
    run_dir: str | None
    anomalies: list[str] = field(default_factory=list)
    error: str | None = None


def run_one(cfg: TestConfig, seed: int, schedule: Schedule | None, keep_dir: str,
            signal: str = "states") -> Outcome:
    """Run one seed (with ``schedule`` replayed, else the configuration's
    own nemesis) in a scratch directory; keep the run directory only if the
    run is invalid or could not run. Its states are the ``signal``'s."""
    scratch = Path(tempfile.mkdtemp(prefix="kraftwerk-explore-"))
    try:
        if schedule is not None:
            sched_file = scratch / "schedule.json"
            sched_file.write_text(json.dumps(schedule))
            cfg = cfg.replaying(str(sched_file))
        arcs = Arcs()
        try:
            if signal == "states":
                res = run_seed(cfg, seed, scratch / "runs")
            else:
                with arcs:
                    res = run_seed(cfg, seed, scratch / "runs")
        except Exception as e:  # a harness bug: report it, keep searching
            return Outcome(seed, "unknown", set(), schedule or [], None, error=f"{type(e).__name__}: {e}")
        run_dir = Path(res["run_dir"])
        found = states(_trace_events(run_dir)) if signal != "branches" else set()
        found |= arcs.names()
        recorded = json.loads((run_dir / "test.json").read_text()).get("schedule") or []
        kept = None
        if res.get("valid") is False:
            dest = trusted_dir(Path(keep_dir) / cfg.name, "--out")
            kept = str(shutil.move(str(run_dir), str(dest / run_dir.name)))
        return Outcome(seed, res.get("valid"), found, recorded, kept, list(res.get("anomaly_types") or []))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def parse_budget(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h`` -> seconds."""
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], None)
    try:
        value = float(t[:-1] if mult else t) * (mult or 1)
    except ValueError:
        raise ValueError(f"--budget {text!r}: want seconds or a number with s, m or h (10m)") from None
    if value <= 0:
        raise ValueError(f"--budget {text!r} must be positive")
    return value


@dataclass
class Search:
    """The search's state: the corpus of schedules kept, the states seen."""

    cfg: TestConfig
    budget_s: float
    keep_dir: str
    first_seed: int = 0
    signal: str = "states"
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    corpus: list[Schedule] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    tried: int = 0
    curve: list[tuple[float, int, int]] = field(default_factory=list)
    #: runs with no verdict (``unknown``, or the run itself failed), and the
    #: first such run's error: a search that saw them cannot say "all valid"
    unknown: int = 0
    first_error: str | None = None
    #: what a mutation may add (a hunt's: the faults the real db can make too)
    mix: tuple[FaultSpec, ...] = GENERIC_MIX

    def next_job(self) -> Schedule | None:
        """A new run: a random schedule while the corpus is small (the
        configuration's own nemesis, seeded), then mutants of kept ones."""
        if not self.corpus or self.rng.random() < 0.2:
            return None
        parent = self.rng.choice(self.corpus)
        child = parent
        for _ in range(self.rng.randint(1, 3)):
            child = mutate(child, self.rng, int(self.cfg.time_limit * 1000), self.mix)
        return child

    def absorb(self, o: Outcome, t: float) -> bool:
        """Keep a run's schedule if it reached a new state; True if new."""
        self.tried += 1
        if o.valid is not True and o.valid is not False:
            self.unknown += 1
            self.first_error = self.first_error or (f"seed {o.seed}: {o.error}" if o.error else None)
        new = o.states - self.seen
        if new:
            self.seen |= new
            self.corpus.append(o.schedule)
        self.curve.append((t, self.tried, len(self.seen)))
        return bool(new)

    def covered(self, sep: str = "  ", width: bool = True) -> str:
        """What the search has reached, in the signal's words."""
        arcs = sum(1 for s in self.seen if s.startswith("branch "))
        n, m = (f"{len(self.seen) - arcs:4d}", f"{arcs:5d}") if width else (str(len(self.seen) - arcs), str(arcs))
        parts = {"states": f"states covered {n}", "branches": f"branches covered {m}"}
        return sep.join(v for k, v in parts.items() if self.signal in (k, "both"))

    def run(self, pool: ProcessPoolExecutor, jobs: int, say: Callable[[str], None]) -> Outcome | None:
        t0 = time.monotonic()
        seed = self.first_seed
        last_print = -1.0
        pending: dict[Any, int] = {}
        found: Outcome | None = None
        while found is None and (time.monotonic() - t0 < self.budget_s or pending):
            while len(pending) < jobs and time.monotonic() - t0 < self.budget_s:
                pending[pool.submit(run_one, self.cfg, seed, self.next_job(), self.keep_dir, self.signal)] = seed
                seed += 1
            done = next(iter(_wait_any(pending)))
            pending.pop(done)
            o = done.result()
            elapsed = time.monotonic() - t0
            self.absorb(o, elapsed)
            if o.valid is False:
                found = o
            if elapsed - last_print >= 10 or found is not None:
                last_print = elapsed
                say(f"{elapsed:6.0f}s  seeds tried {self.tried:5d}  {self.covered()}  corpus {len(self.corpus)}")
        for f in pending:  # the budget is over or a run failed: let the rest go
            f.cancel()
        return found


def _wait_any(pending: dict[Any, int]) -> set[Any]:
    done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
    return done
