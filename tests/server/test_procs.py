"""One liveness check for every process id the project keeps
(reference_impl/server/procs.py): a pid counts as the recorded process only
while its start time matches, a zombie counts as gone, and nothing else
reads /proc/<pid>/stat."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from reference_impl.server.procs import alive, proc_start_time, proc_stat, proc_status_kib, wait_exit

ROOT = Path(__file__).resolve().parents[2]


def test_a_pid_is_the_recorded_process_only_while_its_start_time_matches():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = proc_start_time(p.pid)
        assert start is not None and alive(p.pid) and alive(p.pid, start)
        assert not alive(p.pid, start - 1)  # a recycled pid: another process under the same number
        st = proc_stat(p.pid)
        assert st is not None and st.ppid == os.getpid() and st.state in ("R", "S")
    finally:
        p.kill()
        p.wait()
    assert not alive(p.pid, start) and proc_start_time(p.pid) is None


def test_a_child_that_exited_counts_as_gone_and_wait_exit_reaps_it():
    p = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while (st := proc_stat(p.pid)) is not None and st.state != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive(p.pid)  # a zombie, not yet waited for
    assert wait_exit(p.pid, 5)
    assert proc_stat(p.pid) is None  # reaped: no zombie left


def test_nothing_but_the_one_check_reads_proc_stat():
    readers = sorted(str(f.relative_to(ROOT)) for room in ("harness", "reference_impl", "nemesis", "workloads",
                                                          "checkers", "generator")
                     for f in (ROOT / room).rglob("*.py") if '/proc/{pid}/stat").read' in f.read_text())
    assert readers == ["reference_impl/server/procs.py"]


def test_nonsense_is_not_alive():
    assert not alive(None) and not alive(0) and not alive(-5) and not alive(2 ** 22 + 12345)


def test_status_sizes_follow_the_process_and_are_zero_once_it_is_gone():
    """proc(5)'s VmRSS/VmHWM in KiB: a child that touches 64 MiB shows at
    least that as its peak, and nothing once reaped (or for a field that
    does not exist)."""
    p = subprocess.Popen([sys.executable, "-c", "import sys, time; b = b'x' * (64 << 20); print(flush=True); "
                          "time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdout.readline()
        assert proc_status_kib(p.pid, "VmHWM") >= 64 << 10
        assert 0 < proc_status_kib(p.pid) <= proc_status_kib(p.pid, "VmHWM")
        assert proc_status_kib(p.pid, "NoSuchField") == 0
    finally:
        p.kill()
        p.wait()
    assert proc_status_kib(p.pid) == 0 and proc_status_kib(None) == 0
