"""``kraftwerk report RUN_DIR``: (re)generate index.html and the plots of a run
(from ``kraftwerk run`` or ``kraftwerk sim``)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.errors import UsageError


@click.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--check/--no-check", default=False, help="Re-run the checkers first (rewrites results.json).")
def report_cmd(run_dir: str, check: bool) -> int:
    """Regenerate a run's HTML report; prints the path of index.html."""
    from harness.report import render_report

    d = Path(run_dir)
    if not (d / "history.jsonl").is_file():
        raise UsageError(f"{d}: not a run directory (no history.jsonl)")
    if check or not (d / "results.json").is_file():
        from harness.checking import check_run

        check_run(d)
    path = render_report(d)
    click.echo(str(path))
    return 0


def register(group: click.Group) -> None:
    group.add_command(report_cmd)
