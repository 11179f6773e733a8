"""The client settings users vary (``--acks 0``, ``--retries``,
``--auto-offset-reset``) reach real confluent-kafka clients against a real
reference cluster, and test.json says what they were."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_acks0_producers_send_fire_and_forget_records_the_checker_cannot_count_as_acknowledged(tmp_path):
    """acks=0: the broker never answers, so every send is ``info`` with
    acks "0"; the records are in the log (the final reads return every one:
    ``unacked_visible``), but with nothing acknowledged the verdict is
    "unknown" (exit 3), never valid."""
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--acks", "0",
                        "--retries", "2", "--auto-offset-reset", "earliest", "--time-limit", "5", "--seed", "3",
                        "--out", str(tmp_path), "--json", "--no-report"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 3, r.stderr[-800:]
    res = json.loads(r.stdout)
    run_dir = Path(res["run_dir"])
    test = json.loads((run_dir / "test.json").read_text())
    assert (test["acks"], test["retries"], test["auto_offset_reset"]) == ("0", 2, "earliest")
    sends = [json.loads(line) for line in open(run_dir / "history.jsonl")]
    sends = [o for o in sends if o["f"] == "send" and o["type"] != "invoke"]
    assert sends and all(o["type"] == "info" and o["acks"] == "0" for o in sends)
    row = res["durability"]["acks=0"]
    assert row["sent"] == len(sends) and row["acked"] == 0 and row["unacked_visible"] == len(sends)
    assert res["valid"] == "unknown"
