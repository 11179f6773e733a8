"""The CLI's process settings: one OpenBLAS thread unless the user says
otherwise (harness/cli/__init__.py), since kraftwerk makes no BLAS call and
OpenBLAS's idle threads spin at numpy's import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: the threads of a process that loads the CLI, then numpy
_THREADS = ("import harness.cli, numpy, os; "
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))")


def _threads(env_value: str | None) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    out = subprocess.run([sys.executable, "-c", _THREADS], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no extra thread on one core")
def test_the_cli_loads_numpy_with_one_openblas_thread():
    value, threads = _threads(None)
    assert value == "1"
    assert threads == 1, f"{threads} threads after numpy's import under the CLI"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no extra thread on one core")
def test_a_users_openblas_setting_is_kept():
    value, threads = _threads("2")
    assert value == "2"
    assert threads == 2
