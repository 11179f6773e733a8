"""Running a campaign: its seeds, then the cell table and the page.

Work units are (cell, consecutive seeds). Each runs the cell's
configuration (:attr:`.plan.Cell.config`, a validated ``TestConfig``)
through the runner a single run uses (``run_seed`` for the simulator,
``run_test`` for real processes) in a child process of its own
(:func:`isolated`), so a run that crashes its process or hangs costs its
unit, never the campaign: the unit's error is kept and the others go on.
Units run

* on this machine, ``parallel`` at a time (simulator cells: each a process
  of its own; real cells: one at a time, since a backend hosts one cluster
  per run here), with a live progress line; or
* as Spark tasks (``runs_on="spark"``): each task runs its unit on an
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

import multiprocessing
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from checkers.aggregate import cell_table, collect_rows, write_parquet
from checkers.pipeline import get_spark
from harness.campaign.plan import Cell, cells, done_seeds, seed_ranges
from harness.campaign.spec import CampaignSpec
from harness.config import TestConfig
from harness.errors import HarnessError
from harness.lifecycle.runner import run_seed_safely, run_test
from harness.report.campaign import FORMAT, render_campaign, write_campaign
from harness.rundir.store import point_latest

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

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first, self.last + 1))


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


#: seconds a run may take beyond its own limits before it counts as hung
HANG_GRACE_S = 600.0


def _child(send: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """A unit's child process: ``fn(*args)``'s value, or its error, sent back."""
    try:
        send.send(("ok", fn(*args)))
    except BaseException as e:  # noqa: BLE001  the unit's error, one line, for the campaign to keep
        send.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        send.close()


def isolated(fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> tuple[Any, str]:
    """``fn(*args)`` in a child process of its own (spawned, with
    ``PYTHONHASHSEED=0`` as the simulator's workers): its value and ``""``,
    or ``None`` and a one-line error if it raised, died or gave no answer
    within ``timeout_s`` (then it is sent SIGTERM, which tears a real run's
    cluster down, and killed a minute later)."""
    os.environ["PYTHONHASHSEED"] = "0"
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(send, fn, args))
    p.start()
    send.close()
    try:
        if not recv.poll(timeout_s):
            p.terminate()
            p.join(60)
            if p.is_alive():
                p.kill()
            return None, f"no answer after {timeout_s:.0f}s: the run hung and was stopped"
        status, value = recv.recv()
    except EOFError:
        p.join()
        return None, f"the run's process died (exit {p.exitcode})"
    finally:
        recv.close()
    p.join()
    return (value, "") if status == "ok" else (None, value)


def _sim_seeds(cfg: TestConfig, seeds: list[int], out: str) -> list[dict[str, Any]]:
    """A simulator unit (in its child): each seed as ``kraftwerk sim`` runs it."""
    results = [run_seed_safely(cfg, s, out) for s in seeds]
    dirs = [r["run_dir"] for r in results if r.get("run_dir")]
    if dirs:
        point_latest(out, Path(dirs[-1]))
    return results


def _real_seeds(cfg: TestConfig, seeds: list[int], out: str) -> list[dict[str, Any]]:
    """A real-process unit (in its child): each seed as ``kraftwerk run``
    runs it, a SIGTERM tearing the cluster down as Ctrl-C does."""
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    results = []
    for s in seeds:
        o = run_test(cfg.model_copy(update={"seed": s, "out": out}), progress=False, report=True)
        results.append({"run_dir": str(o.run_dir), **o.result})
    return results


def run_unit(cell: Cell, seeds: list[int], out: Path) -> dict[str, Any]:
    """Run one unit's seeds in a child process; each seed's results, and
    the error the unit ended with (a seed's own, or the child's)."""
    cfg = cell.config
    fn = _sim_seeds if cell.runtime == "sim" else _real_seeds
    per_seed = cfg.setup_timeout + cfg.time_limit + cfg.final_read_timeout + HANG_GRACE_S
    results, err = isolated(fn, (cfg, seeds, str(out)), per_seed * len(seeds))
    results = results or []
    err = err or next((str(r["error"]) for r in results if r.get("error")), "")
    return {"results": results, "error": err}


def _spark_run(units: list[Unit], out: Path, spark_master: str | None) -> list[dict[str, Any]]:
    spark = get_spark(spark_master)
    jobs = [(u.cell, list(range(u.first, u.last + 1))) for u in units]
    rdd = spark.sparkContext.parallelize(list(enumerate(jobs)), max(1, len(jobs)))
    got = dict(rdd.map(lambda ij: (ij[0], run_unit(ij[1][0], ij[1][1], out))).collect())
    return [got[i] for i in range(len(jobs))]


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
    with ThreadPoolExecutor(max(1, parallel)) as pool:
        futs = {pool.submit(run_unit, u.cell, u.seed_list, out): u for u in sim}
        for u in real:  # one cluster at a time on this machine, beside the simulator's processes
            account(u, run_unit(u.cell, u.seed_list, out))
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
