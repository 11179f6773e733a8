"""A run's fault schedule is recorded in test.json in the shared vocabulary
and replays: exactly in the simulator (same seed, same schedule: the same
history, byte for byte)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.config import TestConfig
from harness.errors import UsageError
from harness.cli.options import config_from_flags
from harness.lifecycle.runner import run_seed
from nemesis.replay import MAX_SCHEDULE_BYTES, ScheduleError, load, schedule_of

CFG = TestConfig(backend="sim", time_limit=8, nemesis=["kill", "partition", "clock", "pause"], nemesis_interval=1,
                 rate=60, seed=4)


def test_the_schedule_is_each_nemesis_completion_but_the_final_heal_from_the_start():
    ops = [
        {"process": 0, "time": 5_000_000, "f": "send", "value": None},
        {"process": "nemesis", "time": 9_000_000, "f": "start-kill", "value": {"fault": "kill"}},
        {"process": "nemesis", "time": 9_000_000, "f": "start-kill",
         "value": {"fault": "kill", "target": "one", "nodes": ["n2"]}},
        {"process": "nemesis", "time": 12_000_000, "f": "stop-kill", "value": {"fault": "all", "final": True}},
        {"process": "nemesis", "time": 12_000_000, "f": "stop-kill",
         "value": {"fault": "all", "final": True, "kill": {"restarted": ["n2"]}}},
    ]
    assert schedule_of(ops, t0_ns=1_000_000) == [
        {"at_ms": 8, "f": "start-kill", "fault": "kill", "target": "one", "nodes": ["n2"]}]


def test_a_simulated_schedule_replays_to_the_same_history_byte_for_byte(tmp_path: Path):
    first = Path(run_seed(CFG, 4, tmp_path / "a")["run_dir"])
    test = json.loads((first / "test.json").read_text())
    assert test["schedule"] and {e["fault"] for e in test["schedule"]} <= {f.name for f in CFG.nemesis}
    cfg = config_from_flags("sim", {"schedule": str(first / "test.json"), "out": str(tmp_path / "b")})
    assert (cfg.seed, cfg.time_limit, cfg.nemesis) == (4, 8, [])  # the recorded run's settings, no new draw
    again = Path(run_seed(cfg, cfg.seed, tmp_path / "b")["run_dir"])
    assert (again / "history.jsonl").read_bytes() == (first / "history.jsonl").read_bytes()
    assert json.loads((again / "test.json").read_text())["schedule"] == test["schedule"]


STORIES = TestConfig(backend="sim", time_limit=24, scenario="leader-churn,isr-crash,last-replica-standing,expand-race",
                     nemesis_interval=3, rate=40, seed=6)


def test_a_storys_follow_up_steps_are_nemesis_ops_in_the_schedule_and_replay_byte_for_byte(tmp_path: Path):
    """A story's steps (cluster.step_after) are history operations, pairs
    of nemesis infos in the shared vocabulary; the schedule holds them and
    a replay applies them as recorded: the same history (seed 6: see the
    test below)."""
    first = Path(run_seed(STORIES, 6, tmp_path / "a")["run_dir"])
    ops = [json.loads(line) for line in (first / "history.jsonl").read_text().splitlines()]
    steps = [o for o in ops if o["f"] == "step-partition"]
    assert steps and len(steps) % 2 == 0
    for inv, comp in zip(steps[::2], steps[1::2]):
        assert inv["type"] == comp["type"] == "info" and inv["process"] == "nemesis"
        assert inv["value"] == {"fault": comp["value"]["fault"]} and comp["value"]["step"]
    test = json.loads((first / "test.json").read_text())
    recorded = [{k: v for k, v in e.items() if k != "at_ms"} for e in test["schedule"] if e["f"] == "step-partition"]
    assert recorded == [{"f": "step-partition", **c["value"]} for c in steps[1::2]]
    cfg = config_from_flags("sim", {"schedule": str(first / "test.json"), "out": str(tmp_path / "b")})
    again = Path(run_seed(cfg, cfg.seed, tmp_path / "b")["run_dir"])
    assert (again / "history.jsonl").read_bytes() == (first / "history.jsonl").read_bytes()


STORIES_WITH_FAULTS = TestConfig(backend="sim", time_limit=20, scenario="leader-churn,isr-crash,expand-race",
                                 nemesis=["partition", "kill"], nemesis_interval=2, rate=60)


@pytest.mark.parametrize("cfg,seed,holds", [(STORIES_WITH_FAULTS, 40, "step"), (STORIES, 54, "skipped")],
                         ids=["step-set-at-once", "skipped-start"])
def test_a_replayed_story_schedule_gives_the_same_history(tmp_path: Path, cfg: TestConfig, seed: int, holds: str):
    """A story's timers run ahead of their millisecond's other events
    (EventLoop.first), whenever they were set. As ordinary timers, in seed
    6 (the test above) the told story set its isolate-successor step 2 ms
    ahead, the replay when the start op ran, and two messages due that
    millisecond arrived before the cut in the run, after it in the replay;
    in seed 48 (before the broker lifecycle had its own heartbeat
    connection; seed 40 has a step now) the look that found the new leader
    acted at once, after a message already due then, where the replay's
    step, set earlier, acted before it. Seed 54
    has a story start skipped (no partition had a known leader: Metadata
    named none, as the observer reads it, a paused or killed leader
    counting until it is moved): it replays as recorded, its target
    included."""
    first = Path(run_seed(cfg, seed, tmp_path / "a")["run_dir"])
    schedule = json.loads((first / "test.json").read_text())["schedule"]
    if holds == "step":
        assert any(e["f"] == "step-partition" for e in schedule)
    else:
        assert any(e["fault"].startswith("story:") and "skipped" in e and "target" in e for e in schedule)
    again_cfg = config_from_flags("sim", {"schedule": str(first / "test.json"), "out": str(tmp_path / "b")})
    again = Path(run_seed(again_cfg, again_cfg.seed, tmp_path / "b")["run_dir"])
    assert (again / "history.jsonl").read_bytes() == (first / "history.jsonl").read_bytes()


def test_steps_are_paired_apart_from_the_nemesis_threads_ops():
    """On real hosts a step acts on a timer thread, between the nemesis
    thread's invocation and its completion: each pair is still found."""
    ops = [
        {"process": "nemesis", "time": 1_000_000, "f": "stop-partition", "value": {"fault": "isr-crash"}},
        {"process": "nemesis", "time": 2_000_000, "f": "step-partition", "value": {"fault": "story:isr-crash"}},
        {"process": "nemesis", "time": 2_000_000, "f": "step-partition",
         "value": {"fault": "story:isr-crash", "step": "kill", "nodes": ["n1"]}},
        {"process": "nemesis", "time": 3_000_000, "f": "stop-partition",
         "value": {"fault": "story:isr-crash", "healed": True}},
    ]
    assert schedule_of(ops) == [
        {"at_ms": 2, "f": "step-partition", "fault": "story:isr-crash", "step": "kill", "nodes": ["n1"]},
        {"at_ms": 3, "f": "stop-partition", "fault": "story:isr-crash", "healed": True}]


@pytest.mark.parametrize("content,needle", [
    ("not json", "not JSON"),
    ('{"seed": 1}', "no schedule"),
    ('[{"at_ms": "soon", "f": "start-kill", "fault": "kill"}]', "entry 0 needs at_ms"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"schedule": [], "nemesis": [1]}', "list of fault names"),
    (b"\xff\xfe[]", "not JSON"),
])
def test_a_bad_schedule_file_is_one_line(tmp_path: Path, content: str, needle: str):
    f = tmp_path / "s.json"
    f.write_bytes(content) if isinstance(content, bytes) else f.write_text(content)
    with pytest.raises(ScheduleError, match=needle) as e:
        load(f)
    assert "\n" not in str(e.value)
    with pytest.raises(UsageError, match=needle):
        config_from_flags("sim", {"schedule": str(f)})


def test_a_schedule_with_a_fault_the_runtime_cannot_make_is_refused(tmp_path: Path, capsys):
    from harness.cli import main

    f = tmp_path / "s.json"
    f.write_text('[{"at_ms": 100, "f": "start-loss", "fault": "loss", "probability": 0.1}]')
    with pytest.raises(SystemExit) as e:
        main(["run", "--schedule", str(f), "--out", str(tmp_path / "r")])
    assert e.value.code == 2 and "loss needs loss" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "huge"])
def test_a_schedule_that_is_no_regular_file_or_too_big_is_one_line_at_once(tmp_path: Path, kind: str):
    """A FIFO is not waited on, /dev/zero is not read without end."""
    f = tmp_path / "s.json"
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "device":
        f.symlink_to("/dev/zero")
    elif kind == "directory":
        f.mkdir()
    else:
        with open(f, "wb") as out:
            out.truncate(MAX_SCHEDULE_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(ScheduleError, match="bytes, more than" if kind == "huge" else "not a regular file") as e:
        load(f)
    assert "\n" not in str(e.value)
    with pytest.raises(UsageError, match="bytes, more than" if kind == "huge" else "not a regular file"):
        config_from_flags("sim", {"schedule": str(f)})  # the settings a replay takes over are read the same way
