"""``kraftwerk hosts up|down``: throwaway ssh hosts on this machine (network
namespaces running sshd), to try ``--backend ssh`` before pointing it at VMs.
See :mod:`harness.runtimes.throwaway`."""

from __future__ import annotations

from pathlib import Path

import click

from harness.runtimes.throwaway import down as hosts_down, up as hosts_up


def register(group: click.Group) -> None:
    @group.group("hosts")
    def hosts() -> None:
        """Throwaway ssh hosts for the ssh backend (needs root)."""

    @hosts.command("up")
    @click.option("--count", type=int, default=6, show_default=True, help="How many hosts (one per node).")
    @click.option("--dir", "dir", required=True, type=click.Path(file_okay=False), help="Where keys and hosts.yaml go.")
    def up(count: int, dir: str) -> int:
        """Start COUNT hosts and write DIR/hosts.yaml.

        \b
        Example:
          kraftwerk hosts up --count 6 --dir ~/kw-hosts
          kraftwerk run --backend ssh --hosts ~/kw-hosts/hosts.yaml
          kraftwerk hosts down --dir ~/kw-hosts
        """
        path = hosts_up(count, Path(dir))
        click.echo(str(path))
        return 0

    @hosts.command("down")
    @click.option("--dir", "dir", required=True, type=click.Path(file_okay=False))
    def down(dir: str) -> int:
        """Remove the hosts of DIR and the files up wrote (idempotent)."""
        gone = hosts_down(Path(dir))
        click.echo(f"hosts down: {len(gone)} namespace(s) removed")
        return 0
