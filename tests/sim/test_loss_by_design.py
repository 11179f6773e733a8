"""Acknowledged writes that Kafka 4.4 loses too are told apart from model
bugs (checkers/expected_loss.py): the run stays invalid, and its cause
says why the loss is Kafka's own. The story was found by the faithful soak
as seed 1626 (``kraftwerk sim --seed 1626 --nemesis all --acks mixed --rf 3
--min-isr 2 --time-limit 30``) and is kept as that run's schedule with the
majority's pause held 1 s longer
(tests/sim/schedules/last-known-leader-after-its-power-loss.json, targets
as recorded): once the broker lifecycle got its own heartbeat connection
the controllers' quorum recovered from that pause about 1.6 s sooner, n2
registered before n1's power loss, and the seed ran valid; with the pause
held 0.5 to 3 s longer the story plays again, the same 65 writes. n2 and n3 leave t0-0's and t0-1's ISR (min ISR 2), n2
staying in the ELR; n2 restarts, never registers (the controllers are
paused), shuts down cleanly with broker epoch -1 in its clean-shutdown
marker and restarts again, so its registration counts as an unclean
shutdown and takes it out of the ELR (Kafka 4.4.0, by the class files'
line tables: ``LogManager.shutdown`` writes the lifecycle's epoch, -1
before any registration, line 911; ``ClusterControlManager.registerBroker``
calls it clean only when that epoch is the registration's, lines 437-442).
n1, the sole ISR member,
loses power with its unfsynced log; it registers after that unclean
shutdown (out of ISR and ELR) and, being the last known leader, is elected
once unfenced with an empty log: 65 acks=all writes gone, as Kafka's
``PartitionChangeBuilder.canElectLastKnownLeader`` would have them."""

from __future__ import annotations

from pathlib import Path

from harness.cli.options import config_from_flags
from harness.config import build_config
from harness.lifecycle.runner import run_seed, sim_run

SCHEDULES = Path(__file__).parent / "schedules"


def _soak_seed(seed: int, acks: str, swarm: bool = False) -> dict:
    """One seed of ``bench/sim_soak.py faithful``, as the soak plays it."""
    cfg = build_config({}, {"backend": "sim", "nemesis": ["all"], "swarm": swarm, "acks": acks, "rf": 3,
                            "min_isr": 2, "time_limit": 30})
    return sim_run(cfg.for_seed(seed), seed, None).run()


def test_the_last_known_leader_elected_after_its_power_loss_loses_acknowledged_writes_by_design(tmp_path: Path) -> None:
    cfg = config_from_flags("sim", {"schedule": str(SCHEDULES / "last-known-leader-after-its-power-loss.json"),
                                    "out": str(tmp_path)})
    res = run_seed(cfg, cfg.seed, tmp_path)
    assert res["valid"] is False and res["durability"]["acks=all"]["lost"] == 65
    lb = res["loss_by_design"]
    assert lb["explained"] is True, lb.get("unexplained")
    assert {tp: p["dropped"] for tp, p in lb["partitions"].items()} == {"t0-0": 66, "t0-1": 67}
    assert res["cause"].startswith("65 acknowledged acks=all writes lost by design")
    assert "broker 1 lost power at 14.4 s" in res["cause"]
    assert "was elected t0-0's last known leader without committed offsets [0, 66)" in res["cause"]
    assert res["invariants"]["by_design"] == {"leader-completeness": 2}


def test_a_faithful_seed_without_losses_says_nothing_by_design_seed_2058() -> None:
    """Seed 2058 of ``--swarm --acks all`` was unknown before the liveness
    bound and the recovery sleep counted the clock faults' step back (its
    final reads came while a clock set back held the cluster: "the read
    failed on the client's side"); now every final read completes."""
    res = _soak_seed(2058, "all", swarm=True)
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0
    assert res["checkers"]["final-reads"]["valid"] is True
    assert "loss_by_design" not in res and "cause" not in res
