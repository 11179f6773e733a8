"""Campaigns against the bundled reference broker on this machine, through the
CLI, with short time limits (each run takes about a minute: cluster start-up,
the schedule, recovery, final reads).

* today's rules (acks=all, RF 3, min ISR 2) under partition+kill+pause+clock:
  valid, no acknowledged write lost (slow: tests/backends/test_netns_run.py
  makes the same run on netns in the default suite);
* the historical variants with the schedule that exposes them (seeds 002 and
  003): unclean election on (under pre-KIP-966 rules, as in seed 003), or
  KIP-966 off, loses acknowledged writes, and the same schedule with the
  variant off loses none;
* acks=1 under leader kills loses writes while acks=all loses none.

The scripted scenarios take 1-1.5 minutes each, so they are ``slow``:
``bench/campaign_matrix.py`` runs them (``-m slow`` on this file) and prints
the figures.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path, *args, timeout=400):
    out = tmp_path / "results"
    r = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "run", "--out", str(out), "--json", "--no-report", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""},
    )
    assert r.returncode in (0, 1), f"exit {r.returncode}: {r.stderr[-800:]}"
    res = json.loads(r.stdout)
    assert not list((out / ".state").glob("*.json")), "state file left behind"
    return r.returncode, res


@pytest.mark.slow  # the same run on netns (tests/backends/test_netns_run.py) and local (tests/runtimes) is in the default suite
def test_acks_all_rf3_min_isr2_under_partition_kill_pause_clock_loses_nothing(tmp_path):
    code, res = run(tmp_path, "--nemesis", "partition,kill,pause,clock", "--nemesis-interval", "3",
                    "--time-limit", "20", "--seed", "11", "--acks", "all")
    nem = [json.loads(l) for l in open(Path(res["run_dir"]) / "history.jsonl") if '"nemesis"' in l]
    assert any(o["f"].startswith("start-") for o in nem), "no fault was injected"
    assert res["durability"]["acks=all"]["acked"] > 50
    assert res["durability"]["acks=all"]["lost"] == 0
    assert res["valid"] is True, res["anomaly_types"]
    assert code == 0


@pytest.mark.slow
def test_unclean_election_on_loses_acknowledged_writes_seed003(tmp_path):
    code, res = run(tmp_path, "--scenario", "unclean-loss", "--variant", "unclean_election=on",
                    "--variant", "kip966=off", "--seed", "3")
    assert res["valid"] is False and code == 1
    assert res["durability"]["acks=all"]["lost"] > 0
    assert "lost-acked-write" in res["anomaly_types"]


@pytest.mark.slow
def test_clean_election_only_keeps_acknowledged_writes_seed003(tmp_path):
    code, res = run(tmp_path, "--scenario", "unclean-loss", "--variant", "kip966=off", "--seed", "3")
    assert res["durability"]["acks=all"]["acked"] > 50
    assert res["durability"]["acks=all"]["lost"] == 0
    assert res["valid"] is True and code == 0


@pytest.mark.slow
def test_kip966_off_last_replica_standing_loses_acknowledged_writes_seed002(tmp_path):
    code, res = run(tmp_path, "--scenario", "last-replica-standing", "--variant", "kip966=off", "--seed", "3")
    assert res["valid"] is False and code == 1
    assert res["durability"]["acks=all"]["lost"] > 0


@pytest.mark.slow
def test_kip966_on_last_replica_standing_elects_from_elr_and_loses_nothing(tmp_path):
    code, res = run(tmp_path, "--scenario", "last-replica-standing", "--seed", "3")
    assert res["durability"]["acks=all"]["acked"] > 50
    assert res["durability"]["acks=all"]["lost"] == 0
    assert res["valid"] is True and code == 0


@pytest.mark.slow
def test_acks1_loses_writes_under_leader_kills_while_acks_all_loses_none(tmp_path):
    code, res = run(tmp_path, "--scenario", "acks1-leader-kill", "--acks", "mixed", "--seed", "3")
    d = res["durability"]
    assert d["acks=1"]["acked"] > 50 and d["acks=all"]["acked"] > 50
    assert d["acks=1"]["lost"] > 0
    assert d["acks=all"]["lost"] == 0


def test_a_subscribe_campaign_with_rebalances_under_kills_is_valid(tmp_path):
    """Jepsen's sub-via subscribe: one consumer group, partitions handed out
    by the reference broker's group coordinator and moved by rebalances
    (members joining, subscribing again, and one node at a time killed, the
    coordinator's broker among them); the poll
    skips and re-reads a rebalance explains are allowed, nothing else is.
    One node, not any number: seed 5's plain kill takes every node twice, and
    on a busy machine the group never formed between the two."""
    code, res = run(tmp_path, "--sub-via", "subscribe", "--nemesis", "kill:one", "--nemesis-interval", "3",
                    "--time-limit", "15", "--partitions", "4", "--seed", "5")
    run_dir = Path(res["run_dir"])
    ops = [json.loads(l) for l in open(run_dir / "history.jsonl")]
    assert any(o["f"] == "start-kill" for o in ops), "no fault was injected"
    assert any(o["f"] == "subscribe" and o["type"] == "ok" for o in ops)
    # moved: revoked from a member, or handed to a second one
    owners: dict[str, set] = {}
    for o in ops:
        for e in o.get("rebalance-log", ()):
            if e["event"] == "assigned":
                for k in e["keys"]:
                    owners.setdefault(k, set()).add(o["process"])
    revoked = [e for o in ops for e in o.get("rebalance-log", ()) if e["event"] == "revoked"]
    assert revoked or any(len(ps) > 1 for ps in owners.values()), "no rebalance moved a partition"
    assert json.loads((run_dir / "test.json").read_text())["sub_via"] == "subscribe"
    # about 80 acknowledged in 15 s on an idle machine; a busy one slows the clients, not the rule
    assert res["durability"]["acks=all"]["acked"] > 20 and res["durability"]["acks=all"]["lost"] == 0
    assert {"poll-skip", "nonmonotonic-poll"} <= set(res["checkers"]["queue"]["allowed_anomaly_types"])
    assert res["valid"] is True, res["anomaly_types"]
    assert code == 0
