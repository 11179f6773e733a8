"""``kraftwerk campaign FILE.yaml``: a matrix of settings, run and summed per cell."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import click
from harness.cli.output import console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from harness.campaign.execute import Progress, plan_units, run_units, summarise, verdict
from harness.campaign.spec import load_spec, parse_spec
from harness.errors import exit_code_for_valid
from harness.report.campaign import planned, write_campaign
from harness.rundir.trust import check_dir, trusted_dir


DEFAULT_CAMPAIGN = Path(__file__).resolve().parents[1] / "campaign" / "default.yaml"


def _table(campaign: dict) -> Table:
    t = Table(title=f"campaign {escape(campaign['name'])}")
    for col in ("cell", "runs", "invalid", "acks=all lost/acked", "rate (95% CI)", "acks=1 lost/acked", "anomalies"):
        t.add_column(col)
    for c in campaign["cells"]:
        d_all = c["durability"].get("acks=all") or {}
        d_1 = c["durability"].get("acks=1") or {}
        ci = d_all.get("lost_rate_ci95") or [0, 0]
        rate = f"{d_all['lost_rate']:.2%} ({ci[0]:.2%}..{ci[1]:.2%})" if d_all else "-"
        t.add_row(escape(c["id"]), str(c["runs"]), str(c["invalid"]),
                  f"{d_all.get('lost', 0)}/{d_all.get('acked', 0)}", rate,
                  f"{d_1.get('lost', 0)}/{d_1.get('acked', 0)}",
                  escape(", ".join(f"{k}:{v}" for k, v in sorted(c["anomaly_runs"].items()))))
    return t


@click.command("campaign")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--name", default=None, help="Campaign name (default: the file's name:, or its stem).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Results directory; the campaign goes to OUT/campaigns/NAME/.")
@click.option("--parallel", type=click.IntRange(1, 256), default=None,
              help="Simulator commands at once (default: one per usable CPU).")
@click.option("--engine", type=click.Choice(["inline", "spark"]), default="inline", show_default=True,
              help="Where run directories are read and summed.")
@click.option("--runs-on", type=click.Choice(["local", "spark"]), default="local", show_default=True,
              help="Run the seeds as local processes or as Spark tasks.")
@click.option("--spark-master", default=None, help="Any Spark master URL (default: an embedded local[*]).")
@click.option("--recheck", is_flag=True, help="Check every run's history again while aggregating.")
@click.option("--parquet/--no-parquet", default=True, show_default=True, help="Also write cells/runs as Parquet.")
@click.option("--json", "as_json", is_flag=True, help="Print the campaign object (with its cells) on stdout.")
def campaign_cmd(file: Path | None, name: str | None, out: Path, parallel: int | None, engine: str, runs_on: str,
                 spark_master: str | None, recheck: bool, parquet: bool, as_json: bool) -> None:
    """Run every cell of a campaign matrix, then sum the runs per cell.

    \b
    FILE (YAML):  name, runtime (sim|real), seeds (A..B or N), fixed settings,
                  and matrix: {setting: [values...]}; settings by their flag
                  name (min-isr) or Kafka's key (min.insync.replicas).
                  Without FILE: the default campaign (reference broker as
                  real processes, partition + kill, acks=all and acks=1).
    A re-run skips the runs already done. Exit 1 if any cell has an invalid run.
    """
    spec = load_spec(file or DEFAULT_CAMPAIGN)
    if name is not None:
        parse_spec({"name": name})  # the same name rule as in a file
        spec = replace(spec, name=name)
    check_dir(Path(out) / "campaigns" / spec.name, "--out")
    # every cell's configuration validated before anything is made or started
    cs, units, already = plan_units(spec, Path(out).resolve() / "campaigns" / spec.name)
    camp_dir = trusted_dir(trusted_dir(out, "--out") / "campaigns" / spec.name, "--out")
    # the campaign is on the results site from its first run on (it counts
    # the runs on disk); the end replaces this file with the summed one
    write_campaign(camp_dir, planned(spec.name, list(spec.axes), [(c.params, c.test_name) for c in cs],
                                     len(spec.seeds), {"seeds": [spec.seeds[0], spec.seeds[-1]],
                                                       "fixed": spec.fixed, "matrix": spec.axes}))
    # runs a cell still has to do (those already done from an earlier attempt are not counted)
    left = {c.index: sum(u.seeds for u in units if u.cell.index == c.index) for c in cs}
    progress = Progress(total_runs=len(cs) * len(spec.seeds), total_cells=len(cs),
                        done_runs=already, skipped_runs=already, cell_left=left)
    err = console(stderr=True)
    jobs = parallel or len(os.sched_getaffinity(0))
    with Live(progress.line(), console=err, refresh_per_second=4, transient=not err.is_terminal) as live:
        run_units(units, camp_dir, jobs, progress, lambda p: live.update(p.line()), runs_on, spark_master)
    for f in progress.failures:
        err.print(f"[yellow]failed:[/] {escape(f)}")
    camp = summarise(spec, cs, camp_dir, engine, spark_master, recheck, parquet)
    valid = verdict(camp)
    camp["valid"] = valid
    camp["campaign_dir"] = str(camp_dir)
    if as_json:
        click.echo(json.dumps(camp, default=str))
    else:
        console().print(_table(camp))
    err.print(f"campaign {escape(spec.name)}: {progress.line()}; report: {escape(str(camp_dir / 'index.html'))}")
    sys.exit(exit_code_for_valid(valid))


def register(group: click.Group) -> None:
    group.add_command(campaign_cmd)
