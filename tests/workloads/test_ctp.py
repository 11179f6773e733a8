"""Consume-transform-produce (``--workload ctp``, workloads/ctp.py) on the
reference implementation: one consumer group copies the input topic to
``<prefix>out`` and commits, at least once (the reference has no
transaction coordinator). The processing checker
(checkers/queue/processing.py) judges the run; its rules have unit cases
in tests/checkers/test_processing.py. The exactly-once form on real Kafka
is tests/kafka/test_kafka_ctp.py (slow)."""

import json
import os
import sys
from pathlib import Path

import pytest

from tests.stuck import run_or_dump
from workloads.ctp import output_key, output_keys

ROOT = Path(__file__).resolve().parents[2]


def test_an_input_key_maps_to_the_output_partition_of_the_same_number():
    assert output_key("t3-1", "t") == "tout-1"
    assert output_keys(["t0-0", "t0-1", "t1-1"], "t") == ["tout-0", "tout-1"]


@pytest.mark.integration
def test_a_ctp_run_under_kills_and_client_crashes_processes_every_committed_input(tmp_path):
    """A broker killed at a time moves partition leaders and, when it is
    the coordinator, the group; crashed members are replaced every 2 s or
    so. Every input the group committed past has its output in the output
    topic (no lost-processing), and the run is valid (duplicates, if any,
    are allowed at least once).

    The members are static (KIP-345, ``--static-members``): a crashed
    member sends no LeaveGroup, so a dynamic group would hold its
    partitions for the member's 6 s session after every crash, and a crash
    every 2 s would keep it rebalancing all run (tests/workloads/
    test_crash_group.py proves that rule). A static member's replacement
    takes its place under the same group.instance.id instead."""
    r = run_or_dump([sys.executable, "-c", "from harness.cli import main; main()", "run", "--workload", "ctp",
                        "--static-members", "--nemesis", "kill:one", "--nemesis-interval", "4", "--crash-clients",
                        "--crash-client-interval", "8", "--time-limit", "16", "--partitions", "4", "--seed", "5",
                        "--out", str(tmp_path), "--json", "--no-progress", "--no-report"],
                    timeout=300, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 0, r.stderr[-800:]
    res = json.loads(r.stdout)
    p = res["checkers"]["processing"]
    assert p["mode"] == "at-least-once" and p["valid"] is True, p
    # about 130 rounds and 250 inputs, idle or with two busy loops beside it
    assert p["rounds_by_type"].get("ok", 0) > 30 and p["inputs_processed"] > 60, p
    assert set(p["committed"]) == {f"t0-{i}" for i in range(4)}, p["committed"]
    assert "lost-processing" not in res["anomaly_types"]
    ops = [json.loads(line) for line in open(Path(res["run_dir"]) / "history.jsonl")]
    outs = {k for o in ops if o["f"] == "poll" and o.get("output") and o["type"] == "ok" for k in o["value"][0][1]}
    assert outs == {f"tout-{i}" for i in range(4)}, outs
    # one crash every 2 s of the 16: whichever operation each one met
    assert sum(o.get("error") == "crashed" for o in ops) >= 4
    kills = [o for o in ops if o["process"] == "nemesis" and o["f"] == "start-kill" and o.get("value", {}).get("nodes")]
    assert kills and all(len(o["value"]["nodes"]) == 1 for o in kills), kills
    assert json.loads((Path(res["run_dir"]) / "test.json").read_text())["workload"] == "ctp"
    assert res["valid"] is True
