"""One verdict path: a simulated run's results.json comes from the checkers
(``checkers.check.check_history`` + the invariant monitor merged by
``checkers.check.merge_invariants``), so re-checking its run directory with
``kraftwerk check`` gives the same verdict and anomaly types."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.config import TestConfig
from harness.lifecycle.runner import run_seed

ROOT = Path(__file__).resolve().parents[2]
OPTS = TestConfig(backend="sim", time_limit=6, nemesis=("kill", "partition"), nemesis_interval=2, rate=60, final_read_timeout=8, partitions=2, acks="mixed")


def recheck(run_dir: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "check", run_dir, "--json"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert p.returncode in (0, 1, 3), p.stderr
    return json.loads(p.stdout)


def test_sim_results_equal_kraftwerk_check_of_its_run_directory(tmp_path: Path) -> None:
    res = run_seed(OPTS, 4, tmp_path)
    again = recheck(res["run_dir"])
    assert again["valid"] == res["valid"]
    assert again["anomaly_types"] == res["anomaly_types"]
    assert again["invariants"]["counts"] == res["invariants"]["counts"]
    assert again["checkers"]["invariants"]["valid"] == res["checkers"]["invariants"]["valid"]
    assert "queue" in res["checkers"] and "durability" in res["checkers"]


def test_sends_record_whether_their_producer_is_idempotent(tmp_path: Path) -> None:
    """--idempotent makes the acks=all producers idempotent; acks=1 ones
    cannot be (Kafka requires acks=all for idempotence)."""
    res = run_seed(OPTS.model_copy(update={"idempotent": True}), 4, tmp_path)
    ops = [json.loads(x) for x in (Path(res["run_dir"]) / "history.jsonl").read_text().splitlines()]
    sends = [o for o in ops if o["f"] == "send"]
    assert {(o["acks"], o["idempotent"]) for o in sends} == {("all", True), ("1", False)}
    assert res["valid"] is not False, res["anomaly_types"]
    plain = run_seed(OPTS, 4, tmp_path / "plain")
    ops = [json.loads(x) for x in (Path(plain["run_dir"]) / "history.jsonl").read_text().splitlines()]
    assert {o["idempotent"] for o in ops if o["f"] == "send"} == {False}
