"""Fault schedules the search tools found losing acknowledged writes with the
protocol at Kafka 4.4's defaults, kept as replays of the rule each broke
(tests/sim/schedules/, recorded test.json files without their output path).

* ``power-loss-restart-within-session-clock-jump``: a broker lost power,
  restarted within its old session (so its registration was refused as a
  duplicate) and had its wall clock run 50 s ahead while it was refused.
  Its retry waited on the wall clock, so after the clock came back it never
  registered: the controller kept counting its lost log in the ISR and
  later elected it with nothing. BrokerLifecycleManager schedules the retry
  on the monotonic clock.
* ``quorum-leader-resigns-with-observer-clock-back``: the quorum leader
  resigned by check-quorum (its clock jumped forward) holding a broker's
  parked metadata fetch, as that broker's clock went back 49 s. The fetch
  was dropped, the broker waited out its own resend on the wall clock with
  stale metadata, and as partition leader never took caught-up followers
  back into the ISR: the last acknowledged write stayed above a HW held
  below min ISR. KafkaRaftClient answers its fetch purgatory
  NOT_LEADER_OR_FOLLOWER when it steps down.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.options import config_from_flags
from harness.runner import run_seed

SCHEDULES = Path(__file__).parent / "schedules"


@pytest.mark.parametrize("name", [
    "power-loss-restart-within-session-clock-jump",
    "quorum-leader-resigns-with-observer-clock-back",
])
def test_a_found_schedule_replays_without_losing_an_acknowledged_write(name: str, tmp_path: Path):
    cfg = config_from_flags("sim", {"schedule": str(SCHEDULES / f"{name}.json"), "out": str(tmp_path)})
    res = run_seed(cfg, cfg.seed, tmp_path)
    durability = res["durability"]["acks=all"]
    assert durability["acked"] > 0 and durability["lost"] == 0
    assert res["valid"] is True, res.get("anomaly_types")
