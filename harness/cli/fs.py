"""``kraftwerk fs``: the filesystem that loses un-fsynced writes, as a tool of
its own (under any program, not only the harness's nodes).

\b
    kraftwerk fs mount DIR --backing DIR2   # serve DIR from DIR2, in the background
    kraftwerk fs crash DIR [--torn [--seed N]]  # drop everything not fsynced
    kraftwerk fs umount DIR                 # clean unmount (lazy if the server died)

The rules of what is durable when are in ``harness/lazyfs/__init__.py`` and
the README. Bad input (not root, no /dev/fuse, missing directories, a busy
mount point, a directory that is not a kraftwerk fs mount) is one line,
exit 2.
"""

from __future__ import annotations

import json
import os

import click

from harness.errors import UsageError
from harness.lazyfs import mounts


@click.group("fs")
def fs_group() -> None:
    """A FUSE filesystem keeping un-fsynced changes in its own cache, lost on `crash`."""


@fs_group.command("mount")
@click.argument("mountpoint", type=click.Path(file_okay=False))
@click.option("--backing", required=True, type=click.Path(file_okay=False), help="Directory holding the durable state.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of torn-write crashes.")
@click.option("--owner-pid", type=int, default=None, help="Unmount (kraftwerk cleanup) once this process is gone.")
@click.option("--owner-ssh", is_flag=True,
              help="The owner is the ssh connection running this command (its sshd-session or sshd process): unmount once it drops.")
def mount_cmd(mountpoint: str, backing: str, seed: int, owner_pid: int | None, owner_ssh: bool) -> int:
    """Mount MOUNTPOINT over --backing; returns once mounted."""
    if owner_pid is not None and owner_pid <= 0:
        raise UsageError(f"--owner-pid must be a process id, got {owner_pid}")
    if owner_ssh:
        if owner_pid is not None:
            raise UsageError("--owner-ssh and --owner-pid name the owner twice: give one")
        owner_pid = mounts.ancestor_named(mounts.SSH_SESSION)
        if owner_pid is None:
            raise UsageError("--owner-ssh: this command does not run under an ssh connection (no sshd ancestor)")
    rec = mounts.mount(mountpoint, backing, seed=seed, owner_pid=owner_pid)
    click.echo(f"mounted {rec['mountpoint']} over {rec['backing']} (server pid {rec['pid']})")
    return 0


@fs_group.command("crash")
@click.argument("mountpoint", type=click.Path(file_okay=False))
@click.option("--torn", is_flag=True, help="Keep a random (seeded) prefix of each file's un-fsynced writes.")
@click.option("--seed", type=int, default=None,
              help="Draw this torn crash's prefixes from this seed (default: the mount's --seed stream).")
@click.option("--json", "as_json", is_flag=True, help="Print the server's answer as JSON.")
def crash_cmd(mountpoint: str, torn: bool, seed: int | None, as_json: bool) -> int:
    """Drop every change under MOUNTPOINT that was not made durable."""
    r = mounts.crash(mountpoint, torn=torn, seed=seed)
    if as_json:
        click.echo(json.dumps(r))
    else:
        click.echo(
            f"crashed {os.path.abspath(mountpoint)}: {r['dirty_files']} file(s) with un-fsynced data, "
            f"{r['journal_dropped']} uncommitted name change(s) dropped"
            + (f", {r['torn_bytes_kept']} torn byte(s) kept" if torn else "")
        )
    return 0


@fs_group.command("sync")
@click.argument("mountpoint", type=click.Path(file_okay=False))
def sync_cmd(mountpoint: str) -> int:
    """Make everything under MOUNTPOINT durable."""
    mounts.control(mountpoint, "sync")
    click.echo(f"synced {os.path.abspath(mountpoint)}")
    return 0


@fs_group.command("status")
@click.argument("mountpoint", type=click.Path(file_okay=False))
def status_cmd(mountpoint: str) -> int:
    """Dirty files and bytes, uncommitted name changes, crashes so far (JSON)."""
    click.echo(json.dumps(mounts.control(mountpoint, "status")))
    return 0


@fs_group.command("umount")
@click.argument("mountpoint", type=click.Path(file_okay=False))
def umount_cmd(mountpoint: str) -> int:
    """Unmount MOUNTPOINT: cleanly (synced) if its server answers, else lazily."""
    if os.geteuid() != 0:
        raise UsageError("kraftwerk fs umount needs root (kraftwerk fs mounts are root's)")
    if not mounts.umount(mountpoint):
        raise UsageError(f"{os.path.abspath(mountpoint)}: nothing mounted or recorded there")
    click.echo(f"unmounted {os.path.abspath(mountpoint)}")
    return 0


@fs_group.command("list")
def list_cmd() -> int:
    """Recorded mounts, one JSON object per line."""
    for rec in mounts.records():
        rec["mounted"] = mounts.is_mounted(rec["mountpoint"])
        click.echo(json.dumps(rec))
    return 0


def register(group: click.Group) -> None:
    group.add_command(fs_group)
