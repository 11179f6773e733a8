"""``kraftwerk check --fail-on-duplicates``: a retry duplicate of a
non-idempotent producer (``duplicate-nonidempotent``) is allowed by default
(exit 0) and an anomaly with the flag (exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from checkers.history import write_jsonl
from tests.checkers.test_duplicates import campaign_shape

ROOT = Path(__file__).resolve().parents[2]


def check(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "check", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_fail_on_duplicates_makes_a_retry_duplicate_an_anomaly(tmp_path: Path) -> None:
    h = tmp_path / "history.jsonl"
    write_jsonl(h, campaign_shape(False).ops)
    p = check(str(h))
    assert p.returncode == 0, p.stdout + p.stderr
    p = check(str(h), "--fail-on-duplicates")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "duplicate-nonidempotent" in p.stdout
