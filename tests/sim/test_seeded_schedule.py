"""The fault schedule is drawn from the seed alone: the clients' rate and
concurrency (what they draw from the generator's rng, how fast they go)
change no fault's kind, target, order or nominal time; a target drawn
rather than read from protocol state names the same nodes. In the
simulator the nemesis is never busy, so each fault happens at its nominal
time. (tests/harness/test_schedule_parity.py holds real processes to the
simulator's schedule.)"""

from __future__ import annotations

from typing import Any

import pytest

from harness.config import TestConfig
from harness.lifecycle.runner import sim_run

#: targets drawn from the seed (the rest are read from the cluster's state)
DRAWN = {"one", "minority", "majority", "all", "isolate-one", "halves", "majorities-ring", "bridge", "one-way"}


def drawn(schedule: list[dict[str, Any]]) -> list[tuple]:
    """What of a schedule the seed alone decides."""
    out = []
    for e in schedule:
        if e["f"].startswith("step-"):
            continue
        made = tuple(str(e.get(k)) for k in ("nodes", "cut", "offsets_ms")) if e.get("target") in DRAWN else ()
        out.append((e["f"], e["fault"], e.get("target"), e["nominal_ms"], made))
    return out


@pytest.mark.parametrize("mode", ["sequential", "overlap"])
def test_the_fault_schedule_does_not_change_with_the_clients_rate_or_concurrency(mode: str):
    base = TestConfig(backend="sim", nemesis=["kill:one", "pause:minority", "partition:halves", "partition:primaries",
                                              "clock:majority", "kill:isr-followers"],
                      nemesis_mode=mode, nemesis_interval=1.5, time_limit=12, seed=9)
    schedules = []
    for rate, concurrency in ((20, 2), (80, 6)):
        run = sim_run(base.model_copy(update={"rate": rate, "concurrency": concurrency}), 9)
        run.run(release=True)
        schedules.append(run.schedule)
    assert len(drawn(schedules[0])) >= 8
    assert drawn(schedules[0]) == drawn(schedules[1])
    for s in schedules:  # never busy: each at its nominal time
        assert all(e["at_ms"] == e["nominal_ms"] for e in s if "nominal_ms" in e)


def test_another_seed_draws_another_schedule():
    cfg = TestConfig(backend="sim", nemesis=["kill:one", "pause:minority", "partition:halves"], nemesis_interval=1.5,
                     time_limit=8)
    a, b = sim_run(cfg, 1), sim_run(cfg, 2)
    a.run(release=True)
    b.run(release=True)
    assert drawn(a.schedule) != drawn(b.schedule)
