"""``kraftwerk serve``: browse a results directory in a web browser.

Read-only and on loopback by default: it answers GET and HEAD, serves only
files under ``--out`` (symlinks pointing out of it included: refused), and
renders a run's report on first view if the run was made without one. An
address other machines can reach needs ``--allow-non-loopback`` (the rule
the reference broker's listeners follow, reference_impl/server/addresses.py);
``--host`` is resolved once and the addresses checked are the ones bound
(harness/site/listen.py), and requests naming a host the site is not bound
to are refused (400), so a page elsewhere cannot reach it through a name of
its own (DNS rebinding). A run's zip is streamed, at most ``--zip-max-mib``
of files (413 above it) and two at once (503 beyond).
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.errors import UsageError
from reference_impl.server.addresses import FLAG, AddressError, checked_bind


@click.command("serve")
@click.option("--out", default="results", show_default=True, type=click.Path(file_okay=False),
              help="Results directory to serve.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option(FLAG, "allow_non_loopback", is_flag=True,
              help="Allow a --host other machines can reach: anyone who reaches it reads every run served.")
@click.option("--allow-host", "allow_host", multiple=True, metavar="NAME",
              help="Also answer requests for this host name (a DNS name the site is reached by; repeatable).")
@click.option("--zip-max-mib", default=2048, show_default=True, type=click.IntRange(1, 1 << 30),
              help="Largest run directory (MiB of files) served as a zip; larger ones are refused (413).")
def serve_cmd(out: str, host: str, port: int, allow_non_loopback: bool, allow_host: tuple[str, ...],
              zip_max_mib: int) -> int:
    """Serve an index of every run and campaign, their reports and files."""
    import uvicorn  # late: uvicorn (0.25 s), which only kraftwerk serve runs, not every command's --help

    from harness.site import build_app  # late: Starlette (0.3 s), likewise
    from harness.site.listen import listen_sockets, urls  # late: likewise (the harness.site package loads Starlette)
    from harness.site.zipstream import MiB, ZipLimits  # late: likewise

    root = Path(out)
    if not root.is_dir():
        raise UsageError(f"{out}: no such results directory")
    try:
        ips, far = checked_bind("--host", host, port, allow_non_loopback)
    except AddressError as e:
        raise UsageError(str(e)) from None
    socks = listen_sockets(ips, port)  # the addresses checked, bound once
    try:
        port = socks[0].getsockname()[1]
        app = build_app(root, host=host, extra_hosts=allow_host, addresses=ips,
                        zip_limits=ZipLimits(max_bytes=zip_max_mib * MiB))
        if far:
            click.echo(f"kraftwerk: warning: serving on {', '.join(far)}: anyone who can reach it reads every run "
                       f"under {root.resolve()}", err=True)
        click.echo(f"kraftwerk: serving {root.resolve()} at {urls(ips, port)} (Ctrl-C stops)", err=True)
        config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False)
        uvicorn.Server(config).run(sockets=socks)
    finally:
        for s in socks:
            s.close()
    return 0


def register(group: click.Group) -> None:
    group.add_command(serve_cmd)
