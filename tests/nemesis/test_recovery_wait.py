"""The wait after the final heal: elections and catch-up, plus as long as
this run's clock faults hold timers once the clocks are reset (a clock set
ahead by D goes back by D; a node's timers wait for it), not the most any
clock fault could (a minute), which every run with a clock fault paid."""

from __future__ import annotations

import json
from pathlib import Path

from harness.config import TestConfig
from harness.lifecycle.runner import run_seed
from nemesis.faults import clock_held_ms

NS = 1_000_000_000


def test_a_clock_set_ahead_holds_its_timers_for_its_offset_and_one_set_back_for_nothing():
    assert clock_held_ms({"nodes": ["n1", "n2"], "offsets_ms": {"n1": 1200, "n2": -40_000}}) == 1200
    assert clock_held_ms({"offsets_ms": {"n1": -500}}) == 0
    assert clock_held_ms({"delta_ms": 300, "period_ms": 10}) == 300
    # a final heal reports per fault
    assert clock_held_ms({"clock:one": {"reset": ["n1"]}, "kill": {"restarted": []}}) == 0


def _final_wait_s(run_dir: Path) -> tuple[float, int]:
    ops = [json.loads(line) for line in open(run_dir / "history.jsonl")]
    heal = max(o["time"] for o in ops if o["process"] == "nemesis" and (o.get("value") or {}).get("final"))
    reads = min(o["time"] for o in ops if o.get("final") and o["type"] == "invoke")
    held = max((clock_held_ms(o["value"]) for o in ops if o["process"] == "nemesis" and o["type"] == "info"
                and isinstance(o.get("value"), dict)), default=0)
    return (reads - heal) / NS, held


def test_the_recovery_wait_is_the_base_plus_what_this_runs_clocks_held(tmp_path: Path):
    """Simulated (virtual time: the wait is exact): seeds whose clock faults
    set clocks ahead wait that much longer, the others the base alone."""
    seen_held = False
    for seed in range(1, 9):
        cfg = TestConfig(backend="sim", time_limit=6, nemesis=["clock"], nemesis_interval=1, rate=20, seed=seed)
        res = run_seed(cfg, seed, tmp_path / str(seed))
        wait, held = _final_wait_s(Path(res["run_dir"]))
        base = 5.0  # max(5, min(15, 2 * interval))
        assert base + held / 1000 <= wait < base + held / 1000 + 1.0, (seed, wait, held)
        seen_held |= held > 0
    assert seen_held, "no seed set a clock ahead"
