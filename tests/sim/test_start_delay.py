"""A restarted process in the simulator comes up ``start_delay_ms`` after
the nemesis asks (a JVM's start on a real host: the differential campaign
measured 5-12 s for Kafka here), down meanwhile; 0, the default, starts it
at once, as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import TestConfig
from harness.lifecycle.runner import run_seed
from reference_impl.sim.host import DOWN, UP
from reference_impl.sim.simulation import Simulation


def _killed(delay: int) -> Simulation:
    sim = Simulation(7, start_delay_ms=delay)
    sim.start()
    sim.loop.run_until(sim.loop.now + 3000)
    sim.kill(1)
    return sim


def test_a_restart_without_a_delay_starts_the_process_at_once():
    sim = _killed(0)
    sim.restart(1)
    assert sim.hosts[1].state == UP


def test_a_restarted_process_is_down_until_its_start_delay_has_passed():
    sim = _killed(2500)
    t, inc = sim.loop.now, sim.hosts[1].incarnation
    sim.restart(1)
    sim.restart(1)  # asked again while starting: still one start
    sim.loop.run_until(t + 2499)
    assert sim.hosts[1].state == DOWN
    sim.loop.run_until(t + 2500)
    assert sim.hosts[1].state == UP and sim.hosts[1].incarnation == inc + 1
    sim.loop.run_until(t + 6000)
    assert sim.hosts[1].incarnation == inc + 1


def test_a_run_with_a_start_delay_brings_each_killed_node_back_that_much_after_the_restart(tmp_path):
    cfg = TestConfig(backend="sim", time_limit=12, nemesis=["kill:one"], nemesis_interval=3, start_delay_ms=4000, rate=20)
    res = run_seed(cfg, 3, tmp_path)
    run = Path(res["run_dir"])
    restarts = [(int(o["time"]) // 1_000_000, n) for o in map(json.loads, (run / "history.jsonl").open())
                if o["process"] == "nemesis" and o["f"] == "stop-kill" and isinstance(o.get("value"), dict)
                for n in o["value"].get("restarted") or ()]
    started = [json.loads(line) for f in (run / "nodes").glob("*/trace.jsonl") for line in f.open()
               if '"node_start"' in line and '"restart"' in line]
    assert restarts
    for t, n in restarts:
        nid = int(n[1:]) + (100 if n.startswith("c") else 0)
        first = min(e["t"] for e in started if e["node"] == nid and e["t"] >= t)
        assert 4000 <= first - t < 4000 + 50


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_a_bad_start_delay_is_one_line_and_exit_2(capsys, value: str):
    with pytest.raises(SystemExit) as e:
        main(["sim", "--seeds", "1", "--start-delay-ms", value])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and "\n" not in err and "start" in err
