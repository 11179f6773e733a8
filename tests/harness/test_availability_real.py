"""Availability after the final heal on real processes (the reference broker
on the local backend, through the CLI): a partition down by design says why
in the run's line, results.json and the report's data, and a healed run has
every partition take a probe write within its bound."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path, *args, timeout=300):
    out = tmp_path / "results"
    r = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "run", "--out", str(out), "--no-report", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""},
    )
    assert not list((out / ".state").glob("*.json")), "state file left behind"
    line = next(ln for ln in r.stdout.splitlines() if "valid=" in ln)
    run_dir = Path(line.split(": ", 1)[0])
    return r.returncode, line, json.loads((run_dir / "results.json").read_text()), run_dir


def test_a_partition_down_by_design_after_a_power_loss_says_which_rule_on_real_processes(tmp_path):
    code, line, res, run_dir = run(
        tmp_path, "--brokers", "1", "--rf", "1", "--min-isr", "1", "--nemesis", "lose-unfsynced:all",
        "--nemesis-interval", "3", "--time-limit", "8", "--seed", "5",
        "--protocol", "unclean.recovery.manager.enabled=true", "--protocol", "unclean.recovery.strategy=None")
    assert code == 3, line
    assert "cause: no final read of t0-0, t0-1 completed" in line and "ISR empty, ELR empty" in line
    assert res["valid"] == "unknown"  # its acknowledged writes cannot be read: unverified, not lost
    assert "unavailable-by-design" in res["anomaly_types"] and "unavailable" not in res["anomaly_types"]
    av = res["checkers"]["availability"]
    assert {d["kind"] for d in av["unavailable"]} == {"no-eligible-leader"}
    assert av["state"] == "final-state.json and traces"
    assert (run_dir / "clock.json").is_file() and (run_dir / "final-state.json").is_file()


def test_a_healed_run_takes_a_probe_write_on_every_partition_within_its_bound(tmp_path):
    code, line, res, _ = run(tmp_path, "--nemesis", "kill", "--nemesis-interval", "3", "--time-limit", "8",
                             "--seed", "6")
    assert code == 0, line
    av = res["checkers"]["availability"]
    bound = res["availability"]["bound"]["total_ms"]
    assert av["valid"] is True and set(av["partitions"]) == {"t0-0", "t0-1"}
    for p in av["partitions"].values():
        assert p["judged_by"] == "acks=all write" and 0 <= p["write_after_ms"] <= bound
    assert res["availability"]["rows"] and all(r["partitions"]["t0-0"]["leaderless_ms"] is not None
                                               for r in res["availability"]["rows"])
