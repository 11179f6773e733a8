"""``kraftwerk explore``: coverage-guided search over fault schedules in
the simulator (``harness.search.explore``), stopping at the first invalid run.

Exit codes: 0 the budget ran out with every run valid, 1 an invalid run was
found (its run directory is kept and the command that replays it printed),
2 bad input, 3 no invalid run but some gave no verdict (unknown, or the run
itself failed: the first error is printed).
"""

from __future__ import annotations

import os
from typing import Any

import click

from harness.cli.options import config_from_flags, test_options
from harness.cli.sim import default_jobs, make_pool
from harness.errors import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, UsageError
from harness.lifecycle.runner import preflight
from harness.search.explore import Search, parse_budget
from harness.rundir.trust import trusted_dir
from reference_impl.accel import ENV_PURE


@click.command("explore")
@test_options
@click.option("--budget", default="10m", show_default=True, help="Wall time to search: seconds, or 90s, 10m, 1h.")
@click.option("--jobs", type=int, default=None, help="Runs in parallel worker processes (default: usable CPUs).")
@click.option("--signal", type=click.Choice(["states", "branches", "both"]), default="states", show_default=True,
              help="What makes a run new: protocol states of its traces, branches (arcs) of reference_impl/core "
                   "it executed (runs pure Python, slower), or both.")
def explore_cmd(budget: str, jobs: int | None, signal: str, as_json: bool, **flags: Any) -> int:
    """Search fault schedules for protocol states not seen before, in the simulator.

    \b
    Examples:
      kraftwerk explore --budget 10m
      kraftwerk explore --variant kip966=off --budget 5m
      kraftwerk explore --signal both --budget 10m
    """
    try:
        budget_s = parse_budget(budget)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if flags.get("schedule") or flags.get("scenario"):
        raise UsageError("kraftwerk explore draws its own schedules: drop --schedule and --scenario")
    if not flags.get("nemesis"):
        flags["nemesis"] = "all"
    first_seed = flags.get("seed") or 0
    cfg = config_from_flags("sim", {**flags, "name": flags.get("name") or "explore"})
    preflight(cfg)
    jobs = default_jobs(1 << 10) if jobs is None else jobs
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1 (got {jobs})")
    trusted_dir(cfg.out, "--out")
    if signal != "states":
        # the compiled accelerator runs the core as C, whose lines no tracer
        # sees: the workers (spawned with this environment) run pure Python
        os.environ[ENV_PURE] = "1"
        click.echo("signal branches: the runs are pure Python (the compiled core hides its branches from the tracer)")
    search = Search(cfg, budget_s, cfg.out, first_seed=first_seed, signal=signal)
    with make_pool(jobs) as pool:
        found = search.run(pool, jobs, lambda line: click.echo(line))
    covered = search.covered(", ", width=False)
    click.echo(f"seeds tried {search.tried}, {covered}, corpus {len(search.corpus)}")
    if found is None and search.unknown:
        click.echo(f"no invalid run within {budget_s:.0f}s, but {search.unknown} of {search.tried} runs gave no "
                   f"verdict (unknown)" + (f"; first error: {search.first_error}" if search.first_error else ""))
        return EXIT_UNKNOWN
    if found is None:
        click.echo(f"no invalid run within {budget_s:.0f}s")
        return EXIT_VALID
    click.echo(f"INVALID at seed {found.seed}: {', '.join(found.anomalies) or 'invariant violated'}")
    click.echo(f"run directory: {found.run_dir}")
    click.echo(f"replay: kraftwerk sim --schedule {found.run_dir}/test.json")
    click.echo(f"shrink: kraftwerk shrink {found.run_dir}")
    return EXIT_INVALID


def register(group: click.Group) -> None:
    group.add_command(explore_cmd)
