"""kraftwerk shrink: delta debugging over a failing simulator run's fault
schedule, then its load, down to a replayable run failing the same way."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from harness.search.shrink import ddmin, signature, units

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def test_ddmin_finds_a_one_minimal_failing_subset():
    calls = []

    def fails(cands):
        calls.append(len(cands))
        return [{3, 11} <= set(c) for c in cands]

    assert ddmin(list(range(16)), fails) == [3, 11]


def test_the_signature_is_the_headline_lost_writes_and_violations():
    r = {"anomaly_types": ["lost-acked-write", "unseen", "leader-completeness"],
         "invariants": {"counts": {"leader-completeness": 2}}}
    assert signature(r) == {"lost-acked-write", "leader-completeness"}
    assert signature({"anomaly_types": ["G0"]}) == {"G0"}


def test_a_kip101_off_failure_shrinks_to_fewer_faults_that_replay_to_the_same_anomaly(tmp_path):
    p = subprocess.run(CLI + ["sim", "--seed", "14", "--nemesis", "all", "--variant", "kip101=off", "--time-limit", "15",
                              "--out", str(tmp_path), "--json", "--no-report"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    first = json.loads(p.stdout)
    assert p.returncode == 1 and signature(first)
    run_dir = Path(first["run_dir"])
    tmp = tmp_path / "tmp"  # the search's scratch files go here, and must go
    tmp.mkdir()
    s = subprocess.run(CLI + ["shrink", str(run_dir), "--jobs", "2"], cwd=ROOT, capture_output=True, text=True,
                       timeout=900, env={**os.environ, "TMPDIR": str(tmp)})
    assert s.returncode == 1, s.stdout + s.stderr
    assert list(tmp.iterdir()) == []
    before = units(json.loads((run_dir / "test.json").read_text())["schedule"])
    shrunk = json.loads((run_dir / "shrunk-schedule.json").read_text())
    assert 0 < len(units(shrunk["schedule"])) < len(before)
    r = subprocess.run(CLI + ["sim", "--schedule", str(run_dir / "shrunk-schedule.json"), "--out", str(tmp_path / "r"),
                              "--json", "--no-report"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    again = json.loads(r.stdout)
    assert r.returncode == 1 and signature(first) <= set(again["anomaly_types"])
    assert re.search(r"faults: \d+ -> \d+", s.stdout)


def test_shrinking_a_valid_or_missing_run_is_a_usage_error(tmp_path):
    s = subprocess.run(CLI + ["shrink", str(tmp_path / "nope")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert s.returncode == 2 and "does not exist" in s.stderr and "Traceback" not in s.stderr
