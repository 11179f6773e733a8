"""The story composites are scenarios (``--scenario``), not faults to name in
``--nemesis``: given alone, a story is told at random moments of the
schedule; given with a mix, it joins that mix (first, as the composites
stood when they were faults); ``last-replica-standing`` alone plays its
script. The same rules hold for flags and a YAML file."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.options import config_from_flags
from harness.config import TestConfig, build_config, load_yaml
from harness.errors import UsageError
from nemesis.faults import FaultSpec
from reference_impl.core.config import ProtocolConfig


def names(faults: tuple[FaultSpec, ...]) -> tuple[str, ...]:
    return tuple(f.name for f in faults)


def test_a_story_with_a_mix_joins_it_first_and_is_no_script():
    cfg = TestConfig(backend="sim", scenario="isr-crash", nemesis=["partition-leader"])
    assert names(cfg.nemesis) == ("partition:primaries",) and cfg.stories() == ("isr-crash",) and cfg.script() is None
    plan = cfg.nemesis_plan(ProtocolConfig())
    assert names(plan.faults) == ("story:isr-crash", "partition:primaries") and plan.scenario is None


def test_stories_alone_are_the_whole_mix_and_several_combine():
    cfg = TestConfig(backend="sim", scenario="expand-race,leader-churn")
    assert cfg.nemesis == [] and names(cfg.faults()) == ("story:expand-race", "story:leader-churn")
    assert cfg.has_nemesis()


def test_last_replica_standing_alone_plays_its_script_and_with_a_mix_is_the_story():
    alone = TestConfig(backend="sim", scenario="last-replica-standing")
    assert alone.script() == "last-replica-standing" and names(alone.faults()) == ()
    mixed = TestConfig(backend="sim", scenario="last-replica-standing", nemesis=["power-loss-one"])
    assert mixed.script() is None and names(mixed.faults()) == ("story:last-replica-standing", "lose-unfsynced:one")


def test_a_yaml_file_takes_the_same_rules(tmp_path: Path):
    good = tmp_path / "good.yaml"
    good.write_text("scenario: leader-churn\nnemesis: kill\n")
    cfg = build_config(load_yaml(good), {"backend": "sim"})
    assert names(cfg.faults()) == ("story:leader-churn", "kill")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nemesis: leader-churn,kill\n")
    with pytest.raises(UsageError, match="leader-churn is a story composite: use --scenario leader-churn"):
        build_config(load_yaml(bad), {"backend": "sim"})


def test_a_recorded_story_run_replays_its_story_from_the_schedule(tmp_path: Path):
    from harness.lifecycle.runner import run_seed

    cfg = TestConfig(backend="sim", scenario="isr-crash", nemesis=["partition-leader"], time_limit=20,
                     nemesis_interval=3, seed=1, out=str(tmp_path / "a"))
    first = Path(run_seed(cfg, 1, tmp_path / "a")["run_dir"])
    again = config_from_flags("sim", {"schedule": str(first / "test.json"), "out": str(tmp_path / "b")})
    assert "story:isr-crash" in names(again.faults())
    rerun = Path(run_seed(again, again.seed, tmp_path / "b")["run_dir"])
    assert (rerun / "history.jsonl").read_bytes() == (first / "history.jsonl").read_bytes()
