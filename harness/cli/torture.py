"""``kraftwerk torture --budget 45m``: seeds within a time budget, held against expected verdicts."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click
from harness.cli.output import console
from rich.markup import escape

from harness.campaign.torture import (Expectation, details, junit_xml, load_expectations, summary_line, surprise,
                                     torture)
from harness.errors import UsageError
from harness.report.torture import render_torture
from harness.rundir.trust import trusted_dir


def _page_row(e: Expectation) -> dict[str, Any]:
    state = "ok" if e.met() else "undecided" if e.undecided() else "surprise"
    return {"name": e.name, "expect": e.expect, "runtime": e.runtime,
            "within": e.within if e.expect == "caught" else None,
            "settings": ", ".join(f"{k}={v}" for k, v in e.settings.items()), "seeds_run": e.seeds_run,
            "state": state, "errors": list(e.errors), "unknown": list(e.unknown), "seconds": e.seconds,
            "invalid": [{"seed": s, "run_dir": d, "replay": e.replay(s)} for s, d in e.invalid]}


def parse_budget(text: str) -> float:
    """``90s``, ``45m``, ``2h`` or plain seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--budget {text!r}: give a duration such as 90s, 45m or 2h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


@click.command("torture")
@click.option("--budget", required=True, help="Time to spend, e.g. 3m, 45m, 2h.")
@click.option("--runtime", type=click.Choice(["sim", "real", "both"]), default="sim", show_default=True,
              help="The simulator for breadth, real processes for depth, or both.")
@click.option("--expect", "expect_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A YAML table of expectations instead of the built-in one.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write JUnit XML here: one testcase per expectation.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True)
@click.option("--jobs", type=click.IntRange(1, 64), default=None, help="Seeds run at once (default: usable CPUs).")
@click.option("--first-seed", type=click.IntRange(0), default=1, show_default=True)
def torture_cmd(budget: str, runtime: str, expect_file: Path | None, junit: Path | None, out: Path,
                jobs: int | None, first_seed: int) -> None:
    """Hold the protocol to its expected verdicts for a time budget.

    \b
    Built-in expectations: the faithful protocol stays valid under every
    generic fault; each historical variant (kip101=off, kip966=off,
    unclean_election=on, strict_isr_expand=off) is caught within the seeds
    it has always taken (undecided when the budget ends sooner). Every
    expectation gets at least one round of seeds. Exit 0 when nothing
    contradicts an expectation, 1 on any surprise (each failing run is named
    with the command that replays it).
    """
    seconds = parse_budget(budget)
    exps = load_expectations(expect_file, runtime)
    err = console(stderr=True)
    base = trusted_dir(trusted_dir(out, "--out") / "torture", "--out")
    n = jobs or max(1, len(os.sched_getaffinity(0)))
    err.print(f"torture: {len(exps)} expectations, budget {seconds:.0f}s, {n} seeds at a time, runs in {escape(str(base))}")
    torture(exps, seconds, base, n, lambda e: err.print(escape(summary_line(e))), first_seed)
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_bytes(junit_xml(exps))
    pages = [base / "index.html"] + ([junit.with_suffix(".html")] if junit is not None else [])
    for page in pages:
        render_torture(page, [_page_row(e) for e in exps], junit)
    err.print(f"torture: page {escape(str(pages[-1]))}")
    for e in exps:
        state = "ok" if e.met() else "undecided" if e.undecided() else "SURPRISE"
        click.echo(f"{state:<9} {summary_line(e)}")
        if e.surprised():
            err.print(f"[red]SURPRISE[/] {escape(surprise(e))}")
            for line in details(e)[1:]:
                click.echo(line)
    sys.exit(1 if any(e.surprised() for e in exps) else 0)


def register(group: click.Group) -> None:
    group.add_command(torture_cmd)
