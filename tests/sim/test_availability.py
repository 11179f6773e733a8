"""Availability after the final heal in the simulator (checkers/availability):
a partition down by design says which rule, one stuck with a live eligible
replica fails the run, a healthy run has every partition back within the
bound, and the evidence table covers every fault change."""

from __future__ import annotations

from harness.config import TestConfig
from harness.lifecycle.runner import sim_run
from harness.runtimes.sim import SimRun


def _down_by_design(**extra) -> TestConfig:
    """One broker, RF 1, its power lost; unclean recovery on with strategy
    None, which waits for an operator once the only replica registered after
    an unclean shutdown (ISR and ELR empty): no replica may lead."""
    return TestConfig(backend="sim", brokers=1, rf=1, min_isr=1, nemesis=["lose-unfsynced:all"], time_limit=12,
                      seed=1, protocol={"unclean.recovery.manager.enabled": "true",
                                        "unclean.recovery.strategy": "None"}, **extra)


def test_a_partition_down_by_design_is_reported_with_its_rule_and_does_not_fail_the_run(tmp_path) -> None:
    res = sim_run(_down_by_design(), 1, tmp_path).run()
    av = res["checkers"]["availability"]
    assert res["valid"] == "unknown"  # its acknowledged writes cannot be read: unverified, not lost
    assert "unavailable-by-design" in res["anomaly_types"] and "unavailable" not in res["anomaly_types"]
    assert {d["kind"] for d in av["unavailable"]} == {"no-eligible-leader"}
    assert "no final read of t0-0, t0-1 completed" in res["cause"]
    assert "ISR empty, ELR empty" in res["cause"] and "strategy None waits for an operator" in res["cause"]
    assert all(p["write_after_ms"] is None for p in res["availability"]["final"]["partitions"].values())


def test_liveness_strict_fails_a_partition_down_by_design() -> None:
    res = sim_run(_down_by_design(liveness="strict"), 1, None).run()
    assert res["valid"] is False and "unavailable-by-design" in res["anomaly_types"]


def _pause_controllers_restart_brokers(run: SimRun) -> None:
    """A fault the heal does not undo: every controller paused, every broker
    restarted, so the brokers run but cannot register."""
    sim = run.sim
    for cid in sim.controller_ids:
        sim.pause(cid)
    for bid in sim.broker_ids:
        sim.kill(bid)
        sim.restart(bid)


def _with_after_heal(run: SimRun, fn) -> SimRun:
    run.after_heal = fn
    return run


def test_controllers_paused_after_the_heal_leave_running_replicas_stuck_and_the_run_invalid() -> None:
    cfg = TestConfig(backend="sim", nemesis=["kill"], time_limit=10, seed=3)
    res = _with_after_heal(sim_run(cfg, 3, None), _pause_controllers_restart_brokers).run()
    assert res["valid"] is False and "unavailable" in res["anomaly_types"]
    kinds = {d["kind"] for d in res["checkers"]["availability"]["unavailable"]}
    assert kinds == {"quorum-leaderless"}
    assert "t0-0, t0-1 unavailable after the heal: the controller quorum had no leader (c1 paused, c2 paused, " \
           "c3 paused)" in res["cause"]


def test_a_healed_run_has_every_partition_take_a_probe_write_within_the_bound(tmp_path) -> None:
    cfg = TestConfig(backend="sim", nemesis=["kill", "partition"], nemesis_interval=3, time_limit=15, seed=2)
    run = sim_run(cfg, 2, tmp_path)
    res = run.run()
    av = res["checkers"]["availability"]
    assert av["valid"] is True and av["unavailable"] == [] and "cause" not in res
    bound = res["availability"]["bound"]["total_ms"]
    for p in av["partitions"].values():
        assert p["judged_by"] == "acks=all write" and 0 <= p["write_after_ms"] <= bound
    starts = [e for e in run.schedule if str(e.get("f", "")).startswith(("start-", "stop-"))]
    assert len(res["availability"]["rows"]) >= len(starts) - 1  # every change before the final heal
    assert all(set(r["partitions"]) == {"t0-0", "t0-1"} for r in res["availability"]["rows"])
    assert res["checkers"]["availability"]["traces"] > 0  # leaders from the run's trace files


def test_the_final_reads_wait_out_a_clock_reset_so_a_stale_leader_serves_no_false_loss_seed_831() -> None:
    """Seed 831 of ``--nemesis all --acks all``: clock faults set c1 and c2
    tens of seconds ahead and back, so their KRaft fetch timeouts (Kafka's
    Timer keeps the larger time) waited for their clocks to catch up; the
    quorum leader c3 lost power meanwhile and no election ran, so n2, cut
    off as t0-0's leader of epoch 1, kept its stale metadata past the heal.
    With the final reads 15 s after the heal, one went to n2 and missed 51
    writes acknowledged by n1 (epoch 2, ISR n1, n3): a stale read, not a
    loss. The recovery sleep and the bound now add the mix's largest clock
    step back (``nemesis.faults.clock_hold_ms``)."""
    cfg = TestConfig(backend="sim", nemesis=["all"], acks="all", rf=3, min_isr=2, time_limit=30, seed=831)
    res = sim_run(cfg, 831, None).run()
    assert res["availability"]["bound"]["clock_ms"] == 65_000
    assert res["durability"]["acks=all"]["lost"] == 0
    assert res["valid"] is True, res["anomaly_types"]
