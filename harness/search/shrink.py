"""Shrinking a failing simulator run (``kraftwerk shrink RUN_DIR``): delta
debugging (Zeller and Hildebrandt's ddmin) over its fault schedule, then over
its client load, replayed deterministically (``nemesis.replay``), down to a
run that still fails the same way.

The units of the schedule are its faults: a start and the stop that heals
it go together (:func:`harness.search.explore.pairs`). A candidate "fails the same
way" when it is invalid and shows every one of the original's headline
anomalies (:func:`signature`): acknowledged writes lost and the invariant
violations, or, if it had neither, all of its anomaly types. After the
schedule, the load is cut while the failure stays: the workload ends soon
after the last fault, then fewer clients, then a lower rate.

The result is a schedule file with the run's settings (the shape of a
test.json, which ``kraftwerk sim --schedule FILE`` replays) and a run
directory of its replay, whose report tells the minimal story.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.config import TestConfig
from harness.lifecycle.runner import run_seed_safely
from harness.search.explore import pairs

#: anomalies that say what went wrong, rather than what followed from it
HEADLINE = ("lost-acked-write",)


def signature(result: dict[str, Any]) -> frozenset[str]:
    """The anomalies a shrunk run must still show."""
    types = set(result.get("anomaly_types") or ())
    inv = set(((result.get("invariants") or {}).get("counts") or {}))
    head = (types & set(HEADLINE)) | (types & inv)
    return frozenset(head or types)


def units(schedule: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The schedule's faults, each its start and (if any) its stop."""
    return [[schedule[i]] + ([schedule[j]] if j is not None else []) for i, j in pairs(schedule)]


def flatten(us: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return sorted((e for u in us for e in u), key=lambda e: e["at_ms"])


def ddmin(items: list[Any], fails: Callable[[list[list[Any]]], list[bool]]) -> list[Any]:
    """A 1-minimal sublist of ``items`` on which the failure persists.
    ``fails`` tests several candidates at once (in parallel) and answers
    for each."""
    n = 2
    while len(items) >= 2:
        size = len(items) // n
        chunks = [items[i:i + size] for i in range(0, len(items), size)] if size else [[x] for x in items]
        subsets = chunks
        complements = [[x for k, c in enumerate(chunks) if k != i for x in c] for i in range(len(chunks))]
        answers = fails(subsets + complements)
        hit = next((i for i, a in enumerate(answers) if a), None)
        if hit is not None and hit < len(subsets):
            items, n = subsets[hit], 2
        elif hit is not None:
            items, n = complements[hit - len(subsets)], max(n - 1, 2)
        elif n >= len(items):
            break
        else:
            n = min(len(items), n * 2)
    return items


@dataclass
class Shrinker:
    """Replays candidates of one failing run in worker processes."""

    run_dir: Path
    cfg: TestConfig
    seed: int
    target: frozenset[str]
    pool: ProcessPoolExecutor
    jobs: int
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kraftwerk-shrink-")))
    runs: int = 0

    def __enter__(self) -> "Shrinker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the candidates' schedule files: nothing of a search outlives it."""
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _cfg(self, schedule: list[dict[str, Any]], load: dict[str, Any], k: int) -> TestConfig:
        f = self.scratch / f"candidate-{self.runs}-{k}.json"
        f.write_text(json.dumps(schedule))
        return self.cfg.replaying(str(f), **load)

    def fails(self, candidates: list[tuple[list[dict[str, Any]], dict[str, Any]]]) -> list[bool]:
        """Replay each (schedule, load) candidate; True where it fails the same way."""
        futs = [self.pool.submit(run_seed_safely, self._cfg(s, load, k), self.seed, None)
                for k, (s, load) in enumerate(candidates)]
        self.runs += len(futs)
        out = []
        for f in futs:
            r = f.result()
            out.append(r.get("valid") is False and self.target <= set(r.get("anomaly_types") or ()))
        return out

    def schedule(self, schedule: list[dict[str, Any]]) -> list[dict[str, Any]]:
        us = units(schedule)
        kept = ddmin(us, lambda cands: self.fails([(flatten(c), {}) for c in cands]))
        return flatten(kept)

    def load(self, schedule: list[dict[str, Any]]) -> dict[str, Any]:
        """Cut the client load while the failure stays: a shorter workload,
        then fewer clients, then a lower rate (each kept only if it fails)."""
        cfg, load = self.cfg, {}
        last = max((e["at_ms"] for e in schedule), default=0) / 1000
        steps = [("time_limit", t) for t in sorted({round(last + 2, 1), round(last + 5, 1)}) if t < cfg.time_limit]
        steps += [("concurrency", c) for c in (1, 2, cfg.concurrency // 2) if 0 < c < cfg.concurrency]
        steps += [("rate", cfg.rate / d) for d in (4, 2)]
        for name, value in steps:
            if name in load and load[name] <= value:
                continue
            if self.fails([(schedule, {**load, name: value})])[0]:
                load[name] = value
        return load
