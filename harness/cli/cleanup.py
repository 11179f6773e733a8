"""``kraftwerk cleanup``: stop every node and proxy process a run left behind
(listed in the state files under RESULTS/.state), and unmount every
``kraftwerk fs`` mount whose owner or server is gone (``harness.lazyfs.mounts``). Safe to run any time, any
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

    from harness.lazyfs.mounts import cleanup as fs_cleanup

    stopped = cleanup(out, include_live_harness=force)
    for p in stopped:
        click.echo(f"stopped {p.get('role')} {p.get('name')} (pid {p['pid']})")
    unmounted = fs_cleanup(force=force)
    for point in unmounted:
        click.echo(f"unmounted kraftwerk fs {point}")
    click.echo(f"cleanup: {len(stopped)} process(es) stopped, {len(unmounted)} filesystem(s) unmounted")
    return 0


def register(group: click.Group) -> None:
    group.add_command(cleanup_cmd)
