"""Every nemesis fault starts, is recorded, and is healed; the final phase
leaves every node running with the network whole."""

from __future__ import annotations

import pytest

from reference_impl.sim.host import UP
from reference_impl.sim.nemesis import SINGLE
from reference_impl.sim.options import SimOptions
from reference_impl.sim.runner import SimRun


@pytest.mark.parametrize("fault", SINGLE)
def test_each_fault_is_recorded_healed_and_leaves_the_cluster_whole(fault: str) -> None:
    opts = SimOptions(nemesis=(fault,), time_limit_s=7, nemesis_interval_s=2, warmup_s=1, final_wait_s=6,
                      final_read_s=8, rate=50).validate()
    run = SimRun(opts, 17)
    res = run.run()
    nem = [op for op in run.history.ops if op.process == "nemesis"]
    starts = [op for op in nem if op.f.startswith("start-")]
    stops = [op for op in nem if op.f.startswith("stop-")]
    assert starts and len(starts) == len(stops)
    assert all(op.type == "info" for op in nem)
    assert starts[0].value["fault"] == fault
    assert run.sim.net.grudge == set()
    assert all(h.state == UP for h in run.sim.hosts.values())
    assert all(h.clock.offset_ms == 0 for h in run.sim.hosts.values())
    assert res["stats"]["node_crashes"] == []
    assert "node-crash" not in res["invariants"]["counts"]
