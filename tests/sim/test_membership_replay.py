"""A recorded reassign or decommission replayed where the replicas were
placed otherwise (a schedule drawn on the model replayed on Kafka, whose
round-robin starts at a random broker, or Kafka's played schedule replayed
on the model): the replay makes the same kind of change to the replicas as
they are now, not the recorded lists, which would move more than one
replica or leave the broker a replica of a partition the recording never
saw; an exact replay plays the recorded lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.config import build_config
from harness.lifecycle.runner import run_seed

#: the model's placement with 4 brokers and RF 3: t0-0 on n1, n2, n3; t0-1 on n2, n3, n4
CFG = {"backend": "sim", "brokers": 4, "time_limit": 20, "acks": "all"}


def _replay(tmp_path: Path, entries: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    f = tmp_path / "schedule.json"
    f.write_text(json.dumps({"schedule": entries}))
    res = run_seed(build_config(None, CFG).replaying(str(f)), 1, tmp_path)
    ops = [json.loads(line) for line in (Path(res["run_dir"]) / "history.jsonl").read_text().splitlines()]
    return res, [o for o in ops if o["process"] == "nemesis" and len(o.get("value") or {}) > 1]


def _replicas(run_dir: str, tp: str) -> list[str]:
    """The partition's last replica list in the controllers' committed metadata."""
    last: list[int] = []
    for trace in sorted(Path(run_dir).glob("nodes/c*/trace.jsonl")):
        for e in map(json.loads, trace.read_text().splitlines()):
            if e["kind"] == "partition_metadata" and e["tp"] == tp and not e.get("adding_replicas"):
                last = e["replicas"]
    return [f"n{r}" for r in last]


def test_a_reassign_recorded_on_another_placement_swaps_one_replica_of_the_list_as_it_is_now(tmp_path: Path) -> None:
    kafka = {"at_ms": 3000, "f": "start-reassign", "fault": "reassign", "target": "swap", "key": "t0-0",
             "from": ["n2", "n3", "n1"], "nodes": ["n2", "n4", "n1"]}  # n3 out, n4 in, on Kafka's order
    res, ops = _replay(tmp_path, [kafka, {"at_ms": 9000, "f": "stop-reassign", "fault": "reassign"}])
    start = next(o["value"] for o in ops if o["f"] == "start-reassign")
    assert start["from"] == ["n1", "n2", "n3"] and start["nodes"] == ["n1", "n2", "n4"]
    assert start["recorded_nodes"] == ["n2", "n4", "n1"] and start["recorded_from"] == ["n2", "n3", "n1"]
    assert _replicas(res["run_dir"], "t0-0") == ["n1", "n2", "n4"]  # the preferred leader kept
    assert res["valid"] is True


def test_a_decommission_whose_recorded_moves_miss_a_partition_of_the_broker_is_planned_again(tmp_path: Path) -> None:
    kafka = {"at_ms": 3000, "f": "start-decommission", "fault": "decommission", "target": "one", "nodes": ["n2"],
             "moves": {"t0-0": ["n1", "n4", "n3"]}}  # on Kafka n2 replicated t0-0 only
    res, ops = _replay(tmp_path, [kafka, {"at_ms": 15000, "f": "stop-decommission", "fault": "decommission"}])
    start = next(o["value"] for o in ops if o["f"] == "start-decommission")
    assert start["recorded_moves"] == kafka["moves"] and set(start["moves"]) == {"t0-0", "t0-1"}
    stop = next(o["value"] for o in ops if o["f"] == "stop-decommission")
    assert stop["steps"] == ["moved", "shut-down", "unregistered"]
    assert all("n2" not in _replicas(res["run_dir"], tp) for tp in ("t0-0", "t0-1"))
    assert res["valid"] is True


def test_an_exact_replay_plays_the_recorded_lists(tmp_path: Path) -> None:
    own = [{"at_ms": 3000, "f": "start-reassign", "fault": "reassign", "target": "swap", "key": "t0-0",
            "from": ["n1", "n2", "n3"], "nodes": ["n1", "n2", "n4"]},
           {"at_ms": 8000, "f": "start-decommission", "fault": "decommission", "target": "one", "nodes": ["n1"],
            "moves": {"t0-0": ["n3", "n2", "n4"]}},
           {"at_ms": 15000, "f": "stop-reassign", "fault": "reassign"},
           {"at_ms": 15000, "f": "stop-decommission", "fault": "decommission"}]
    _, ops = _replay(tmp_path, own)
    starts = [o["value"] for o in ops if o["f"].startswith("start-")]
    assert [s["nodes"] for s in starts] == [["n1", "n2", "n4"], ["n1"]]
    assert starts[1]["moves"] == {"t0-0": ["n3", "n2", "n4"]}
    assert not any(k.startswith("recorded_") for s in starts for k in s)


def test_a_reassign_asked_while_the_first_broker_asked_is_down_reaches_the_controller_at_once(tmp_path: Path) -> None:
    """The admin endpoint asks t0-1's move through n2 first; n2's process is
    down, so its host refuses the connection and n3 is asked at once, as
    ``harness.dbs.admin`` meets ECONNREFUSED on Kafka (whose observer listed such a
    move within 0.3 s). Waiting out the request timeout on the dead broker
    held the move 6 s or more, and the model's later moves were recorded
    against replicas Kafka no longer had."""
    kill = {"at_ms": 2000, "f": "start-kill", "fault": "kill:one", "target": "one", "nodes": ["n2"]}
    move = {"at_ms": 3000, "f": "start-reassign", "fault": "reassign", "target": "swap", "key": "t0-1",
            "from": ["n2", "n3", "n4"], "nodes": ["n1", "n3", "n4"]}
    res, ops = _replay(tmp_path, [kill, move, {"at_ms": 12000, "f": "stop-kill", "fault": "kill:one"},
                                  {"at_ms": 15000, "f": "stop-reassign", "fault": "reassign"}])
    asked_ms = next(o["time"] for o in ops if o["f"] == "start-reassign") / 1e6
    taken = [e["t"] for trace in sorted(Path(res["run_dir"]).glob("nodes/c*/trace.jsonl"))
             for e in map(json.loads, trace.read_text().splitlines())
             if e["kind"] == "partition_metadata" and e["tp"] == "t0-1" and e.get("adding_replicas") == [1]]
    assert taken and min(taken) - asked_ms < 500, (asked_ms, taken)


def test_a_reassign_whose_recorded_request_failed_moves_nothing_on_replay(tmp_path: Path) -> None:
    """Kafka's played schedule records a reassign whose request was refused
    (an older admin path, ECONNREFUSED from one broker): nothing moved
    there, so nothing moves here, rather than a swap drawn anew."""
    failed = {"at_ms": 3000, "f": "start-reassign", "fault": "reassign",
              "error": "KafkaConnectionError: KafkaConnectionError: 111 ECONNREFUSED"}
    res, ops = _replay(tmp_path, [failed, {"at_ms": 9000, "f": "stop-reassign", "fault": "reassign"}])
    start = next(o["value"] for o in ops if o["f"] == "start-reassign")
    assert start.get("error") == failed["error"] and "nodes" not in start
    assert _replicas(res["run_dir"], "t0-0") == ["n1", "n2", "n3"]
    assert _replicas(res["run_dir"], "t0-1") == ["n2", "n3", "n4"]


def _stop_during_shutdown(tmp_path: Path, stop_ms: int) -> tuple[dict[str, Any], dict[str, Any]]:
    dec = {"at_ms": 3000, "f": "start-decommission", "fault": "decommission", "target": "one", "nodes": ["n2"],
           "moves": {"t0-0": ["n1", "n4", "n3"], "t0-1": ["n1", "n3", "n4"]}}
    res, ops = _replay(tmp_path, [dec, {"at_ms": stop_ms, "f": "stop-decommission", "fault": "decommission"}])
    return res, next(o["value"] for o in ops if o["f"] == "stop-decommission")


def test_a_decommission_stopped_while_its_broker_shuts_down_starts_it_again_once_down(tmp_path: Path) -> None:
    """The stop comes after the broker was told to shut down and before it
    is down: it is started again once down, not left down until a later
    heal (Kafka's controlled shutdown outlasted such a stop by seconds
    where the model's was over, and a replay's next move waited on it)."""
    res, stop = _stop_during_shutdown(tmp_path, 3510)
    assert stop["steps"] == ["moved"] and stop["starts_when_down"] == "n2"
    ops = [json.loads(line) for line in (Path(res["run_dir"]) / "history.jsonl").read_text().splitlines()]
    stopped_ms = next(o["time"] for o in ops if o["f"] == "stop-decommission" and len(o["value"]) > 1) / 1e6
    trace = (Path(res["run_dir"]) / "nodes" / "n2" / "trace.jsonl").read_text().splitlines()
    restarts = [e["t"] for e in map(json.loads, trace) if e["kind"] == "node_start" and e["reason"] != "start"]
    assert any(stopped_ms < t < stopped_ms + 3000 for t in restarts), (stopped_ms, restarts)
