"""A replayed start whose target the protocol's state names (a partition's
leader, the active controller, an ISR state) is named again from the
cluster as the replay finds it, and the run says where that named other
nodes than the recording; a schedule that cannot be this cluster's, or
that is not a schedule, is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.options import config_from_flags
from harness.config import TestConfig
from harness.lifecycle.runner import run_seed

STATE_NAMED = TestConfig(backend="sim", time_limit=10, nemesis=["kill:primaries", "partition:controller",
                                                                 "clock:isr-followers", "pause:controller"],
                         nemesis_interval=1.5, rate=40, seed=3)


def _schedule(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "test.json").read_text())["schedule"]


def test_an_exact_replay_names_the_recorded_nodes_again_and_plays_the_same_history(tmp_path: Path):
    first = Path(run_seed(STATE_NAMED, 3, tmp_path / "a")["run_dir"])
    recorded = _schedule(first)
    assert {e["target"] for e in recorded if e["f"].startswith("start-") and "target" in e} & \
        {"primaries", "controller", "isr-followers"}
    cfg = config_from_flags("sim", {"schedule": str(first / "test.json"), "out": str(tmp_path / "b")})
    again = Path(run_seed(cfg, cfg.seed, tmp_path / "b")["run_dir"])
    assert (again / "history.jsonl").read_bytes() == (first / "history.jsonl").read_bytes()
    assert not any("recorded_nodes" in e for e in _schedule(again))
    assert "resolution_differs" not in json.loads((again / "summary.json").read_text())


def test_a_leader_target_recorded_on_another_node_kills_the_leader_the_replay_finds(tmp_path: Path):
    """The recording says n3 led t0-0; whoever leads it when the replay
    gets there is killed, and the summary names both."""
    entries = [{"at_ms": 3000, "f": "start-kill", "fault": "kill:primaries", "target": "primaries",
                "key": "t0-0", "nodes": ["n9"]},
               {"at_ms": 5000, "f": "stop-kill", "fault": "kill:primaries", "restarted": ["n9"]}]
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"seed": 1, "time_limit": 8, "brokers": 9, "schedule": entries}))
    cfg = config_from_flags("sim", {"schedule": str(f), "out": str(tmp_path / "r")})
    run = Path(run_seed(cfg, cfg.seed, tmp_path / "r")["run_dir"])
    start = next(e for e in _schedule(run) if e["f"] == "start-kill")
    assert start["recorded_nodes"] == ["n9"] and start["nodes"] and start["nodes"] != ["n9"]
    leader_then = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    assert any(o["process"] == "nemesis" and o["f"] == "start-kill" and o["value"].get("nodes") == start["nodes"]
               for o in leader_then)
    differs = json.loads((run / "summary.json").read_text())["resolution_differs"]
    assert differs == [{"at_ms": start["at_ms"], "fault": "kill:primaries", "recorded": ["n9"],
                        "now": start["nodes"]}]


def test_a_pinned_schedule_replays_its_recorded_nodes_whatever_the_state(tmp_path: Path):
    entries = [{"at_ms": 3000, "f": "start-kill", "fault": "kill:primaries", "target": "primaries",
                "key": "t0-0", "nodes": ["n5"]},
               {"at_ms": 5000, "f": "stop-kill", "fault": "kill:primaries", "restarted": []}]
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"targets": "as-recorded", "seed": 1, "time_limit": 8, "brokers": 5,
                             "schedule": entries}))
    cfg = config_from_flags("sim", {"schedule": str(f), "out": str(tmp_path / "r")})
    run = Path(run_seed(cfg, cfg.seed, tmp_path / "r")["run_dir"])
    start = next(e for e in _schedule(run) if e["f"] == "start-kill")
    assert start["nodes"] == ["n5"] and "recorded_nodes" not in start


@pytest.mark.parametrize("content,needle", [
    ("{", "not JSON"),
    ('[{"at_ms": 1, "f": "start-zap", "fault": "zap"}]', "unknown nemesis 'zap'"),
    ('[{"at_ms": 1, "f": "start-kill", "fault": "kill", "target": "one", "nodes": ["n7"]}]',
     "names nodes this cluster does not have: n7"),
    ('[{"at_ms": 1, "f": "start-partition", "fault": "partition", "cut": [["n1", "x4"]]}]',
     "names nodes this cluster does not have: x4"),
    ('{"targets": "maybe", "schedule": []}', "targets is 'resolve'"),
    ('[{"at_ms": 1, "f": "start-lose-unfsynced", "fault": "torn-write", "target": "one", "nodes": ["n1"]}]',
     "torn-write needs torn-write"),
])
@pytest.mark.parametrize("command", [["sim"], ["run", "--db", "kafka", "--backend", "netns"]])
def test_a_schedule_that_cannot_be_replayed_here_is_one_line_and_exit_2(tmp_path: Path, capsys, content: str,
                                                                          needle: str, command: list[str]):
    f = tmp_path / "s.json"
    f.write_text(content)
    with pytest.raises(SystemExit) as e:
        main([*command, "--schedule", str(f), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and needle in err and "\n" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("history.jsonl"))
