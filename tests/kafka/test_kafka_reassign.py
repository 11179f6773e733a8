"""``--nemesis reassign`` on real Kafka 4.4: AlterPartitionReassignments
swaps one replica of a partition for a broker outside its set while kills
fly; Kafka adds the new replica, waits for it to join the ISR and drops the
old one, and no acknowledged acks=all write is lost. (The reference
controller answers the same request: tests/sim/test_reassignment.py,
tests/server/test_reassignment.py.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_reassignments_under_kills_move_replicas_and_lose_no_acknowledged_write(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--db", "kafka",
                        "--combined", "--brokers", "4", "--nemesis", "reassign,kill", "--nemesis-mode", "overlap",
                        "--nemesis-interval", "6", "--time-limit", "30", "--seed", "3", "--out", str(tmp_path),
                        "--json"], capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 0, r.stderr[-800:]
    res = json.loads(r.stdout)
    run_dir = Path(res["run_dir"])
    moves = [json.loads(line) for line in open(run_dir / "history.jsonl")]
    moves = [o["value"] for o in moves if o["f"] == "start-reassign" and o.get("value", {}).get("from")]
    assert moves, "no reassignment was made"
    key, target = moves[0]["key"], moves[0]["nodes"]
    ids = sorted(int(n[1:]) for n in target)
    seen = [json.loads(line) for line in open(run_dir / "nodes" / "observer" / "trace.jsonl")]
    assert any(e["kind"] == "partition_metadata" and e["tp"] == key and sorted(e["replicas"]) == ids for e in seen), \
        "the controller never completed the move"
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0
