"""``kraftwerk report RUN_DIR``: (re)generate index.html and the plots of a run
(from ``kraftwerk run`` or ``kraftwerk sim``)."""

from __future__ import annotations

import click

from harness.errors import UsageError
from harness.lifecycle.checking import check_run
from harness.report import render_report
from harness.report.campaign import CampaignError, render_campaign
from harness.rundir.summary import write_summary
from harness.rundir.trust import trusted_dir


@click.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--check/--no-check", default=False, help="Re-run the checkers first (rewrites results.json).")
def report_cmd(run_dir: str, check: bool) -> int:
    """Regenerate a run's (or a campaign's) HTML report; prints the path of index.html."""
    d = trusted_dir(run_dir, "kraftwerk report RUN_DIR", create=False)  # index.html and plots go there
    if (d / "campaign.json").is_file():  # a campaign directory: its page and heatmap
        try:
            click.echo(str(render_campaign(d)))
        except CampaignError as e:
            raise UsageError(str(e)) from None
        return 0
    if not (d / "history.jsonl").is_file():
        raise UsageError(f"{d}: not a run directory (no history.jsonl)")
    if check or not (d / "results.json").is_file():
        check_run(d)
        write_summary(d)
    path = render_report(d)
    click.echo(str(path))
    return 0


def register(group: click.Group) -> None:
    group.add_command(report_cmd)
