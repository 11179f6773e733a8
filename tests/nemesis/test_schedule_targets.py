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


SCRIPTED = TestConfig(backend="sim", scenario="last-replica-standing", time_limit=40, rate=40, seed=1)
KIP966_FINDING = Path(__file__).resolve().parents[2] / "docs/findings/releases/kip-966-3.9.2-s1.json"


def _starts(run_dir: Path) -> list[dict]:
    return [e for e in _schedule(run_dir) if e["f"].startswith("start-")]


def test_a_scripted_scenarios_schedule_replays_as_faults_of_the_shared_vocabulary(tmp_path: Path):
    """The script's steps were recorded as ``"fault": "scenario"``; replayed,
    each is the fault it is (an isolate a partition with its cut, a power
    loss a lose-unfsynced of its nodes), at its recorded time, on the nodes
    the roles name again: in the simulator the same ones."""
    first = Path(run_seed(SCRIPTED, 1, tmp_path / "a")["run_dir"])
    assert {e["fault"] for e in _schedule(first)} == {"scenario"}
    cfg = config_from_flags("sim", {"schedule": str(first / "test.json"), "out": str(tmp_path / "b")})
    assert [f.name for f in cfg.faults()] == ["partition", "lose-unfsynced"] and cfg.script() is None
    again = Path(run_seed(cfg, cfg.seed, tmp_path / "b")["run_dir"])
    recorded, replayed = _schedule(first), _schedule(again)
    assert [(e["at_ms"], e["f"]) for e in replayed] == [(e["at_ms"], e["f"]) for e in recorded]
    assert [e["fault"] for e in replayed] == ["partition", "partition", "lose-unfsynced", "partition",
                                              "lose-unfsynced"]
    for was, now in zip(_starts(first), _starts(again)):
        assert (now.get("cut"), now.get("nodes"), now["roles"]) == (was.get("cut"), was.get("nodes"), was["roles"])
        assert "recorded_nodes" not in now and "recorded_cut" not in now
    assert "resolution_differs" not in json.loads((again / "summary.json").read_text())


def test_a_replayed_scenario_cuts_and_powers_off_the_leader_the_replay_finds(tmp_path: Path):
    """The recording says n9 led t0-0 (L) with n7 and n8 its followers:
    the replay binds the roles from the cluster it meets, isolates that
    leader from its followers and powers it off, and says what it renamed."""
    roles = {"L": "n9", "F": "n7", "G": "n8", "key": "t0-0"}
    step = {"fault": "scenario", "scenario": "last-replica-standing", "roles": roles}
    entries = [
        {**step, "at_ms": 3000, "f": "start-partition", "step": 1, "action": "isolate", "cut": [["n9", "n7"], ["n7", "n9"]]},
        {**step, "at_ms": 9000, "f": "start-partition", "step": 3, "action": "isolate",
         "cut": [["n7", "n9"], ["n8", "n9"], ["n9", "n7"], ["n9", "n8"]]},
        {**step, "at_ms": 15000, "f": "start-lose-unfsynced", "step": 5, "action": "power-loss", "nodes": ["n9"]},
        {**step, "at_ms": 20000, "f": "stop-partition", "step": 7, "action": "heal"},
        {**step, "at_ms": 25000, "f": "stop-lose-unfsynced", "step": 9, "action": "restart", "nodes": ["n9"]},
    ]
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"seed": 1, "time_limit": 30, "brokers": 9, "rate": 40, "schedule": entries}))
    cfg = config_from_flags("sim", {"schedule": str(f), "out": str(tmp_path / "r")})
    run = Path(run_seed(cfg, cfg.seed, tmp_path / "r")["run_dir"])
    cut1, cut2, power = _starts(run)
    now = power["roles"]
    assert now["key"] == "t0-0" and len({now["L"], now["F"], now["G"]}) == 3 and now != roles
    assert cut1["roles"] == cut2["roles"] == now and power["recorded_roles"] == roles
    assert cut1["cut"] == sorted([[now["L"], now["F"]], [now["F"], now["L"]]])
    assert cut2["cut"] == sorted([[a, b] for x in (now["F"], now["G"]) for a, b in ((x, now["L"]), (now["L"], x))])
    assert power["nodes"] == [now["L"]] and power["recorded_nodes"] == ["n9"]
    differs = json.loads((run / "summary.json").read_text())["resolution_differs"]
    assert {"at_ms": power["at_ms"], "fault": "lose-unfsynced", "recorded": ["n9"], "now": [now["L"]]} in differs
    assert {"at_ms": cut2["at_ms"], "fault": "partition", "recorded": ["n7-n9", "n8-n9"],
            "now": sorted("-".join(sorted((now["L"], x))) for x in (now["F"], now["G"]))} in differs


def test_the_kip966_findings_schedule_loads_for_a_kafka_replay():
    """The shipped finding (a scripted last-replica-standing on Kafka 3.9.2)
    is a schedule ``kraftwerk run --schedule`` takes: its steps are a
    partition and a power loss of the shared vocabulary."""
    cfg = config_from_flags("netns", {"schedule": str(KIP966_FINDING), "db": "kafka", "storage": "lazyfs",
                                      "kafka_version": "3.9.2"})
    assert [f.name for f in cfg.faults()] == ["partition", "lose-unfsynced"] and cfg.script() is None
    assert (cfg.seed, cfg.time_limit) == (1, 60)
