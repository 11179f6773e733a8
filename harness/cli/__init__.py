"""The ``kraftwerk`` command line (click + rich).

Each subcommand lives in its own module under ``harness/cli/`` and exposes
``register(group)``; this module only assembles them and turns exceptions into
the documented exit codes (0 valid, 1 anomalies, 2 usage/config error,
3 unknown, 4 harness error) with a one-line message instead of a traceback.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import signal
import sys

# One OpenBLAS thread, set before any subcommand loads numpy (the checkers,
# the report's plots): kraftwerk makes no BLAS call, yet at numpy's import
# OpenBLAS starts a thread per further core that spins waiting for work
# (`kraftwerk sim --seed 1 --time-limit 5` took ~0.2 CPU s more without
# this, of ~3.4 s). Set in the environment, it reaches the CLI's children
# too (nodes, Spark's Python workers); a value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click  # noqa: E402

from harness.errors import EXIT_HARNESS, EXIT_USAGE, KraftwerkError  # noqa: E402

#: subcommand modules, in the order they are registered
_COMMANDS = ("run", "compare", "sim", "explore", "hunt", "shrink", "campaign", "torture", "check", "report", "serve", "node", "cluster", "cleanup", "fs", "hosts")


@click.group(
    name="kraftwerk",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="kraftwerk")
def app() -> None:
    """Jepsen-style fault injection for Kafka's replication protocol.

    \b
    Exit codes: 0 valid, 1 anomalies found, 2 usage/config error,
                3 unknown (checker budget exhausted), 4 harness error.
    """


def _register_all() -> None:
    # `kraftwerk <command> ...` loads only that command's module when the
    # command is named after it (a node process, started on every restart,
    # then skips the report and campaign modules and their plotting imports);
    # anything else (help, tests importing `app`) loads them all
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    for name in ([first] if first in _COMMANDS else _COMMANDS):
        try:
            mod = importlib.import_module(f"harness.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"harness.cli.{name}":
                continue  # not built yet
            raise
        mod.register(app)


_register_all()


def _stacks_on_usr1() -> None:
    """SIGUSR1 prints every thread's stack to the process's own stderr
    (file descriptor 2: ``sys.stderr`` may be a test runner's buffer with no
    descriptor), where it has one."""
    err = sys.__stderr__
    try:
        if err is not None:
            faulthandler.register(signal.SIGUSR1, file=err, all_threads=True)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both OSError and ValueError
        pass


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: never a traceback unless KRAFTWERK_DEBUG=1.

    ``kill -USR1 <pid>`` makes any kraftwerk command print every thread's
    stack to its stderr and go on: where a run that seems stuck is waiting
    (a client library's call, a fault's command, a lock), without stopping
    it or losing its history."""
    _stacks_on_usr1()
    try:
        rv = app.main(args=argv, prog_name="kraftwerk", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else str(e))
        sys.exit(EXIT_USAGE)
    except click.UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "kraftwerk"
        click.echo(f"{cmd}: error: {e.format_message()} (see --help)", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as e:
        click.echo(f"kraftwerk: error: {e.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("kraftwerk: aborted", err=True)
        sys.exit(EXIT_HARNESS)
    except KraftwerkError as e:
        click.echo(f"kraftwerk: error: {e}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("kraftwerk: interrupted", err=True)
        sys.exit(130)
    except Exception as e:  # last resort: one line, details only on request
        if os.environ.get("KRAFTWERK_DEBUG"):
            raise
        click.echo(
            f"kraftwerk: internal error: {type(e).__name__}: {e} (set KRAFTWERK_DEBUG=1 for a traceback)",
            err=True,
        )
        sys.exit(EXIT_HARNESS)
    sys.exit(rv if isinstance(rv, int) else 0)
