"""A nemesis mix is parsed once, where it enters (the configuration's
validation, a recorded schedule's load), into typed ``FaultSpec`` values
that travel to the schedule and the faults; test.json names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nemesis.faults
from harness.cli.options import config_from_flags
from harness.config import TestConfig
from harness.lifecycle.runner import run_seed
from nemesis.faults import FaultSpec
from reference_impl.core.config import ProtocolConfig


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every name nemesis.faults.parse is asked to read from now on."""
    seen: list[str] = []
    real = nemesis.faults.parse

    def counting(name: str) -> FaultSpec:
        seen.append(name)
        return real(name)

    monkeypatch.setattr(nemesis.faults, "parse", counting)
    return seen


def test_the_nemesis_flag_is_parsed_once_from_the_command_line_to_the_first_fault(tmp_path: Path, parses: list[str]):
    cfg = config_from_flags("sim", {"nemesis": "kill,partition-leader", "time_limit": 4.0, "nemesis_interval": 1.0,
                                    "out": str(tmp_path)})
    assert cfg.nemesis == [FaultSpec("kill"), FaultSpec("partition", "primaries")]
    res = run_seed(cfg, 3, tmp_path)
    history = [json.loads(line) for line in (Path(res["run_dir"]) / "history.jsonl").read_text().splitlines()]
    started = {op["value"]["fault"] for op in history if op["f"].startswith("start-") and op["type"] == "info"}
    assert started and started <= {"kill", "partition:primaries"}
    assert parses == ["kill", "partition-leader"]


def test_a_replayed_schedule_is_parsed_when_it_is_loaded_and_not_again(tmp_path: Path, parses: list[str]):
    sched = tmp_path / "s.json"
    sched.write_text(json.dumps([{"at_ms": 500, "f": "start-kill", "fault": "kill:one"},
                                 {"at_ms": 1500, "f": "stop-kill", "fault": "kill:one"}]))
    cfg = TestConfig(backend="sim", schedule=str(sched), time_limit=3)
    assert parses == ["kill:one"]
    assert cfg.faults() == (FaultSpec("kill", "one"),)
    assert cfg.nemesis_plan(ProtocolConfig()).faults == (FaultSpec("kill", "one"),)
    run_seed(cfg, 1, tmp_path)
    assert parses == ["kill:one"]


def test_test_json_names_the_mix_and_reads_back_to_the_same_specs():
    cfg = TestConfig(backend="sim", nemesis="leader-kill,pause", seed=2)
    dumped = cfg.test_json()
    assert dumped["nemesis"] == ["kill:primaries", "pause"]
    assert TestConfig(**{k: dumped[k] for k in ("backend", "nemesis", "seed")}).nemesis == cfg.nemesis


def test_a_mix_that_is_not_names_is_a_one_line_error():
    with pytest.raises(ValueError, match="nemesis"):
        TestConfig(backend="sim", nemesis=[5])
