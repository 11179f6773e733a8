"""A child's side of "nothing a run makes outlives it".

A node or proxy process started by the harness calls :func:`arm` first thing.
Two independent nets make it end when the harness that started it dies (a
SIGKILL, the OOM killer, a CI timeout), with no ``kraftwerk cleanup`` needed:

* the lease: the harness passes the read end of a pipe whose write end only it
  holds (``KRAFTWERK_LEASE_FD``); the kernel closes that end when the harness
  dies, a watcher thread here reads end-of-file and the run is over;
* a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``) when the
  harness spawned us from its main thread (``KRAFTWERK_PDEATHSIG=1``; the
  kernel ties the signal to the spawning thread, so a child spawned by a
  short-lived thread must not ask for it).

A paused (SIGSTOPped) process cannot run its own watcher, so whoever sees the
lease end first SIGKILLs every process of the run (``KRAFTWERK_RUN_ID`` in its
environment) and then itself. Each run also has a reaper
(``python -m harness.rundir.reaper --reap RUN_ID``, see ``harness.rundir.state``) doing
that, for children that cannot watch a pipe (a JVM), and, when the harness
died, undoing the run's namespaces, containers, networks and mounts as
``kraftwerk cleanup`` would (``state.reap``). Processes of
``kraftwerk cluster up`` get no lease: the user stops them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from pathlib import Path
from typing import Callable

RUN_ENV = "KRAFTWERK_RUN_ID"
LEASE_ENV = "KRAFTWERK_LEASE_FD"
PARENT_ENV = "KRAFTWERK_PARENT_PID"
PDEATHSIG_ENV = "KRAFTWERK_PDEATHSIG"
PR_SET_PDEATHSIG = 1


def pids_with_run_id(run_id: str) -> list[int]:
    """Processes whose initial environment carries ``KRAFTWERK_RUN_ID=run_id``."""
    want = f"{RUN_ENV}={run_id}".encode()
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if want in env.split(b"\0"):
            out.append(int(p.name))
    return out


def end_run(run_id: str | None = None) -> None:
    run_id = run_id or os.environ.get(RUN_ENV)
    me = os.getpid()
    if run_id:
        for pid in pids_with_run_id(run_id):
            if pid != me:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
    os.kill(me, signal.SIGKILL)


def watch(fd: int, run_id: str | None = None, end: Callable[[str | None], None] = end_run) -> None:
    while True:
        try:
            data = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            end(run_id)
            return


def _set_pdeathsig(parent: int | None) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:
        end_run()  # the parent died before the signal was armed


def arm() -> bool:
    """Tie this process to the harness that started it (see module doc).
    Returns True if a lease or parent-death signal was set up."""
    parent = os.environ.get(PARENT_ENV)
    parent_pid = int(parent) if parent and parent.isdigit() else None
    armed = False
    if os.environ.get(PDEATHSIG_ENV) == "1":
        _set_pdeathsig(parent_pid)
        armed = True
    fd_text = os.environ.get(LEASE_ENV)
    if fd_text and fd_text.isdigit():
        fd = int(fd_text)
        try:
            os.fstat(fd)
        except OSError:
            end_run()  # asked for a lease that is not there: the harness is gone
        threading.Thread(target=watch, args=(fd,), name="lease", daemon=True).start()
        armed = True
    return armed
