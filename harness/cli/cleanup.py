"""``kraftwerk cleanup``: stop every node and proxy process a run left behind
(listed in the state files under RESULTS/.state). Safe to run any time, any
number of times: runs whose harness is still alive are left alone unless
--force."""

from __future__ import annotations

import click


@click.command("cleanup")
@click.option("--out", default="results", show_default=True, type=click.Path(file_okay=False), help="Results directory.")
@click.option("--force", is_flag=True, help="Also stop runs whose harness is still alive.")
def cleanup_cmd(out: str, force: bool) -> int:
    """Stop processes left behind by interrupted runs."""
    from harness.state import cleanup

    from harness.backend.sweep import sweep_all

    stopped = cleanup(out, include_live_harness=force)
    for p in stopped:
        click.echo(f"stopped {p.get('role')} {p.get('name')} (pid {p['pid']})")
    removed = sweep_all(force=force)
    for what in removed:
        click.echo(f"removed {what}")
    click.echo(f"cleanup: {len(stopped)} process(es) stopped, {len(removed)} namespace(s)/container(s)/network(s) removed")
    return 0


def register(group: click.Group) -> None:
    group.add_command(cleanup_cmd)
