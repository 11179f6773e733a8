"""A rolling restart (``--nemesis rolling-restart``: each broker, then each
controller, shut down cleanly, restarted and waited for, one at a time)
while partitions and kills fly on their own timetables loses no
acknowledged acks=all write on the faithful protocol."""

from harness.config import build_config
from harness.lifecycle.runner import run_seed


def test_rolling_restarts_under_partitions_and_kills_lose_no_acknowledged_write() -> None:
    cfg = build_config(None, {"backend": "sim", "nemesis": "rolling-restart,rolling-restart:controllers,partition,kill",
                              "nemesis_mode": "overlap", "nemesis_interval": 8, "time_limit": 60})
    for seed in (1, 2):
        r = run_seed(cfg, seed)
        assert r["valid"] is True, (seed, r["anomaly_types"])
        dur = r["durability"]["acks=all"]
        assert dur["acked"] > 300 and dur["lost"] == 0
        assert r["stats"]["faults"] >= 8
