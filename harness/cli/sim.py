"""``kraftwerk sim``: the protocol under faults in the deterministic simulator.

Each seed is one run directory (``<out>/<test>/<stamp>-<seed>/``) with the same
files a real run has, so every checker and report reads both. Seeds run in
parallel worker processes (``--jobs``); workers start with ``PYTHONHASHSEED=0``
so that nothing that iterates a set of strings can make two replays differ.

Exit codes: 0 every run valid, 1 anomalies / lost acked writes / invariant
violations, 2 bad input (one line on stderr), 3 some run could not be judged
(a final read never covered the acknowledged offsets), 4 harness error.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.cli.options import config_from_flags, recorded_settings, test_options
from harness.cli.output import console
from harness.config import TestConfig
from harness.errors import EXIT_HARNESS, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, UsageError
from harness.lifecycle.runner import preflight, run_seed_safely
from harness.report.render import render_summary_quietly
from harness.report.replay import replay_command
from harness.rundir.store import point_latest


def parse_seeds(seed: int | None, seeds: str | None) -> list[int]:
    if seed is not None and seeds is not None:
        raise UsageError("give --seed or --seeds, not both")
    if seeds is not None:
        a, sep, b = seeds.partition("..")
        try:
            lo, hi = int(a), int(b) if sep else int(a)
        except ValueError:
            raise UsageError(f"--seeds {seeds!r} must look like A..B (integers)") from None
        if lo < 0 or hi < lo:
            raise UsageError(f"--seeds {seeds!r}: need 0 <= A <= B")
        return list(range(lo, hi + 1))
    if seed is None:
        return [0]
    if seed < 0:
        raise UsageError(f"--seed must not be negative (got {seed})")
    return [seed]


def summarize(r: dict[str, Any]) -> dict[str, Any]:
    d = r.get("durability") or {}
    return {
        "seed": r.get("seed"),
        "valid": r.get("valid"),
        "anomaly_types": r.get("anomaly_types", []),
        "acks_all": {k: d.get("acks=all", {}).get(k) for k in ("acked", "lost")},
        "acks_1": {k: d.get("acks=1", {}).get(k) for k in ("acked", "lost")},
        "violations": (r.get("invariants") or {}).get("counts", {}),
        "faults": (r.get("stats") or {}).get("faults"),
        "sim_speed": (r.get("stats") or {}).get("sim_speed"),
        "run_dir": r.get("run_dir"),
        **({"error": r["error"]} if r.get("error") else {}),
        **({"cause": r["cause"]} if r.get("cause") else {}),
    }


def exit_code(results: list[dict[str, Any]]) -> int:
    """4 if a run failed to run, 1 if any run is invalid, 3 if some run could
    not be judged (e.g. a final read never completed), else 0."""
    if any(r.get("error") for r in results):
        return EXIT_HARNESS
    if any(r.get("valid") is False for r in results):
        return EXIT_INVALID
    if all(r.get("valid") is True for r in results):
        return EXIT_VALID
    return EXIT_UNKNOWN


def default_jobs(seeds: int) -> int:
    """One worker per CPU this process may use (affinity, not the host's
    count), at most one per seed."""
    return max(1, min(len(os.sched_getaffinity(0)), seeds))


def make_pool(jobs: int) -> ProcessPoolExecutor:
    """Worker processes for seeds, started with PYTHONHASHSEED=0."""
    os.environ["PYTHONHASHSEED"] = "0"
    return ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn"))


def run_seeds(cfg: TestConfig, seeds: list[int], out: str | None, jobs: int, progress: bool = False,
              pool: ProcessPoolExecutor | None = None, report: bool | str = False) -> list[dict[str, Any]]:
    """Run every seed (in ``pool`` if given, so callers running many batches
    start the workers once); results in seed order. ``report``: True for
    each run's whole report, ``"summary"`` for its summary page (the story
    and the tables; the plots are drawn on first view or by ``kraftwerk
    report``), False for none."""
    results: dict[int, dict[str, Any]] = {}
    inprocess = pool is None and jobs <= 1 and os.environ.get("PYTHONHASHSEED") == "0"
    bar = _Bar(len(seeds)) if progress else None
    whole = report is True
    pages = report == "summary"
    try:
        if inprocess:
            for s in seeds:
                results[s] = run_seed_safely(cfg, s, out, whole)
                if pages and results[s].get("run_dir"):
                    _page_failed(results[s], render_summary_quietly(results[s]["run_dir"]))
                if bar:
                    bar.advance(results[s])
        else:
            ex = pool if pool is not None else make_pool(jobs)
            try:
                _run_in(ex, cfg, seeds, out, whole, pages, results, bar)
            finally:
                if pool is None:
                    ex.shutdown()
    finally:
        if bar:
            bar.close()
    return [results[s] for s in seeds]


def _run_in(ex: ProcessPoolExecutor, cfg: TestConfig, seeds: list[int], out: str | None, whole: bool, pages: bool,
            results: dict[int, dict[str, Any]], bar: "_Bar | None") -> None:
    """The seeds in the pool; each finished run's summary page is drawn in
    the pool too, while later seeds run."""
    futs = {ex.submit(run_seed_safely, cfg, s, out, whole): s for s in seeds}
    drawing = {}
    for f in as_completed(futs):
        s = futs[f]
        try:
            results[s] = f.result()
        except Exception as e:
            results[s] = {"seed": s, "valid": "unknown", "error": f"worker died: {type(e).__name__}: {e}"}
        if pages and results[s].get("run_dir"):
            drawing[ex.submit(render_summary_quietly, results[s]["run_dir"])] = s
        if bar:
            bar.advance(results[s])
    for f in as_completed(drawing):
        try:
            _page_failed(results[drawing[f]], f.result())
        except Exception as e:  # noqa: BLE001 - a page is best effort: the verdict is on disk
            _page_failed(results[drawing[f]], f"{type(e).__name__}: {e}")


def _page_failed(result: dict[str, Any], err: str | None) -> None:
    if err:
        result["report_error"] = err


class _Bar:
    def __init__(self, total: int) -> None:
        self.p = Progress(TextColumn("[bold]sim"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                          TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        self.bad = 0
        self.task = self.p.add_task("sim", total=total, status="")
        self.p.start()

    def advance(self, r: dict[str, Any]) -> None:
        if r.get("valid") is not True:
            self.bad += 1
        self.p.update(self.task, advance=1, status=f"[red]{self.bad} invalid[/]" if self.bad else "[green]all valid[/]")

    def close(self) -> None:
        self.p.stop()


def print_table(results: list[dict[str, Any]]) -> None:
    modes = sorted({str(r.get("stats", {}).get("accelerator", "?")) for r in results})
    t = Table(title=f"kraftwerk sim ({', '.join(modes)})")
    for col in ("seed", "valid", "acks=all acked/lost", "acks=1 acked/lost", "violations", "faults", "x realtime",
                "anomalies", "cause"):
        t.add_column(col)
    for r in results:
        s = summarize(r)
        v = s["valid"]
        vs = "[green]yes[/]" if v is True else ("[red]NO[/]" if v is False else f"[yellow]{v}[/]")
        viol = sum((s["violations"] or {}).values())
        t.add_row(str(s["seed"]), vs, f"{s['acks_all']['acked']}/{s['acks_all']['lost']}",
                  f"{s['acks_1']['acked']}/{s['acks_1']['lost']}", str(viol), str(s["faults"]), str(s["sim_speed"]),
                  escape(s.get("error") or ", ".join(s["anomaly_types"])), escape(_short_cause(s.get("cause"))))
    console().print(t)


def _short_cause(cause: str | None, width: int = 60) -> str:
    """A verdict's cause for the table's column (whole on the line below it)."""
    if not cause:
        return ""
    return cause if len(cause) <= width else cause[: width - 1] + "…"


def print_where(results: list[dict[str, Any]], pages: bool) -> None:
    """Line per seed: where its run went (and its page), and for an invalid
    or unknown seed the command that replays it, so a log tells it all."""
    for r in results:
        d = r.get("run_dir")
        v = r.get("valid")
        verdict = "valid" if v is True else "INVALID" if v is False else "unknown"
        if not d:
            continue
        page = Path(d) / "index.html"
        where = f"seed {r.get('seed')}: {verdict}: {d}" + (f"  (report {page})" if pages and page.is_file() else "")
        click.echo(where)
        if r.get("cause"):
            click.echo(f"  cause: {r['cause']}")
        if v is not True:
            try:
                test = json.loads((Path(d) / "test.json").read_text())
            except (OSError, ValueError):
                continue
            click.echo(f"  replay: {replay_command(test, d)}")
        if r.get("report_error"):
            click.echo(f"  report failed: {r['report_error']}", err=True)


@click.command("sim")
@test_options
@click.option("--seeds", help="A range of seeds, A..B inclusive (instead of --seed; default seed 0).")
@click.option("--jobs", type=int, default=None,
              help="Seeds run in parallel worker processes (default: one per usable CPU, at most one per seed).")
@click.option("--report/--no-report", default=None,
              help="Write each run's whole HTML report (default: for --seed; with --seeds each run gets a summary "
                   "page, its plots drawn by `kraftwerk report` or on first view in `kraftwerk serve`).")
def sim_cmd(seeds: str | None, jobs: int | None, as_json: bool, report: bool | None, **flags: Any) -> int:
    """Run the reference implementation in the deterministic simulator.

    \b
    Examples:
      kraftwerk sim --seed 7 --nemesis partition,kill
      kraftwerk sim --seeds 0..199 --jobs 2 --variant kip101=off --nemesis kill,partition:primaries
    """
    seed_list = parse_seeds(flags.get("seed"), seeds)
    if flags.get("seed") is None and seeds is None and flags.get("schedule"):
        seed_list = [int(recorded_settings(flags["schedule"]).get("seed", 0))]  # a replay: the recorded run's
    if jobs is None:
        jobs = default_jobs(len(seed_list))
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1 (got {jobs})")
    cfg = config_from_flags("sim", {**flags, "seed": seed_list[0]})
    preflight(cfg)
    out = cfg.out
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: {e.strerror}") from None
    progress = not as_json and len(seed_list) > 1 and sys.stderr.isatty()
    # a seed given alone gets its whole report; a range of seeds a summary page each
    mode: bool | str = report if report is not None else (True if seeds is None else "summary")
    results = run_seeds(cfg, seed_list, out, jobs, progress=progress, report=mode)
    dirs = [r["run_dir"] for r in results if r.get("run_dir")]
    if dirs:
        point_latest(out, Path(dirs[-1]))
    if as_json:
        obj: Any = results[0] if len(results) == 1 else [summarize(r) for r in results]
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
    else:
        print_table(results)
        print_where(results, mode is not False)
        for r in results:
            if r.get("error"):
                click.echo(f"seed {r.get('seed')}: error: {r['error']}", err=True)
    return exit_code(results)


def register(group: click.Group) -> None:
    group.add_command(sim_cmd)
