"""Consume-transform-produce (``--workload ctp``) on real Kafka 4.4.

``slow`` (a minute or more each, most of it Kafka's start and final reads);
``bench/ctp.py --pytest`` runs them and ``bench/ctp.py`` prints the figures
beside the reference implementation's:

* exactly once (``--ctp-txn``: outputs and offsets in one transaction,
  KIP-447's send_offsets_to_transaction, read_committed): every committed
  input has exactly one output, so the processing checker's verdict holds
  with duplicates counted as anomalies;
* at least once (offsets committed after the outputs, no transaction):
  the same history format as on the reference implementation, valid.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def ctp_run(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--db", "kafka",
                        "--combined", "--workload", "ctp", "--out", str(tmp_path / "results"), "--json",
                        "--no-progress", *extra],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.stdout, r.stderr[-800:]
    return r, json.loads(r.stdout)


@pytest.mark.slow
def test_exactly_once_consume_transform_produce_on_kafka_processes_each_input_once(tmp_path):
    r, res = ctp_run(tmp_path, "--ctp-txn", "--seed", "8", "--time-limit", "10")
    assert r.returncode == 0, r.stderr[-800:]
    p = res["checkers"]["processing"]
    assert p["mode"] == "exactly-once" and p["allowed"] == []
    assert p["rounds_by_type"].get("ok", 0) > 20 and p["inputs_processed"] > 50
    assert p["counts"] == {} and p["valid"] is True
    assert res["valid"] is True
    test = json.loads((Path(res["run_dir"]) / "test.json").read_text())
    assert test["workload"] == "ctp" and test["ctp_txn"] is True


@pytest.mark.slow
def test_at_least_once_consume_transform_produce_on_kafka_under_kills_is_valid(tmp_path):
    r, res = ctp_run(tmp_path, "--seed", "7", "--time-limit", "15", "--nemesis", "kill", "--nemesis-interval", "5")
    assert r.returncode == 0, r.stderr[-800:]
    p = res["checkers"]["processing"]
    assert p["mode"] == "at-least-once" and "lost-processing" not in p["counts"]
    assert p["inputs_processed"] > 50
    assert res["valid"] is True
