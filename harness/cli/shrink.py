"""``kraftwerk shrink RUN_DIR``: a failing simulator run's fault schedule,
then its client load, cut down by delta debugging to a run that still fails
the same way (``harness.search.shrink``).

Writes ``RUN_DIR/shrunk-schedule.json`` (the run's settings with the minimal
schedule, replayed by ``kraftwerk sim --schedule FILE``) and replays it once
into a run directory of its own, with its report.

Exit codes: 1 shrunk (the minimal run fails as the original did), 2 bad
input (not a failing simulator run), 3 the run does not replay to the same
failure (nothing to shrink).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.cli.options import config_from_flags
from harness.cli.sim import default_jobs, make_pool
from harness.errors import EXIT_INVALID, EXIT_UNKNOWN, UsageError
from harness.lifecycle.runner import run_seed
from harness.search.shrink import Shrinker, signature, units
from harness.rundir.trust import trusted_dir


def _load(run_dir: Path) -> tuple[dict, dict]:
    try:
        test = json.loads((run_dir / "test.json").read_text())
        results = json.loads((run_dir / "results.json").read_text())
    except FileNotFoundError as e:
        raise UsageError(f"{run_dir}: not a run directory ({Path(e.filename).name} missing)") from None
    except ValueError as e:
        raise UsageError(f"{run_dir}: unreadable run ({e})") from None
    if test.get("runtime") != "sim" and test.get("backend") != "sim":
        raise UsageError(f"{run_dir}: shrinking replays a simulator run (this one ran on {test.get('runtime')})")
    if results.get("valid") is not False:
        raise UsageError(f"{run_dir}: the run is valid={results.get('valid')}: nothing fails to shrink")
    if not isinstance(test.get("schedule"), list):
        raise UsageError(f"{run_dir}: test.json records no fault schedule")
    return test, results


@click.command("shrink")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Where the shrunk run's directory goes (default: the results directory of RUN_DIR).")
@click.option("--jobs", type=int, default=None, help="Candidates replayed in parallel (default: usable CPUs).")
def shrink_cmd(run_dir: str, out: str | None, jobs: int | None) -> int:
    """Cut a failing simulator run's faults, then its load, to a minimal run that fails the same way.

    \b
    Example:
      kraftwerk shrink results/queue/latest
    """
    rd = trusted_dir(run_dir, "kraftwerk shrink RUN_DIR", create=False)  # shrunk-schedule.json goes there
    test, results = _load(rd)
    out = out or str(rd.parent.parent)
    cfg = config_from_flags("sim", {"schedule": str(rd / "test.json"), "out": out})
    seed = int(test.get("seed") or 0)
    target = signature(results)
    schedule = test["schedule"]
    jobs = jobs or default_jobs(4)
    with make_pool(jobs) as pool:
        with Shrinker(rd, cfg, seed, target, pool, jobs) as sh:
            if not sh.fails([(schedule, {})])[0]:
                click.echo(f"{rd}: the replay does not fail with {', '.join(sorted(target))}: nothing to shrink")
                return EXIT_UNKNOWN
            minimal = sh.schedule(schedule)
            load = sh.load(minimal)
    names = list(dict.fromkeys(e["fault"] for e in minimal))
    shrunk = {**{k: v for k, v in test.items() if k not in ("schedule", "started")}, **load,
              "nemesis": names, "schedule": minimal, "shrunk_from": str(rd)}
    path = rd / "shrunk-schedule.json"
    path.write_text(json.dumps(shrunk, indent=1, default=str) + "\n")
    final = run_seed(config_from_flags("sim", {"schedule": str(path), "out": out, "name": f"{cfg.name}-shrunk"}),
                     seed, out, report=True)
    click.echo(f"faults: {len(units(schedule))} -> {len(units(minimal))} ({', '.join(names) or 'none'})")
    for k, v in load.items():
        click.echo(f"{k.replace('_', '-')}: {getattr(cfg, k)} -> {v}")
    click.echo(f"replays tried: {sh.runs}; fails with: {', '.join(sorted(target))}")
    click.echo(f"schedule: {path}")
    click.echo(f"shrunk run: {final.get('run_dir')} (valid={final.get('valid')})")
    click.echo(f"replay: kraftwerk sim --schedule {path}")
    return EXIT_INVALID if final.get("valid") is False else EXIT_UNKNOWN


def register(group: click.Group) -> None:
    group.add_command(shrink_cmd)
