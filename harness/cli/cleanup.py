"""``kraftwerk cleanup``: stop every node and proxy process, and undo every
namespace, rule, container or mount, that a run left behind, and unmount
every ``kraftwerk fs`` whose owner or server is gone (``harness.lazyfs.mounts``). Runs are found in
the machine-wide registry (``harness.rundir.state.registry_dir``) whatever ``--out``
they used; ``--out`` narrows to the runs of one results directory. Safe to run
any time, from anywhere, any number of times: runs whose harness is still
alive are left alone unless --force."""

from __future__ import annotations

import click

from harness.lazyfs.mounts import cleanup as fs_cleanup
from harness.rundir.state import cleanup
from harness.runtimes.sweep import sweep_all


@click.command("cleanup")
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Only runs whose results directory is this one (default: every run on this machine).")
@click.option("--force", is_flag=True, help="Also stop runs whose harness is still alive.")
def cleanup_cmd(out: str | None, force: bool) -> int:
    """Stop processes and undo resources left behind by interrupted runs."""
    stopped = cleanup(out, include_live_harness=force)
    procs = [p for p in stopped if p.get("pid") is not None]
    for p in stopped:
        pid = f" (pid {p['pid']})" if p.get("pid") is not None else ""
        click.echo(f"stopped {p.get('role')} {p.get('name')}{pid}")
    others = len(stopped) - len(procs)
    removed = sweep_all(force=force)  # by kw- prefix and kraftwerk label: found even without a registry entry
    for what in removed:
        click.echo(f"removed {what}")
    unmounted = fs_cleanup(force=force)
    for point in unmounted:
        click.echo(f"unmounted kraftwerk fs {point}")
    click.echo(f"cleanup: {len(procs)} process(es) stopped" + (f", {others} resource(s) undone" if others else "")
               + (f", {len(removed)} namespace(s)/container(s)/network(s) removed" if removed else "")
               + (f", {len(unmounted)} filesystem(s) unmounted" if unmounted else ""))
    return 0


def register(group: click.Group) -> None:
    group.add_command(cleanup_cmd)
