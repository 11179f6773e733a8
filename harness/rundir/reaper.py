"""The run reaper (``python -m harness.rundir.reaper --reap RUN_ID``):
the process ``harness.rundir.state`` starts beside every run, holding the
run's lease (:mod:`harness.rundir.lease`). When the lease ends (the harness
exited, or was SIGKILLed) it undoes the run if its harness died
(``state.reap``: namespaces, containers, networks, mounts, ssh hosts) and
SIGKILLs what is left of the run's processes. A module of its own, above
both the lease and the run state, so neither imports the other in a circle.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal

from harness.rundir import lease, state


def _reap(run_id: str | None) -> None:
    """The reaper's end of a run: undo what the run made if its harness is
    dead (``state.reap``), then SIGKILL what is left of it and itself."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the lease's end and the parent-death signal both lead here
    try:
        if run_id:
            state.reap(run_id)
    except Exception:  # noqa: BLE001 - an undo that fails must not keep the run's processes alive
        pass
    lease.end_run(run_id)


def main(argv: list[str] | None = None) -> int:
    """The reaper: wait for the lease to end, then undo the run if its
    harness died and SIGKILL the run's processes."""
    ap = argparse.ArgumentParser(description="kraftwerk run reaper")
    ap.add_argument("--reap", required=True, metavar="RUN_ID")
    args = ap.parse_args(argv)
    fd_text = os.environ.get(lease.LEASE_ENV, "")
    if not fd_text.isdigit():
        return 2
    if os.environ.get(lease.PDEATHSIG_ENV) == "1":
        parent = os.environ.get(lease.PARENT_ENV, "")
        try:
            ctypes.CDLL(None, use_errno=True).prctl(lease.PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            pass
        signal.signal(signal.SIGTERM, lambda *_: _reap(args.reap))
        if parent.isdigit() and os.getppid() != int(parent):
            _reap(args.reap)
    lease.watch(int(fd_text), args.reap, _reap)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
