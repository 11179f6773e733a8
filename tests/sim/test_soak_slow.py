"""Soak properties (slow; run with ``-m slow`` or through bench/sim_soak.py).

Today's protocol loses no acknowledged write and breaks no invariant under
every fault but power loss; each historical variant is caught within 200
seeds by a nemesis mix that tells its narrative, and the finding replays
identically."""

from __future__ import annotations

import pytest

from harness.cli.sim import make_pool, run_seeds
from harness.config import TestConfig

#: variant -> (variants, the stories of --scenario, the rest of the mix)
HUNTS = {
    "kip101": ({"kip101": False}, "leader-churn", ("kill",)),
    "kip966": ({"kip966": False}, "last-replica-standing", ("power-loss-one",)),
    "unclean_election": ({"unclean_election": True}, "isr-crash", ("partition-leader",)),
    "strict_isr_expand": ({"strict_isr_expand": False}, "expand-race,leader-churn", ()),
}


@pytest.mark.slow
def test_no_acked_write_lost_and_no_invariant_broken_across_200_seeds() -> None:
    opts = TestConfig(backend="sim", nemesis=["all"], time_limit=36, nemesis_interval=6, partitions=3, concurrency=8,
                      rate=100)
    with make_pool(2) as pool:
        rs = run_seeds(opts, list(range(200)), None, 2, pool=pool)
    assert [r["seed"] for r in rs if r["valid"] is not True] == []
    assert sum(r["durability"]["acks=all"]["lost"] for r in rs) == 0


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(HUNTS))
def test_each_historical_variant_is_detected_within_200_seeds_and_replays(variant: str) -> None:
    vs, stories, mix = HUNTS[variant]
    opts = TestConfig(backend="sim", scenario=stories, nemesis=list(mix), time_limit=45, nemesis_interval=10, variants=vs,
                      partitions=3, concurrency=8, rate=100)
    found = None
    with make_pool(2) as pool:
        for start in range(0, 200, 4):
            hits = [r for r in run_seeds(opts, list(range(start, start + 4)), None, 2, pool=pool)
                    if r["valid"] is False]
            if hits:
                found = hits[0]
                break
        assert found is not None, f"{variant} not detected in 200 seeds"
        replay = run_seeds(opts, [found["seed"]], None, 1, pool=pool)[0]
    assert replay["stats"]["history_sha256"] == found["stats"]["history_sha256"]
    assert replay["anomaly_types"] == found["anomaly_types"]
