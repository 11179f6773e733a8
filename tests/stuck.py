"""Running a kraftwerk command from a test with a deadline that explains
itself: a command still running at its timeout is asked for every thread's
stack (``kill -USR1``, harness/cli ``main``) before it is killed, and the
test fails with those stacks instead of a bare ``TimeoutExpired``."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any


def run_or_dump(argv: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=...)``,
    but a command stuck at the timeout fails the test with its stacks."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGUSR1)
        time.sleep(2)
        kill_group(p)
        out, err = p.communicate()
        raise AssertionError(f"{' '.join(argv[-12:])}: still running after {timeout:.0f} s; "
                             f"its threads' stacks then:\n{err[-12000:]}") from None
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def kill_group(p: subprocess.Popen[str]) -> None:
    """SIGKILL the command and every process it started in its session
    (worker processes hold its pipes open: killing the command alone
    leaves ``communicate`` waiting on them)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
