"""Every command that writes into a directory a user names refuses one
another local user made or can write (harness/rundir/trust.py), before it
writes anything: exit 2, one line naming the directory and whose it is.
Played as root against directories ``nobody`` made in a sticky /tmp-like
directory, as a security review attacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nobody import ATTACKER, public_dir, run_as_nobody  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]

#: command -> its arguments, D the directory nobody made
COMMANDS = {
    "sim --out": ["sim", "--out", "D", "--time-limit", "1"],
    "run --out": ["run", "--out", "D", "--time-limit", "1"],
    "explore --out": ["explore", "--out", "D", "--budget", "1"],
    "torture --out": ["torture", "--out", "D", "--budget", "1"],
    "campaign --out": ["campaign", "--out", "D"],
    "cluster up --dir": ["cluster", "up", "--dir", "D"],
    "cluster down --dir": ["cluster", "down", "--dir", "D"],
    "cluster status --dir": ["cluster", "status", "--dir", "D"],
    "report RUN_DIR": ["report", "D"],
    "check RUN_DIR": ["check", "D"],
    "shrink RUN_DIR": ["shrink", "D"],
}


def nobodys_run_dir(public: Path) -> Path:
    """A directory nobody made, holding what a run directory holds."""
    d = public / "run"
    run_as_nobody(["mkdir", str(d)])
    hist = '{"type":"invoke","f":"send","process":0,"time":1,"index":0,"value":[["send","t-0",1]]}\\n'
    run_as_nobody(["sh", "-c", f"printf '{hist}' > {d}/history.jsonl && echo '{{}}' > {d}/test.json "
                               f"&& echo '{{}}' > {d}/results.json && echo '{{}}' > {d}/cluster.json"])
    return d


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_directory_nobody_made_is_refused_before_anything_is_written(public_dir, name):
    d = nobodys_run_dir(public_dir)
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    argv = [str(d) if a == "D" else a for a in COMMANDS[name]]
    r = subprocess.run(CLI + argv, capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"owned by {ATTACKER}" in lines[0] and str(d) in lines[0], r.stderr
    assert {p: p.stat().st_mtime_ns for p in d.rglob("*")} == before


def test_a_run_under_a_directory_of_our_own_is_accepted(tmp_path):
    r = subprocess.run(CLI + ["sim", "--out", str(tmp_path / "r"), "--time-limit", "1", "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode in (0, 1, 3), r.stderr
    assert list((tmp_path / "r").glob("*/*/history.jsonl"))
