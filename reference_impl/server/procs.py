"""Is a process still running, and is it still the one that was started?

One answer for every part that keeps process ids beyond the moment it made
them: the launcher's ``cluster.json``, the harness's run registry
(``harness.rundir.state``), the backends' daemons. A pid alone is not
enough: the kernel recycles it, so a pid written down is kept with its
start time (field 22 of ``/proc/<pid>/stat``, clock ticks since boot), and a
process counts as the recorded one only while both match. A zombie (exited,
not yet waited for) counts as gone.

A leaf: the standard library only, so both the reference server's launcher
and the harness import it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcStat:
    """What ``/proc/<pid>/stat`` says of a process (proc(5))."""

    name: str  #: the command name (may hold spaces and parentheses)
    state: str  #: R, S, D, T (stopped), t (traced), Z (zombie), ...
    ppid: int
    start_time: int  #: clock ticks since boot


def proc_stat(pid: int) -> ProcStat | None:
    """The process's stat line, parsed; None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, _, rest = raw.rpartition(")")
    fields = rest.split()
    try:
        return ProcStat(head[head.index("(") + 1:], fields[0], int(fields[1]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def proc_status_kib(pid: int | None, field: str = "VmRSS") -> int:
    """A size ``/proc/<pid>/status`` gives in KiB (``VmRSS``, the resident
    memory now; ``VmHWM``, its peak), 0 if there is no such process or
    field: what the memory bounds' tests and benches read of a node."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def proc_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), None if it is gone."""
    st = proc_stat(pid)
    return st.start_time if st else None


def alive(pid: int | None, start_time: int | None = None) -> bool:
    """``pid`` runs (not a zombie) and, given ``start_time``, is the process
    that started then, not a recycled pid."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    st = proc_stat(pid)
    return st is not None and st.state != "Z" and (start_time is None or st.start_time == start_time)


def same_process(pid: object, start: object) -> bool:
    """``pid`` runs and is the process that started at ``start``: the check
    before anything is signalled on a record's word. A record without a
    start time (or with a forged one) names no process, so nothing is
    signalled for it: an unrelated process that has the pid now is never hit."""
    return (isinstance(pid, int) and not isinstance(pid, bool) and isinstance(start, int)
            and not isinstance(start, bool) and alive(pid, start))


def reap(pid: int) -> None:
    """Collect ``pid``'s exit if it is a child of this process that has
    ended, so it leaves no zombie behind (no-op otherwise). For children
    started and then let go, as the launcher's detached nodes are; a child
    kept as a ``subprocess.Popen`` is reaped by its own ``wait``."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_exit(pid: int | None, timeout: float, start_time: int | None = None) -> bool:
    """Wait up to ``timeout`` seconds for the process to be gone (reaping it
    if it is our child); True once it is."""
    if pid is None:
        return True
    deadline = time.monotonic() + timeout
    while True:
        reap(pid)
        if not alive(pid, start_time):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
