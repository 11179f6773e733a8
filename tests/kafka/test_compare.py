"""``kraftwerk compare``: both configurations are checked before anything
starts, and the side-by-side summary reads each db's leader/ISR history."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.search import compare

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args, timeout=120):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


def test_a_setting_kafka_refuses_stops_compare_before_either_run(tmp_path):
    r = kraftwerk("compare", "--out", str(tmp_path / "r"), "--variant", "maximal_isr=off")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "maximal_isr exists only in the reference implementation" in r.stderr
    assert not (tmp_path / "r").exists()


def _trace(path: Path, events):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def _pm(t, node, leader, le, isr, elr=()):
    return {"t": t, "node": node, "kind": "partition_metadata", "tp": "t0-0", "leader": leader, "leader_epoch": le,
            "partition_epoch": le, "replicas": [1, 2, 3], "isr": list(isr), "elr": list(elr)}


def test_leader_history_merges_every_controllers_replay_into_one_sequence(tmp_path):
    for node in (101, 102):  # each controller replays the same records
        _trace(tmp_path / "nodes" / f"c{node}" / "trace.jsonl",
               [_pm(10 + node % 2, node, 1, 0, (1, 2, 3)), _pm(20 + node % 2, node, 1, 0, (1, 2)),
                _pm(30 + node % 2, node, 2, 1, (2,), (1,)), _pm(40 + node % 2, node, -1, 2, ())])
    hist = compare.leader_history(tmp_path)["t0-0"]
    assert [(c.leader, c.leader_epoch, c.isr, c.elr) for c in hist] == [
        (1, 0, (1, 2, 3), ()), (1, 0, (1, 2), ()), (2, 1, (2,), (1,)), (-1, 2, (), ())]
    s = compare.history_summary(hist)
    assert s == {"states": 4, "leader_epochs": 3, "leaders": [1, 2, -1], "min_isr_size": 0, "offline": 1,
                 "elr_seen": True}


def test_agreement_compares_verdicts_anomalies_and_whether_each_acks_level_lost_writes():
    a = {"valid": True, "anomaly_types": [], "durability": {"acks=all": {"acked": 9, "lost": 0},
                                                             "acks=1": {"acked": 9, "lost": 3}}}
    b = {"valid": True, "anomaly_types": [], "durability": {"acks=all": {"acked": 7, "lost": 0},
                                                             "acks=1": {"acked": 8, "lost": 0}}}
    assert compare.agreement(a, b) == {"verdict": True, "acks=1 loss": False, "acks=all loss": True}


def test_anomaly_diff_leaves_out_what_only_the_reference_trace_can_see():
    a = {"anomaly_types": ["leader-completeness", "lost-acked-write", "inconsistent-offsets"],
         "history_anomalies": ["lost-acked-write", "inconsistent-offsets"]}
    b = {"anomaly_types": ["lost-acked-write", "unseen"], "history_anomalies": ["lost-acked-write", "unseen"]}
    assert compare.anomaly_diff(a, b) == {"reference only": ["inconsistent-offsets"], "kafka only": ["unseen"]}


@pytest.mark.slow
@pytest.mark.integration
def test_compare_runs_both_dbs_with_one_seed(tmp_path):
    r = kraftwerk("compare", "--out", str(tmp_path / "r"), "--combined", "--nemesis", "kill", "--time-limit", "10",
                  "--seed", "9", "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-600:]
    res = json.loads(r.stdout)
    assert res["seed"] == 9 and res["reference"]["valid"] is True and res["kafka"]["valid"] is True
    assert res["reference"]["partitions"] and res["kafka"]["partitions"]
