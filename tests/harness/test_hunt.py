"""kraftwerk hunt: search on the model with the real db's timeouts, replay
the ranked schedules on real processes from their files, classify each
pair, write the page and JSON, and resume an interrupted hunt from its
state; bad input is one line and exit 2.

The end-to-end hunts run the reference implementation on local processes
(the quickest real db here); on Kafka the same command takes ``--db kafka``
(docs/analysis-kafka-4.4.md, "A hunt")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import TestConfig
from harness.config.timings import kafka_mapped
from harness.search.hunt import CLASSES, classify, exit_code, near_misses, same_settings

ROOT = Path(__file__).resolve().parents[2]
HUNT = ["hunt", "--db", "reference", "--backend", "local", "--time-limit", "6", "--explore-share", "0.25"]


def _hunt(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_each_pair_is_classed_by_the_two_verdicts():
    assert [classify(a, b) for a, b in ((False, False), (False, True), (True, False), (True, True),
                                        ("unknown", True), (True, None))] == \
        ["both-invalid", "model-only", "real-only", "both-valid", "unknown", "unknown"]
    assert exit_code([{"class": "both-valid"}]) == 0
    assert exit_code([{"class": "both-valid"}, {"class": "unknown"}]) == 3
    assert exit_code([{"class": "unknown"}, {"class": "model-only"}]) == 1


def test_a_near_miss_is_a_leader_alone_in_its_isr_that_commits():
    before = [{"kind": "hw", "node": 1, "tp": "t0-0", "role": "leader", "hw": 4, "leo": 4},
              {"kind": "isr", "node": 1, "tp": "t0-0", "isr": [1]}]
    commits = [*before, {"kind": "hw", "node": 1, "tp": "t0-0", "role": "leader", "hw": 9, "leo": 9}]
    assert near_misses(iter(commits)) == {"isr-of-one-commits"}
    rejoined = [*before, {"kind": "isr", "node": 1, "tp": "t0-0", "isr": [1, 2]}, commits[-1]]
    assert near_misses(iter(rejoined)) == set()
    assert near_misses(iter([{"kind": "election", "data_kind": "unclean"},
                             {"kind": "election", "data_kind": "last-known-leader"}])) == {"election-unclean"}


def test_the_model_runs_with_kafkas_timeouts():
    mapped = kafka_mapped(3)
    assert mapped == {"replica_lag_time_max_ms": 3000, "request_timeout_ms": 5000}
    from harness.cli.hunt import sim_config
    sim = sim_config(TestConfig(db="kafka", backend="netns", time_limit=15, nemesis=["kill"]))
    assert (sim.backend, sim.db, sim.protocol, [f.name for f in sim.nemesis]) == ("sim", "reference", mapped, ["kill"])


def test_reassign_and_decommission_join_the_mix_only_where_a_replica_has_a_broker_to_move_to():
    from harness.cli.hunt import both_make
    three = {f.kind for f in both_make(TestConfig(db="kafka", backend="netns", brokers=3, rf=3))}
    four = {f.kind for f in both_make(TestConfig(db="kafka", backend="netns", brokers=4, rf=3))}
    assert not three & {"reassign", "decommission"}
    assert four - three == {"reassign", "decommission"}


@pytest.mark.parametrize("args,needle", [
    (["--budget", "0"], "must be positive"),
    (["--budget", "soon"], "want seconds"),
    (["--budget", "1m", "--explore-share", "1.5"], "--explore-share"),
    (["--budget", "1m", "--schedule", "x.json"], "draws its own schedules"),
    (["--budget", "1m", "--nemesis", "zap"], "unknown nemesis"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, args: list[str], needle: str):
    with pytest.raises(SystemExit) as e:
        main(["hunt", "--db", "kafka", "--out", str(tmp_path / "h"), *args])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and needle in err and "\n" not in err
    assert not (tmp_path / "h").exists()


def test_a_hunt_state_of_other_settings_is_refused(tmp_path: Path, capsys):
    out = tmp_path / "h"
    out.mkdir()
    (out / "hunt.json").write_text(json.dumps({"format": "kraftwerk-hunt/1", "settings": {"budget_s": 1}}))
    with pytest.raises(SystemExit) as e:
        main([*HUNT, "--budget", "60s", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "other settings" in err and "\n" not in err


def test_a_small_hunt_confirms_ranked_schedules_on_real_processes_and_resumes(tmp_path: Path):
    out = tmp_path / "h"
    first = _hunt([*HUNT, "--budget", "100s", "--out", str(out)])
    assert first.returncode in (0, 1, 3), first.stderr
    assert "explore" in first.stdout and "confirm #" in first.stdout  # progress as it goes
    state = json.loads((out / "hunt.json").read_text())
    assert state["phase"] == "done" and state["tried"] > 10 and state["pairs"]
    assert state["spent_s"] <= 100 + 60  # within its budget, but for one run longer than the last one measured
    for p in state["pairs"]:
        assert p["class"] in CLASSES and p["class"] == classify(p["sim"]["valid"], p["real"]["valid"])
        sched = json.loads(Path(p["schedule_file"]).read_text())
        assert sched["seed"] == p["seed"] and sched["time_limit"] == 6 and "protocol" not in sched
        # the model's placement, pinned: the real run created its topics with the replicas the model had
        modelled = json.loads(Path(p["sim"]["run_dir"], "test.json").read_text())["placement"]
        assert sched["placement"] == modelled and len(modelled) == 2
        assert json.loads(Path(p["real"]["run_dir"], "test.json").read_text())["placement"] == modelled
        assert Path(p["real"]["run_dir"], "results.json").exists() and p["late_ms"] >= 0
    assert [p["score"] for p in state["pairs"]] == sorted((p["score"] for p in state["pairs"]), reverse=True)
    page = (out / "index.html").read_text()
    assert "Hunt" in page and all(p["command"] in page for p in state["pairs"])
    assert json.loads((out / "hunt-pairs.json").read_text())["classes"][state["pairs"][0]["class"]] >= 1
    # interrupted after its exploration, before any real run: it goes on from there
    state.update(phase="confirm", pairs=[], spent_s=state["explore_s"])
    (out / "hunt.json").write_text(json.dumps(state))
    again = _hunt([*HUNT, "--budget", "100s", "--out", str(out)])
    assert again.returncode in (0, 1, 3), again.stderr
    assert "resuming" in again.stdout and "explore " not in again.stdout
    resumed = json.loads((out / "hunt.json").read_text())
    assert resumed["tried"] == state["tried"] and resumed["pairs"] and resumed["phase"] == "done"


def test_a_setting_added_since_the_state_was_saved_resumes_at_its_default_only():
    now = {"real": TestConfig(db="kafka", time_limit=15).model_dump(mode="json"), "budget_s": 60}
    saved = json.loads(json.dumps(now))
    del saved["real"]["liveness"]
    assert same_settings(saved, now)
    assert not same_settings(saved, {**now, "real": {**now["real"], "liveness": "strict"}})
    assert not same_settings(saved, {**now, "real": {**now["real"], "time_limit": 16.0}})
    assert not same_settings({**saved, "real": {**saved["real"], "gone": 1}}, now)
    assert not same_settings({**saved, "budget_s": 61}, now)
