"""``kill -USR1`` on a running kraftwerk command prints every thread's
stack to its stderr and the command goes on (harness/cli ``main``): how a
run that seems stuck shows where it waits, without losing its history.
tests/stuck.py uses it to explain a test command's timeout."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.stuck import kill_group, run_or_dump

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]
#: a command that runs for minutes: many long simulated seeds
LONG = CLI + ["sim", "--seeds", "1..500", "--time-limit", "120"]


def _catches(pid: int, sig: int, within_s: float) -> bool:
    """Whether process ``pid`` catches ``sig`` (its SigCgt mask in /proc) within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return False
        mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
        if mask >> (sig - 1) & 1:
            return True
        time.sleep(0.05)
    return False


def test_usr1_prints_every_threads_stack_and_the_command_goes_on(tmp_path):
    p = subprocess.Popen(LONG + ["--out", str(tmp_path)], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # USR1 is sent once the command has its handler (a busy machine can take longer than any fixed
        # wait to import the CLI, and USR1's default action ends the process), then a moment to run on
        assert _catches(p.pid, signal.SIGUSR1, within_s=120), "the command never installed its USR1 handler"
        time.sleep(1)
        p.send_signal(signal.SIGUSR1)
        time.sleep(2)
        assert p.poll() is None, "the command ended on USR1"
    finally:
        kill_group(p)
        _, err = p.communicate()
    assert "Current thread" in err or "Thread 0x" in err, err[-2000:]
    assert 'File "' in err and "harness" in err


def test_a_test_command_stuck_at_its_timeout_fails_with_its_stacks(tmp_path):
    try:
        run_or_dump(LONG + ["--out", str(tmp_path)], timeout=4, cwd=ROOT)
    except AssertionError as e:
        assert "still running after 4 s" in str(e) and 'File "' in str(e)
    else:
        raise AssertionError("a command of minutes finished within 4 s")
