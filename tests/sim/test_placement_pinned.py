"""A pinned placement: a run records the replicas its topics were created
with (``placement`` in test.json), and a schedule that carries one creates
the topics with that explicit assignment, so a recorded decommission's
moves fit the replicas again and replay as recorded instead of being
planned anew (``harness.config.placement``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.cli.options import config_from_flags
from harness.config import build_config
from harness.lifecycle.runner import run_seed

#: not the model's own placement (its round-robin from n1 gives t0-0 n1,n2,n3 and t0-1 n2,n3,n4)
PINNED = {"t0-0": ["n3", "n4", "n1"], "t0-1": ["n4", "n1", "n2"]}
CFG = {"backend": "sim", "brokers": 4, "time_limit": 20, "acks": "all"}
#: a decommission of n4 recorded on the pinned placement: n2 takes its place in both partitions
DECOMMISSION = [
    {"at_ms": 3000, "f": "start-decommission", "fault": "decommission", "target": "one", "nodes": ["n4"],
     "moves": {"t0-0": ["n3", "n2", "n1"], "t0-1": ["n3", "n1", "n2"]}},
    {"at_ms": 15000, "f": "stop-decommission", "fault": "decommission"},
]


def _first_replicas(run_dir: str) -> dict[str, list[str]]:
    """Each partition's replicas in the controllers' first committed record of it."""
    first: dict[str, list[str]] = {}
    for trace in sorted(Path(run_dir).glob("nodes/c*/trace.jsonl")):
        for e in map(json.loads, trace.read_text().splitlines()):
            if e["kind"] == "partition_metadata" and e["tp"] not in first:
                first[e["tp"]] = [f"n{r}" for r in e["replicas"]]
    return first


def _replay(tmp_path: Path, placement: dict[str, list[str]] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    f = tmp_path / "schedule.json"
    f.write_text(json.dumps({"placement": placement, "schedule": DECOMMISSION}))
    cfg = config_from_flags("sim", {"schedule": str(f), **{k: v for k, v in CFG.items() if k != "backend"}})
    res = run_seed(cfg, 1, tmp_path)
    test = json.loads((Path(res["run_dir"]) / "test.json").read_text())
    return res, next(e for e in test["schedule"] if e["f"] == "start-decommission")


def test_a_pinned_placement_creates_the_topics_with_its_replicas_in_their_order(tmp_path: Path) -> None:
    res, _ = _replay(tmp_path, PINNED)
    assert _first_replicas(res["run_dir"]) == PINNED
    assert json.loads((Path(res["run_dir"]) / "test.json").read_text())["placement"] == PINNED


def test_moves_recorded_on_the_pinned_placement_replay_as_recorded(tmp_path: Path) -> None:
    res, start = _replay(tmp_path, PINNED)
    assert start["moves"] == DECOMMISSION[0]["moves"] and "recorded_moves" not in start
    assert res["valid"] is True


def test_without_the_pin_the_same_moves_do_not_fit_and_are_planned_anew(tmp_path: Path) -> None:
    res, start = _replay(tmp_path, None)
    assert _first_replicas(res["run_dir"]) == {"t0-0": ["n1", "n2", "n3"], "t0-1": ["n2", "n3", "n4"]}
    assert start["recorded_moves"] == DECOMMISSION[0]["moves"] and set(start["moves"]) == {"t0-1"}


def test_a_run_records_its_placement_and_a_replay_of_its_test_json_pins_it(tmp_path: Path) -> None:
    res = run_seed(build_config(None, {**CFG, "time_limit": 2}), 1, tmp_path)
    test_json = Path(res["run_dir"]) / "test.json"
    recorded = json.loads(test_json.read_text())["placement"]
    assert recorded == {"t0-0": ["n1", "n2", "n3"], "t0-1": ["n2", "n3", "n4"]}
    assert config_from_flags("sim", {"schedule": str(test_json)}).placement == recorded
