"""Swarm testing: each seed draws its own subset of the mix and schedule
parameters from the seed alone, records the draw in test.json, and so
replays exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from nemesis.faults import GENERIC, expand
from nemesis.swarm import draw


def test_a_swarm_draw_is_a_function_of_the_seed_and_a_subset_of_the_mix():
    mix = expand(["all"])
    draws = [draw(mix, s) for s in range(40)]
    assert draws == [draw(mix, s) for s in range(40)]
    assert all(d.faults and set(d.faults) <= set(mix) for d in draws)
    assert len({d.faults for d in draws}) > 30 and {d.mode for d in draws} == {"sequential", "overlap"}


def _sim(tmp: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    with pytest.raises(SystemExit):
        main(["sim", "--seed", "11", "--swarm", "--time-limit", "6", "--out", str(tmp), "--json", "--no-report", *args])
    return json.loads(capsys.readouterr().out)


def test_a_swarm_seed_records_its_draw_in_test_json_and_replays_byte_identical(tmp_path, capsys):
    a = _sim(tmp_path / "a", capsys)
    b = _sim(tmp_path / "b", capsys)
    ta = json.loads((Path(a["run_dir"]) / "test.json").read_text())
    d = draw(expand(GENERIC), 11)
    assert (ta["swarm"], ta["swarm_of"], tuple(ta["nemesis"]), ta["nemesis_interval"], ta["nemesis_mode"]) == \
        (True, list(GENERIC), tuple(f.name for f in d.faults), d.interval_s, d.mode)
    assert (Path(a["run_dir"]) / "history.jsonl").read_bytes() == (Path(b["run_dir"]) / "history.jsonl").read_bytes()


def test_swarm_is_refused_on_real_processes(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--swarm", "--out", str(tmp_path), "--time-limit", "1"])
    assert e.value.code == 2 and "--swarm" in capsys.readouterr().err
