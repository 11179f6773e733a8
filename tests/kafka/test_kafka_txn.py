"""The transactional workload (``--workload txn``) on real Kafka 4.4.

All ``slow`` (a minute or more each, most of it Kafka's start and final
reads); ``bench/kafka_txn.py --pytest`` runs them and the bench prints the
figures:

* a short read_committed run with aborts and kills is valid: aborted
  transactions are recorded ``fail``, no poll returns their records (no
  G1a), no transaction reads its own sends (no precommitted-read), and no
  committed write is lost;
* the same at read_uncommitted is caught (G1a and precommitted-read), and
  the campaign of the issue (netns, partition + kill + pause, abort
  probability 0.2, 60 s).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


def history(res: dict) -> list[dict]:
    return [json.loads(line) for line in open(Path(res["run_dir"]) / "history.jsonl")]


def txn_run(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    r = kraftwerk("run", "--db", "kafka", "--workload", "txn", "--abort-probability", "0.2", "--out",
                  str(tmp_path / "results"), "--json", *extra)
    assert r.stdout, r.stderr[-800:]
    return r, json.loads(r.stdout)


@pytest.mark.slow
def test_read_committed_transactions_with_aborts_and_kills_on_kafka_are_valid(tmp_path):
    r, res = txn_run(tmp_path, "--combined", "--seed", "7", "--time-limit", "15", "--nemesis", "kill",
                     "--nemesis-interval", "5")
    assert r.returncode == 0, r.stderr[-800:]
    ops = history(res)
    done = [o for o in ops if o["f"] == "txn" and o["type"] != "invoke"]
    assert sum(o["type"] == "ok" for o in done) > 20
    aborted = [o for o in done if o["type"] == "fail" and o.get("error") == "aborted"]
    assert aborted and all(o["value"] is not None for o in aborted)
    assert any(m[0] == "send" for o in aborted for m in o["value"]), "no aborted send to look for"
    assert any(o["f"] == "start-kill" and o["type"] == "info" for o in ops)
    assert res["valid"] is True
    assert not {"G1a", "precommitted-read", "lost-write"} & set(res["anomaly_types"])
    test = json.loads((Path(res["run_dir"]) / "test.json").read_text())
    assert test["workload"] == "txn" and test["txn"] is True and test["isolation_level"] == "read_committed"
    assert res["durability"]["acks=all"]["lost"] == 0


@pytest.mark.slow
def test_read_uncommitted_consumers_see_aborted_and_open_transactions(tmp_path):
    """What read_committed prevents, caught: polls return aborted
    transactions' records (G1a) and a transaction its own sends
    (precommitted-read)."""
    r, res = txn_run(tmp_path, "--combined", "--seed", "7", "--time-limit", "15", "--isolation-level",
                     "read_uncommitted")
    assert r.returncode == 1, r.stderr[-800:]
    assert {"G1a", "precommitted-read"} <= set(res["anomaly_types"]) and res["valid"] is False


@pytest.mark.slow
def test_transactional_campaign_under_partitions_kills_and_pauses(tmp_path):
    """The issue's campaign: netns, partition + kill + pause, aborts at 0.2,
    60 s. Kafka's transactions hold: no G1a, no precommitted read, no lost
    committed write."""
    r, res = txn_run(tmp_path, "--backend", "netns", "--seed", "11", "--time-limit", "60", "--nemesis",
                     "partition,kill,pause", "--nemesis-interval", "8")
    assert r.returncode == 0, r.stderr[-800:]
    assert res["valid"] is True
    assert not {"G1a", "precommitted-read", "lost-write"} & set(res["anomaly_types"])
    assert res["durability"]["acks=all"]["acked"] > 50
    ops = history(res)
    assert {"start-partition", "start-kill", "start-pause"} <= {o["f"] for o in ops}


@pytest.mark.slow
def test_crashed_transactional_clients_leave_open_transactions_their_replacements_fence(tmp_path):
    """--crash-clients with transactions: a killed client leaves its
    transaction open; the replacement registers the same transactional id,
    which fences the old producer and aborts what it left. The crashed ops
    are info, and nothing they left open is ever read as committed."""
    r, res = txn_run(tmp_path, "--combined", "--seed", "5", "--time-limit", "15", "--crash-clients",
                     "--crash-client-interval", "4")
    assert r.returncode == 0, r.stderr[-800:]
    crashed = [o for o in history(res) if o["type"] == "info" and o.get("error") == "crashed"]
    assert len(crashed) >= 3 and res["checkers"]["queue"]["info_txn_causes"] == ["crashed"]
    assert res["valid"] is True and not {"G1a", "precommitted-read"} & set(res["anomaly_types"])
