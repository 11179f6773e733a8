"""Running a campaign: its seeds, then the cell table and the page.

Work units are (cell, consecutive seeds) commands (:mod:`.plan`). They run

* on this machine, ``parallel`` at a time (simulator cells: each a process
  of its own; real cells: one at a time, since a backend hosts one cluster
  per run here), with a live progress line; or
* as Spark tasks (``runs_on="spark"``): each task runs its command on an
  executor, which writes the run directories to the campaign directory (a
  path every executor must see), so a budget of thousands of simulator seeds
  spreads over a cluster's executors. Seeds are deterministic, so the
  verdicts are the same either way.

Then :func:`checkers.aggregate.collect_rows` reads every run directory
(inline or on executors) and the cells are written as ``campaign.json``
(the report site's format, docs/architecture.md "Campaign summary"),
``cells.parquet`` / ``runs.parquet``, and the campaign's page.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from checkers.aggregate import cell_table, collect_rows, write_parquet
from harness.campaign.plan import Cell, cells, command, done_seeds, seed_ranges
from harness.campaign.spec import CampaignSpec
from harness.errors import HarnessError
from harness.report.campaign import FORMAT, render_campaign, write_campaign

#: at most this many seeds per command, so progress and resumption stay fine-grained
CHUNK = 4


@dataclass
class Unit:
    cell: Cell
    first: int
    last: int

    @property
    def seeds(self) -> int:
        return self.last - self.first + 1


@dataclass
class Progress:
    """What the live display shows, updated as units finish."""

    total_runs: int
    total_cells: int
    done_runs: int = 0
    skipped_runs: int = 0
    anomalies: int = 0
    failures: list[str] = field(default_factory=list)
    cell_left: dict[int, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def cells_done(self) -> int:
        return sum(1 for n in self.cell_left.values() if n <= 0)

    def eta_s(self) -> float | None:
        ran = self.done_runs - self.skipped_runs
        left = self.total_runs - self.done_runs
        if ran <= 0:
            return None
        return (time.monotonic() - self.started) / ran * left

    def line(self) -> str:
        eta = self.eta_s()
        return (f"cells {self.cells_done}/{self.total_cells}  runs {self.done_runs}/{self.total_runs}  "
                f"anomalies {self.anomalies}" + (f"  eta {eta:.0f}s" if eta is not None else ""))


def plan_units(spec: CampaignSpec, out: Path) -> tuple[list[Cell], list[Unit], int]:
    """The cells, the units still to run, and how many runs are already done."""
    cs = cells(spec)
    units: list[Unit] = []
    already = 0
    for c in cs:
        done = done_seeds(out / c.test_name)
        todo = [s for s in spec.seeds if s not in done]
        already += len(spec.seeds) - len(todo)
        for first, last in seed_ranges(todo):
            for a in range(first, last + 1, CHUNK):
                units.append(Unit(c, a, min(last, a + CHUNK - 1)))
    return cs, units, already


def run_unit(argv: list[str], cwd: str) -> dict[str, Any]:
    """Run one command; its JSON results, or the error it ended with."""
    env = {**os.environ, "KRAFTWERK_DEBUG": ""}
    p = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env)
    try:
        out = json.loads(p.stdout) if p.stdout.strip() else []
    except ValueError:
        out = []
    results = out if isinstance(out, list) else [out]
    err = "" if p.returncode in (0, 1, 3) else (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return {"exit": p.returncode, "results": results, "error": err}


def _spark_run(units: list[Unit], out: Path, spark_master: str | None) -> list[dict[str, Any]]:
    from checkers.pipeline import get_spark

    spark = get_spark(spark_master)
    argvs = [command(u.cell, u.first, u.last, out) for u in units]
    cwd = os.getcwd()
    rdd = spark.sparkContext.parallelize(list(enumerate(argvs)), max(1, len(argvs)))
    got = dict(rdd.map(lambda ia: (ia[0], run_unit(ia[1], cwd))).collect())
    return [got[i] for i in range(len(argvs))]


def run_units(units: list[Unit], out: Path, parallel: int, progress: Progress,
              on_change: Callable[[Progress], None], runs_on: str = "local",
              spark_master: str | None = None) -> None:
    def account(u: Unit, res: dict[str, Any]) -> None:
        progress.done_runs += u.seeds
        progress.cell_left[u.cell.index] -= u.seeds
        progress.anomalies += sum(1 for r in res["results"] if r.get("valid") is False)
        if res["error"]:
            progress.failures.append(f"{u.cell.id} seeds {u.first}..{u.last}: {res['error']}")
        on_change(progress)

    if runs_on == "spark":
        for u, res in zip(units, _spark_run(units, out, spark_master)):
            account(u, res)
        return
    real = [u for u in units if u.cell.runtime == "real"]
    sim = [u for u in units if u.cell.runtime != "real"]
    cwd = os.getcwd()
    with ThreadPoolExecutor(max(1, parallel)) as pool:
        futs = {pool.submit(run_unit, command(u.cell, u.first, u.last, out), cwd): u for u in sim}
        for u in real:  # one cluster at a time on this machine, beside the simulator's processes
            account(u, run_unit(command(u.cell, u.first, u.last, out), cwd))
        for f in as_completed(futs):
            account(futs[f], f.result())


def summarise(spec: CampaignSpec, cs: list[Cell], out: Path, engine: str, spark_master: str | None,
              recheck: bool, parquet: bool) -> dict[str, Any]:
    """campaign.json (+ Parquet, + the page) from the run directories."""
    runs = []
    for c in cs:
        done = done_seeds(out / c.test_name)
        runs += [(c.id, str(done[s])) for s in spec.seeds if s in done]
    rows = collect_rows(runs, engine, spark_master, recheck)
    table = cell_table(rows, [c.id for c in cs])
    by_id = {c.id: c for c in cs}
    for row in table:
        c = by_id[row["id"]]
        row["params"] = {k: str(v) for k, v in c.params.items()}
        row["test_name"] = c.test_name
        row["run_dirs"] = [os.path.relpath(d, out) for d in row["run_dirs"]]
        row["invalid_runs"] = [os.path.relpath(d, out) for d in row["invalid_runs"]]
    campaign = {"format": FORMAT, "name": spec.name, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "parameters": list(spec.axes), "spec": {"seeds": [spec.seeds[0], spec.seeds[-1]],
                                                         "fixed": spec.fixed, "matrix": spec.axes},
                "engine": engine, "cells": table}
    write_campaign(out, campaign)
    if parquet:
        try:
            write_parquet(rows, table, out, spark_master)
        except Exception as e:  # Parquet is a convenience: the JSON table stands without it
            raise HarnessError(f"campaign: writing Parquet failed: {type(e).__name__}: {e}") from None
    render_campaign(out)
    return campaign


def verdict(campaign: dict[str, Any]) -> bool | str:
    cs = campaign["cells"]
    if any(c["invalid"] for c in cs):
        return False
    if not cs or any(c["unknown"] or not c["runs"] for c in cs):
        return "unknown"
    return True
