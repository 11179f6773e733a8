"""``kraftwerk serve``: browse a results directory in a web browser.

Read-only and on loopback by default: it answers GET and HEAD, serves only
files under ``--out`` (symlinks pointing out of it included: refused), and
renders a run's report on first view if the run was made without one. An
address other machines can reach needs ``--allow-non-loopback`` (the rule
the reference broker's listeners follow, reference_impl/server/addresses.py),
and requests naming a host the site is not bound to are refused (400), so a
page elsewhere cannot reach it through a name of its own (DNS rebinding).
"""

from __future__ import annotations

import socket
from pathlib import Path

import click

from harness.errors import UsageError
from reference_impl.server.addresses import FLAG, AddressError, checked_bind


def _check_port(host: str, port: int) -> None:
    """A port in use is a one-line usage error, before uvicorn logs its own."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}") from None


@click.command("serve")
@click.option("--out", default="results", show_default=True, type=click.Path(file_okay=False),
              help="Results directory to serve.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option(FLAG, "allow_non_loopback", is_flag=True,
              help="Allow a --host other machines can reach: anyone who reaches it reads every run served.")
@click.option("--allow-host", "allow_host", multiple=True, metavar="NAME",
              help="Also answer requests for this host name (a DNS name the site is reached by; repeatable).")
def serve_cmd(out: str, host: str, port: int, allow_non_loopback: bool, allow_host: tuple[str, ...]) -> int:
    """Serve an index of every run and campaign, their reports and files."""
    import uvicorn  # late: uvicorn (0.25 s), which only kraftwerk serve runs, not every command's --help

    from harness.site import build_app  # late: FastAPI (0.3 s), likewise

    root = Path(out)
    if not root.is_dir():
        raise UsageError(f"{out}: no such results directory")
    try:
        _, far = checked_bind("--host", host, port, allow_non_loopback)
    except AddressError as e:
        raise UsageError(str(e)) from None
    if port:
        _check_port(host, port)
    app = build_app(root, host=host, extra_hosts=allow_host)
    shown = f"[{host}]" if ":" in host else host
    if far:
        click.echo(f"kraftwerk: warning: serving on {', '.join(far)}: anyone who can reach it reads every run "
                   f"under {root.resolve()}", err=True)
    click.echo(f"kraftwerk: serving {root.resolve()} at http://{shown}:{port}/ (Ctrl-C stops)", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False)
    return 0


def register(group: click.Group) -> None:
    group.add_command(serve_cmd)
