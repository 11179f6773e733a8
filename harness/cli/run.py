"""``kraftwerk run``: start a cluster, drive it with real clients while faults
fly, heal, read everything back, check, and write the report."""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click

from harness.cli.options import config_from_flags, test_options
from harness.errors import EXIT_HARNESS, exit_code_for_valid
from harness.lifecycle.runner import run_test, summary_line
from harness.report.replay import replay_command


@click.command("run")
@test_options(command="run")
@click.option("--no-progress", is_flag=True, help="No live progress display.")
@click.option("--report/--no-report", default=True,
              help="Write the HTML report into the run directory (default; the verdict never depends on it).")
def run_cmd(as_json: bool, no_progress: bool, report: bool, **flags: Any) -> int:
    """Run a campaign against a cluster on this machine.

    \b
    Example:
      kraftwerk run --nemesis partition,kill --time-limit 60 --acks mixed
    """
    if threading.current_thread() is threading.main_thread():
        # SIGTERM tears the cluster down like Ctrl-C (a SIGKILL needs `kraftwerk cleanup`)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    cfg = config_from_flags(flags.pop("backend", None), flags)
    outcomes = []
    worst = 0
    assert cfg.seed is not None
    for i in range(cfg.test_count):
        c = cfg.model_copy(update={"seed": cfg.seed + i})
        o = run_test(c, progress=False if (no_progress or as_json) else None, report=report)
        outcomes.append(o)
        code = exit_code_for_valid(o.result.get("valid"))
        worst = max(worst, code) if code != EXIT_HARNESS else code
        if not as_json:
            click.echo(summary_line(o))
            if report:
                click.echo(f"report: {o.run_dir / 'index.html'}")
            if o.result.get("valid") is not True:
                click.echo(f"  replay: {_replay(o.run_dir)}")
    if as_json:
        objs = [{"run_dir": str(o.run_dir), **o.result} for o in outcomes]
        sys.stdout.write(json.dumps(objs[0] if len(objs) == 1 else objs, default=str) + "\n")
    return worst


def _replay(run_dir: Any) -> str:
    """The command that reruns this run's settings and recorded faults."""
    try:
        test = json.loads((Path(run_dir) / "test.json").read_text())
    except (OSError, ValueError):
        test = {}
    return replay_command({**test, "runtime": test.get("runtime") or "local"}, run_dir)


def register(group: click.Group) -> None:
    group.add_command(run_cmd)
