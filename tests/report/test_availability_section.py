"""The run page's availability section (harness/report/availability.py) and
the cause beside a verdict: a partition left leaderless after the heal says
why at the top of the page, and the table gives, per fault change and for
the final heal, how long each partition was without a leader and without an
acknowledged acks=all write."""

from __future__ import annotations

import re
from pathlib import Path

from harness.config import TestConfig
from harness.lifecycle.runner import run_seed, sim_run
from harness.report import render_report
from harness.report.availability import section as availability_section
from harness.rundir import store
from harness.runtimes.sim import SimRun


def _page(tmp_path: Path, **cfg) -> str:
    res = run_seed(TestConfig(backend="sim", seed=1, **cfg), 1, out=tmp_path)
    return render_report(res["run_dir"], plots=False).read_text()


def test_a_partition_down_by_design_names_its_rule_at_the_top_and_in_the_table(tmp_path) -> None:
    html = _page(tmp_path, brokers=1, rf=1, min_isr=1, nemesis=["lose-unfsynced:all"], time_limit=12,
                 protocol={"unclean.recovery.manager.enabled": "true", "unclean.recovery.strategy": "None"})
    box = re.search(r'<div id="verdict-box".*?</div>', html, re.S).group(0)
    assert ">UNKNOWN<" in box and "ISR empty, ELR empty" in box
    table = re.search(r'<table id="availability-table">.*?</table>', html, re.S).group(0)
    assert "<th>t0-0</th><th>t0-1</th>" in table
    assert re.search(r"<strong>final heal</strong></td><td>— · never</td><td>— · never</td>", table)
    assert "start-lose-unfsynced lose-unfsynced:all c1, c2, c3, n1" in table
    assert "unavailable after the heal:</strong> t0-0: no eligible leader by the election rules" in html


def test_a_healthy_run_shows_each_partition_back_within_the_bound(tmp_path) -> None:
    html = _page(tmp_path, nemesis=["kill"], time_limit=10)
    table = re.search(r'<table id="availability-table">.*?</table>', html, re.S).group(0)
    heal = re.search(r"<strong>final heal</strong></td>(.*?)</tr>", table).group(1)
    assert "never" not in heal and len(re.findall(r"\d+\.\d s", heal)) == 4
    assert "the run's bound: 16.0 s" in html and "unavailable after the heal" not in html


def test_a_stuck_partition_fails_the_run_and_the_story_gives_its_cause(tmp_path) -> None:

    def stuck(run: SimRun) -> None:  # the controllers paused after the heal, the brokers restarted
        for cid in run.sim.controller_ids:
            run.sim.pause(cid)
        for bid in run.sim.broker_ids:
            run.sim.kill(bid)
            run.sim.restart(bid)

    d = tmp_path / "run"
    (d / "nodes").mkdir(parents=True)
    run = sim_run(TestConfig(backend="sim", nemesis=["kill"], time_limit=10, seed=3), 3, d)
    run.after_heal = stuck
    store.write_json(d / "test.json", run.test_json())
    store.write_json(d / "results.json", run.run())
    html = render_report(d, plots=False).read_text()
    story = re.search(r'<dl id="story">.*?</dl>', html, re.S).group(0)
    assert "failed: availability (unavailable)" in html
    assert re.search(r"<dt>Cause</dt><dd>t0-0, t0-1 unavailable after the heal: the controller quorum had no leader "
                     r"\(c1 paused, c2 paused, c3 paused\)", story)


def test_where_kafkas_observer_was_blind_the_section_names_the_stretch_and_the_figures_it_touches() -> None:
    cell = {"leaderless_ms": 12910.0, "no_write_ms": 19090.0, "observer_blind": [[20.0, 30.1]],
            "note": "leaderless 12.1-30.4 s; the observer was blind 20.0-30.1 s (no broker answered)"}
    av = {"rows": [{"t_s": 12.0, "event": "start-kill n1", "partitions": {"t0-0": cell, "t0-1": {}}},
                   {"t_s": 25.0, "event": "stop-kill", "partitions": {"t0-0": cell}}],
          "final": {"t_s": 34.0, "partitions": {"t0-0": {"leader_after_ms": 0.0, "write_after_ms": 300.0}}},
          "observer_blind": [{"from_s": 20.0, "to_s": 30.1, "why": "no broker answered"}]}
    sec = availability_section({"availability": av})
    assert sec["blind"] == ["20.0-30.1 s (no broker answered)",
                            "t0-0: leaderless 12.1-30.4 s; the observer was blind 20.0-30.1 s (no broker answered)"]
    del av["observer_blind"], av["rows"][0]["partitions"]["t0-0"]["note"]
    assert availability_section({"availability": av})["blind"] == []
