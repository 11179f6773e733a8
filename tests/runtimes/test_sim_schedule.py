"""A simulated seed's schedule (test.json's ``schedule``) is made of the
nemesis operations the checkers' walk hands over
(:meth:`harness.runtimes.sim.SimRun.results`): it must be what
:func:`nemesis.replay.schedule_of` reads of the whole history, and be
there even when the checkers stop before the walk."""

from __future__ import annotations

import pytest

from harness.config import TestConfig
from harness.lifecycle.runner import sim_run
from nemesis import replay

CFG = TestConfig(backend="sim", nemesis=["kill:one", "partition:halves", "pause:minority", "clock:majority"],
                 nemesis_interval=1.5, time_limit=8, rate=40, concurrency=3, seed=5)


def test_the_schedule_from_the_checkers_walk_is_the_whole_historys():
    run = sim_run(CFG, 5)
    run.run(release=False)
    assert len(run.schedule) >= 3
    assert run.schedule == replay.schedule_of(run.history.ops, run.t0 * 1_000_000)


def test_checkers_that_fail_before_the_walk_leave_the_schedule_all_the_same(monkeypatch):
    import harness.runtimes.sim as sim_mod

    def broken(*_a, **_k):
        raise RuntimeError("no scan")

    monkeypatch.setattr(sim_mod, "scan_ops", broken)
    run = sim_run(CFG, 5)
    with pytest.raises(RuntimeError, match="no scan"):
        run.run(release=False)
    assert len(run.schedule) >= 3
    assert run.schedule == replay.schedule_of(run.history.ops, run.t0 * 1_000_000)
