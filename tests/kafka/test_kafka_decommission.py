"""``--nemesis decommission`` on real Kafka 4.4: a broker's replicas moved
away (AlterPartitionReassignments), a clean shutdown once they moved, then
UnregisterBroker (KIP-631, framed by harness.dbs.admin since no Python client
sends it), and the broker started again as one Kafka's controller no longer
knows. Kafka's controller replays the UnregisterBrokerRecord and no
acknowledged acks=all write is lost."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def test_kip631_decommissions_on_kafka_unregister_the_broker_and_lose_no_acknowledged_write(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--db", "kafka",
                        "--combined", "--brokers", "4", "--nemesis", "decommission", "--nemesis-interval", "6",
                        "--time-limit", "40", "--seed", "3", "--out", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 0, r.stderr[-800:]
    res = json.loads(r.stdout)
    run_dir = Path(res["run_dir"])
    ops = [json.loads(line) for line in open(run_dir / "history.jsonl")]
    done = [o["value"] for o in ops if o["f"] == "stop-decommission"
            and o["value"].get("steps") == ["moved", "shut-down", "unregistered"]]
    assert done, "no broker was moved off, shut down and unregistered"
    logs = "".join(p.read_text(errors="replace") for p in run_dir.glob("nodes/*/server.log"))
    for v in done:
        for n in v["added"]:
            assert f"UnregisterBrokerRecord(brokerId={n[1:]}," in logs, n
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0
