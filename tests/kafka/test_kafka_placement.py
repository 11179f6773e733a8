"""A pinned placement on real Kafka 4.4: a schedule that carries one has
Kafka create the topic with that explicit replica assignment (CreateTopics'
assignments, ``confluent_kafka.admin.NewTopic(replica_assignment=...)``)
instead of its own striped placement from a random broker, and a move
recorded on those replicas replays as recorded; a hunt's real run, from
the schedule file the hunt writes, gets the model run's placement."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.hunt import sim_config
from harness.config import TestConfig
from harness.search.hunt import Hunt, sim_one

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]
#: both partitions led by n4: Kafka's own placement spreads the preferred leaders, so never picks this
PINNED = {"t0-0": ["n4", "n2", "n1"], "t0-1": ["n4", "n3", "n2"]}
SWAP = {"at_ms": 1000, "f": "start-reassign", "fault": "reassign", "target": "swap", "key": "t0-0",
        "from": ["n4", "n2", "n1"], "nodes": ["n4", "n2", "n3"]}


def _first_look(run_dir: Path) -> dict[str, list[str]]:
    """Each partition's replicas as the observer first read them, in Kafka's order."""
    first: dict[str, list[str]] = {}
    for e in map(json.loads, (run_dir / "nodes" / "observer" / "trace.jsonl").read_text().splitlines()):
        if e["kind"] == "partition_metadata" and e["tp"] not in first:
            first[e["tp"]] = [f"n{r}" for r in e["replicas"]]
    return first


def test_a_schedule_with_a_placement_creates_the_topic_with_it_on_kafka(tmp_path: Path) -> None:
    f = tmp_path / "schedule.json"
    f.write_text(json.dumps({"brokers": 4, "placement": PINNED, "schedule": [
        SWAP, {"at_ms": 5000, "f": "stop-reassign", "fault": "reassign"}]}))
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--db", "kafka",
                        "--combined", "--schedule", str(f), "--time-limit", "8", "--seed", "1",
                        "--out", str(tmp_path / "out"), "--json"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode in (0, 1), r.stderr[-800:]
    run_dir = Path(json.loads(r.stdout)["run_dir"])
    assert _first_look(run_dir) == PINNED  # the observer's first look, in Kafka's replica order
    test = json.loads((run_dir / "test.json").read_text())
    assert test["placement"] == PINNED
    start = next(e for e in test["schedule"] if e["f"] == "start-reassign")
    assert start["nodes"] == SWAP["nodes"] and "recorded_nodes" not in start  # the recorded swap, not re-planned


def test_a_hunt_confirms_on_kafka_with_the_replicas_the_model_had(tmp_path: Path) -> None:
    """The hunt's real run (``Hunt.confirm``, not the command line) creates
    Kafka's topic with the model run's placement from the schedule file, so
    the swap the model made on those replicas plays as recorded."""
    real = TestConfig(db="kafka", backend="local", combined=True, brokers=4, time_limit=8, acks="all",
                      out=str(tmp_path / "runs"), name="hunt")
    sim = sim_config(real).model_copy(update={"placement": PINNED})  # a model run placed as Kafka never would
    stop = {"at_ms": 5000, "f": "stop-reassign", "fault": "reassign"}
    r = sim_one(sim, 1, [SWAP, stop], str(tmp_path / "sim"))
    assert r["placement"] == PINNED and not r.get("error")
    hunt = Hunt(sim, real, 86_400, tmp_path / "hunt", say=lambda _: None)
    hunt.load()
    hunt.state["candidates"].append({"id": 0, "seed": 1, "near": [], "new_states": [], "score": 1,
                                     "schedule": r["schedule"], "placement": r["placement"],
                                     "sim": {"valid": r["valid"], "run_dir": r["run_dir"], "summary": r["summary"]}})
    hunt.confirm(600)
    (pair,) = hunt.state["pairs"]
    run_dir = Path(pair["real"]["run_dir"])
    assert json.loads(Path(pair["schedule_file"]).read_text())["placement"] == PINNED
    assert _first_look(run_dir) == PINNED
    start = next(e for e in json.loads((run_dir / "test.json").read_text())["schedule"] if e["f"] == "start-reassign")
    assert start["nodes"] == SWAP["nodes"] and "recorded_nodes" not in start
