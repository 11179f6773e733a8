"""Campaigns on real Kafka 4.4 (KRaft) on the netns backend (root: real
addresses, partitions by iptables), through the CLI. Each takes 1.5-3
minutes, so they are ``slow``: ``bench/kafka_matrix.py --pytest`` runs them.

* a faithful campaign (partition, kill, pause, clock; acks=all, RF 3, min
  ISR 2, 60 s) is valid;
* acks=1 under the leader-kill story loses acks=1 writes, acks=all none;
* with unclean.leader.election.enable=true (and ELR off, as before KIP-966)
  the unclean-election story loses acknowledged acks=all writes and is
  invalid; with it off, valid;
* power loss of every node (data directories through kraftwerk fs) under
  Kafka's default flush policy (never fsync) loses acknowledged acks=all
  writes; with log.flush.interval.messages=1 it loses none;
* latency on every link (NFQUEUE and a delayer per namespace) is made, not
  refused: the run is valid and its sends take longer while it is in force.
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _root():
    if os.geteuid() != 0:
        pytest.skip("the netns backend needs root")


def run(tmp_path, *args, timeout=900):
    out = tmp_path / "results"
    r = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "run", "--db", "kafka", "--backend", "netns",
         "--out", str(out), "--json", "--no-progress", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""},
    )
    assert r.returncode in (0, 1), f"exit {r.returncode}: {r.stderr[-800:]}"
    assert not list((out / ".state").glob("*.json")), "state file left behind"
    return r.returncode, json.loads(r.stdout)


def test_acks_all_rf3_min_isr2_under_partition_kill_pause_clock_is_valid_on_kafka(tmp_path):
    code, res = run(tmp_path, "--nemesis", "partition,kill,pause,clock", "--nemesis-interval", "5",
                    "--time-limit", "60", "--seed", "11", "--acks", "all")
    assert res["durability"]["acks=all"]["acked"] > 100 and res["durability"]["acks=all"]["lost"] == 0
    assert res["valid"] is True and code == 0, res["anomaly_types"]


def test_acks1_loses_writes_under_leader_kills_on_kafka_and_acks_all_none(tmp_path):
    code, res = run(tmp_path, "--scenario", "acks1-leader-kill", "--acks", "mixed", "--seed", "8")
    assert res["durability"]["acks=1"]["lost"] > 0
    assert res["durability"]["acks=all"]["lost"] == 0


def test_unclean_election_on_kafka_loses_acked_acks_all_writes(tmp_path):
    code, res = run(tmp_path, "--scenario", "unclean-loss", "--variant", "unclean_election=on",
                    "--variant", "kip966=off", "--seed", "5")
    assert res["valid"] is False and code == 1
    assert res["durability"]["acks=all"]["lost"] > 0 and "lost-acked-write" in res["anomaly_types"]


def test_without_unclean_election_the_same_story_is_valid_on_kafka(tmp_path):
    code, res = run(tmp_path, "--scenario", "unclean-loss", "--variant", "kip966=off", "--seed", "5")
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0


def test_power_loss_of_every_node_under_the_default_flush_policy_loses_acked_writes(tmp_path):
    code, res = run(tmp_path, "--nemesis", "lose-unfsynced", "--nemesis-interval", "5", "--time-limit", "25",
                    "--seed", "12")
    assert res["valid"] is False and res["durability"]["acks=all"]["lost"] > 0


def test_power_loss_with_an_fsync_per_message_loses_nothing(tmp_path):
    code, res = run(tmp_path, "--nemesis", "lose-unfsynced", "--nemesis-interval", "5", "--time-limit", "25",
                    "--seed", "12", "--kafka-config", "log.flush.interval.messages=1")
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0


def send_latencies(history: Path) -> tuple[list[float], list[float]]:
    """Ack latencies (ms) of the ok sends invoked while a latency fault was
    in force, and of the rest."""
    ops = [json.loads(line) for line in history.read_text().splitlines()]
    windows, start = [], None
    for o in ops:
        if o["process"] == "nemesis" and isinstance(o.get("value"), dict) and "ms" in o["value"]:
            start = o["time"]
        elif o["process"] == "nemesis" and o["f"] == "stop-latency" and start is not None:
            windows.append((start, o["time"]))
            start = None
    inside, outside, invoked = [], [], {}
    for o in ops:
        if o["f"] != "send":
            continue
        if o["type"] == "invoke":
            invoked[o["process"]] = o["time"]
        elif o["type"] == "ok" and o["process"] in invoked:
            t0 = invoked.pop(o["process"])
            (inside if any(a <= t0 <= b for a, b in windows) else outside).append((o["time"] - t0) / 1e6)
    return inside, outside


def test_latency_on_every_link_is_made_on_kafka_and_slows_its_acks(tmp_path):
    code, res = run(tmp_path, "--nemesis", "latency", "--nemesis-interval", "5", "--time-limit", "30",
                    "--seed", "4", "--acks", "all")
    assert res["valid"] is True and code == 0, res["anomaly_types"]
    run_dir = Path(res["run_dir"])
    assert any("bound" in p.read_text() for p in run_dir.glob("nodes/*/delayer.log"))
    inside, outside = send_latencies(run_dir / "history.jsonl")
    assert inside and outside
    assert statistics.median(inside) > 2 * statistics.median(outside), (statistics.median(inside),
                                                                       statistics.median(outside))
