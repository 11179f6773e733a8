"""Which clock each timer reads, shown by a wall-clock jump in the simulator.

A JVM has two clocks: ``System.currentTimeMillis`` (Kafka's
``time.milliseconds()``), which an OS clock jump moves, and
``System.nanoTime`` (``time.nanoseconds()``), which nothing moves. The clock
nemesis jumps only the first. Each test jumps one node's wall clock and
checks the timer reacts as Kafka 4.4's does (docs/architecture.md, "Clocks"):

* broker sessions (BrokerHeartbeatManager, monotonic): a forward jump on the
  active controller fences no broker;
* KRaft check-quorum (KafkaRaftClient, wall): the same jump makes the quorum
  leader resign, and the quorum elects another;
* broker heartbeat schedule (BrokerLifecycleManager, monotonic): a backward
  jump on a broker does not stop its heartbeats, so it is not fenced;
* produce purgatory (DelayedOperation's timer, monotonic): a forward jump
  past the request timeout does not time out a parked acks=all produce;
* replica lag (Replica.lastCaughtUpTimeMs, wall): a forward jump on the
  leader shrinks the ISR of a lagging follower at the next isr-expiration run,
  without waiting replica.lag.time.max.ms;
* HW checkpoint schedule (KafkaScheduler, monotonic): a backward jump does
  not delay the next checkpoint.

Node ids: brokers 1, 2, 3; controllers 101, 102, 103.
"""

from __future__ import annotations

import re
from typing import Any

from reference_impl.core.messages import Errors
from reference_impl.core.storage import HW_CHECKPOINT, OffsetCheckpoint
from reference_impl.sim.script import SCENARIO_CONFIG, Scenario

SESSION_MS = SCENARIO_CONFIG["broker_session_timeout_ms"]


def _after(s: Scenario, kind: str, t0: int) -> list[dict]:
    return [e for e in s.events if e["kind"] == kind and e["t"] >= t0]


def test_forward_wall_jump_of_twice_the_session_timeout_on_the_active_controller_fences_no_broker() -> None:
    """BrokerHeartbeatManager judges sessions on ``time.nanoseconds()``: a
    wall-clock jump of 2 x broker.session.timeout.ms on the active controller
    leaves every broker's session as it was. One voter, so the quorum has no
    check-quorum timer (a single voter never resigns) and the controller stays
    active through the jump: only the session clock is under test."""
    s = Scenario(seed=11, controllers=1)
    s.start(replicas=(1, 2, 3))
    ctrl = s.sim.active_controller()
    t0 = s.sim.now
    s.sim.bump_clock(ctrl, 2 * SESSION_MS)
    s.sim.run_for(4 * SESSION_MS)
    assert _after(s, "broker_fenced", t0) == []
    assert s.kinds() == {}


def _jumped_quorum_leader_resigned() -> tuple[Scenario, Any, int, int]:
    """A cluster whose quorum leader's wall clock jumped two sessions ahead,
    run until that leader resigned: the scenario, the leader, its epoch and
    the time of the jump."""
    s = Scenario(seed=12)
    s.start(replicas=(1, 2, 3))
    ctrl = s.sim.active_controller()
    epoch = max(e["epoch"] for e in s.events if e["kind"] == "raft_state" and e["node"] == ctrl)
    t0 = s.sim.now
    s.sim.bump_clock(ctrl, 2 * SESSION_MS)
    s.wait(lambda: any(e["node"] == ctrl and e["role"] != "leader" for e in _after(s, "raft_state", t0)),
           timeout_ms=1000, what="the jumped quorum leader resigning")
    return s, ctrl, epoch, t0


def test_forward_wall_jump_on_the_quorum_leader_resigns_it_by_check_quorum_as_kafka_raft_does() -> None:
    """KafkaRaftClient reads ``time.milliseconds()`` for its check-quorum
    timer: past 1.5 x controller.quorum.fetch.timeout.ms without a majority of
    fetches on the (jumped) wall clock, the leader resigns and the quorum
    elects a leader in a later epoch; the brokers keep their sessions."""
    s, ctrl, epoch, t0 = _jumped_quorum_leader_resigned()
    s.wait(lambda: any(e["role"] == "leader" and e["epoch"] > epoch for e in _after(s, "raft_state", t0)),
           timeout_ms=10_000, what="a leader in a later epoch")
    s.sim.run_for(2 * SESSION_MS)
    assert _after(s, "broker_fenced", t0) == []
    assert s.kinds() == {}


def test_a_leader_resigned_by_check_quorum_sends_end_quorum_epoch_so_the_next_leader_comes_at_once() -> None:
    """Kafka 4.4 resigns an expired check quorum through ``transitionToResigned``
    and ``pollResigned`` sends EndQuorumEpoch (KafkaRaftClient.java:3177-3179,
    3143-3148): the followers stand after a rank-ordered backoff, not their
    2 s fetch timeout. On Kafka here a controller resigned by a clock reset
    was followed 63 ms later (pair 82 of the differential campaign)."""
    s, ctrl, epoch, t0 = _jumped_quorum_leader_resigned()
    resigned = min(e["t"] for e in _after(s, "raft_state", t0) if e["node"] == ctrl and e["role"] != "leader")
    s.wait(lambda: any(e["role"] == "leader" and e["epoch"] > epoch for e in _after(s, "raft_state", t0)),
           timeout_ms=10_000, what="a leader in a later epoch")
    led = min(e["t"] for e in _after(s, "raft_state", t0) if e["role"] == "leader" and e["epoch"] > epoch)
    assert led - resigned < 500  # the fetch timeout is 2000 ms


def test_backward_wall_jump_on_a_broker_keeps_its_heartbeats_so_it_is_not_fenced() -> None:
    """BrokerLifecycleManager schedules heartbeats on ``time.nanoseconds()``:
    a broker whose wall clock goes back by 10 session timeouts heartbeats on."""
    s = Scenario(seed=13)
    s.start(replicas=(1, 2, 3))
    t0 = s.sim.now
    s.sim.bump_clock(2, -10 * SESSION_MS)
    s.sim.run_for(4 * SESSION_MS)
    assert _after(s, "broker_fenced", t0) == []
    assert s.kinds() == {}


def test_forward_wall_jump_on_the_leader_does_not_expire_a_parked_acks_all_produce() -> None:
    """The produce purgatory's timer runs on ``Time.SYSTEM.hiResClockMs()``
    (monotonic): a parked acks=all produce outlives a wall-clock jump of twice
    its timeout and completes once the followers catch up."""
    s = Scenario(seed=14, replica_lag_time_max_ms=600_000)
    (tp,) = s.start(replicas=(1, 2, 3))
    cut = {(2, 1), (3, 1)}
    s.sim.cut(cut)
    box = s.produce_async(1, tp, [7], acks=-1, timeout_ms=5000)
    s.sim.run_for(500)
    assert box == []
    s.sim.bump_clock(1, 10_000)
    s.sim.run_for(500)
    assert box == [], "a wall-clock jump expired the parked produce"
    s.sim.heal()
    s.wait(lambda: bool(box), timeout_ms=5000, what="the produce's answer")
    assert box[0].error == Errors.NONE
    assert s.kinds() == {}


def test_forward_wall_jump_on_the_leader_shrinks_a_lagging_follower_at_once_replica_lag_is_wall_clock() -> None:
    """Partition.isFollowerOutOfSync compares ``time.milliseconds()`` with the
    follower's lastCaughtUpTimeMs: a forward jump of 2 x replica.lag.time.max.ms
    on the leader makes a follower that is behind out of sync at the next
    isr-expiration run, long before the lag time has really passed."""
    lag = 60_000
    s = Scenario(seed=15, replica_lag_time_max_ms=lag)
    (tp,) = s.start(replicas=(1, 2, 3))
    s.sim.cut({(3, 1), (1, 3)})
    assert s.produce(1, tp, [1], acks=1).error == Errors.NONE
    t0 = s.sim.now
    s.sim.bump_clock(1, 2 * lag)
    s.wait(lambda: sorted(s.isr_of(tp)) == [1, 2], timeout_ms=lag // 2 + 5000, what="ISR [1, 2]")
    assert s.sim.now - t0 < lag
    assert s.kinds() == {}


def test_backward_wall_jump_does_not_delay_the_hw_checkpoint() -> None:
    """The highwatermark-checkpoint task is scheduled by KafkaScheduler
    (monotonic): after a backward jump of a minute the HW still reaches the
    checkpoint file within one interval."""
    interval = 2000
    s = Scenario(seed=16, replica_high_watermark_checkpoint_interval_ms=interval)
    (tp,) = s.start(replicas=(1, 2, 3))
    s.sim.bump_clock(1, -60_000)
    assert s.produce(1, tp, [1, 2, 3], acks=-1).error == Errors.NONE

    def checkpointed() -> int:
        cp = s.sim.hosts[1].disk.stored_state().files.get(HW_CHECKPOINT)
        return dict(cp.offsets).get(tp, -1) if isinstance(cp, OffsetCheckpoint) else -1

    s.wait(lambda: checkpointed() == 3, timeout_ms=interval + 500, what="HW 3 checkpointed")
    assert s.kinds() == {}


def test_a_fetch_sent_before_a_backward_jump_is_said_to_wait_for_the_clock_not_in_flight_for_negative_time() -> None:
    """The replica fetcher stamps a fetch on the broker's wall clock: sent
    while the clock ran 20 s ahead and then set back, the stamp is in the
    clock's future. The availability checker's words for it
    (``inspect.cluster_state``) say the fetch waits for the clock to catch
    up with the stamp plus the timeout, never "in flight for -20.0 s"."""
    from reference_impl.sim.inspect import cluster_state

    s = Scenario(seed=1)
    s.start()
    s.sim.set_clock(2, 20_000)
    s.sim.run_for(1_000)
    s.isolate(2, [1])  # the fetch in flight to leader 1 gets no answer
    s.sim.run_for(200)
    s.sim.set_clock(2, 0)
    detail = cluster_state(s.sim, min_isr=2, rules={})["brokers"]["2"]["detail"]
    assert "in flight for -" not in detail
    m = re.search(r"a replica fetch to n1 in flight, sent when its wall clock read ([0-9.]+) s later than it does "
                  r"now \(the clock was set back since\): given up after ([0-9.]+) s on that clock, ([0-9.]+) s from now",
                  detail)
    assert m is not None, detail
    ahead, timeout, left = (float(g) for g in m.groups())
    assert 18.8 <= ahead <= 20.0 and abs(left - (ahead + timeout)) <= 0.11


def test_a_host_hands_its_node_mono_none_while_its_clocks_agree_and_the_monotonic_time_once_they_differ() -> None:
    """Host._deliver_now: ``mono=None`` means the two clocks agree (the
    node's contract, node.py), so a host passes None then (no int made
    per message) and its monotonic time once a wall-clock jump parts them;
    the broker reads the same monotonic time either way."""
    s = Scenario(seed=3)
    s.start(replicas=(1, 2, 3))
    host = s.sim.hosts[1]
    s.sim.run_for(50)  # replica fetches reach broker 1 every few ms
    node = host.node
    assert node._mono is None and node.broker.skew == 0 and 0 <= host.mono() - node.broker.mono < 50
    s.sim.bump_clock(1, 5000)
    s.sim.run_for(50)
    assert node._mono == node.broker.mono and node.broker.skew == 5000 and 0 <= host.mono() - node._mono < 50
