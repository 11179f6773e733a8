"""KIP-966 unclean recovery at the controller (seed 002, "Unclean recovery",
"Config changes", "Delivery plan"). Brokers are played by the test, as in
test_controller.py: it answers the controller's GetReplicaLogInfo requests
and reads the elections off the committed image and the traces.

The election order with ``unclean.recovery.manager.enabled``: ISR, then an
unfenced ELR member, then

* fenced ELR members: ``Aggressive`` recovers, the others wait;
* no ELR member: ``Aggressive`` recovers, ``Balanced`` recovers once every
  LastKnownELR member is unfenced, ``None`` waits for an operator;

and a recovery elects the longest log (highest last epoch, then LEO) once
the strategy's wait is over.
"""

from __future__ import annotations

import pytest

from reference_impl.core.config import ConfigError, ProtocolConfig
from reference_impl.core.messages import (
    NO_LEADER,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    ReplicaLogInfo,
    Errors,
)
from reference_impl.core.metadata import RECOVERING
from reference_impl.server.codec import REGISTRY

from tests.core.test_controller import TP, Cluster, three_brokers

SESSION = ProtocolConfig().broker_session_timeout_ms
TIMEOUT = 30_000


def recovery_config(strategy: str = "Balanced", **kw) -> ProtocolConfig:
    return ProtocolConfig(
        unclean_recovery_manager_enabled=True,
        unclean_recovery_strategy=strategy,
        unclean_recovery_timeout_ms=TIMEOUT,
        **kw,
    )


def asked(c: Cluster, since: int = 0) -> list[tuple[int, GetReplicaLogInfoRequest]]:
    """(broker, request) for every GetReplicaLogInfo the controllers sent."""
    return [(d, m) for (_t, _s, d, m) in c.loop.sent[since:] if isinstance(m, GetReplicaLogInfoRequest)]


def answer(c: Cluster, b: int, last_epoch: int, leo: int, *, broker_epoch=None, corr=None, current=None, error=0):
    """Broker ``b`` answers the latest question it was asked."""
    active = c.active_id()
    req = [m for (_t, s, d, m) in c.loop.sent if d == b and s == active and isinstance(m, GetReplicaLogInfoRequest)][-1]
    info = ReplicaLogInfo(
        TP, last_epoch, c.part().leader_epoch if current is None else current, leo, error
    )
    resp = GetReplicaLogInfoResponse(
        b,
        c.epochs[b] if broker_epoch is None else broker_epoch,
        req.correlation_id if corr is None else corr,
        (info,),
    )
    c.loop.deliver(c.active_id(), resp, b)


def elections(c: Cluster) -> list[dict]:
    return c.traces("election")


def strand_on_a_fenced_elr_member(c: Cluster) -> None:
    """:func:`fenced_elr_only`'s history without its checks, on any cluster
    whose topic ``t`` has replicas (0, 1, 2) and min ISR 2."""
    c.alter(0, [0])
    c.register(1, previous=-1)
    c.register(2, previous=-1)
    c.heartbeat(1)
    c.heartbeat(2)
    c.keep_alive(SESSION + 2000, alive=(1, 2))


def fenced_elr_only(config: ProtocolConfig, leaderless: bool = True) -> Cluster:
    """Replicas (0, 1, 2), min ISR 2. The ISR shrinks to 0 (1 and 2 join the
    ELR), 1 and 2 restart uncleanly (ELR -> LastKnownELR), then 0 dies: the
    ISR is empty and the only ELR member, 0, is fenced."""
    c = three_brokers(config=config, topic_configs=(("min.insync.replicas", "2"),))
    c.alter(0, [0])
    assert c.part().elr == (1, 2)
    c.register(1, previous=-1)
    c.register(2, previous=-1)
    c.heartbeat(1)
    c.heartbeat(2)
    p = c.part()
    assert p.elr == () and p.last_known_elr == (1, 2) and p.leader == 0
    c.keep_alive(SESSION + 2000, alive=(1, 2))
    p = c.part()
    if leaderless:
        assert p.isr == () and p.elr == (0,) and p.leader == NO_LEADER
    return c


def no_elr_at_all(config: ProtocolConfig) -> Cluster:
    """As :func:`fenced_elr_only`, then 0 restarts uncleanly too: ISR and
    ELR are empty, LastKnownELR is (0, 1, 2) and 0 is still fenced."""
    c = fenced_elr_only(config)
    c.register(0, previous=-1)
    p = c.part()
    assert p.isr == () and p.elr == () and p.last_known_elr == (0, 1, 2) and p.leader == NO_LEADER
    assert c.active.image.brokers[0].fenced
    return c


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------


def test_recovery_config_defaults_are_kafkas():
    cfg = ProtocolConfig()
    assert cfg.unclean_recovery_manager_enabled is False
    assert cfg.unclean_recovery_strategy == "Balanced"
    assert cfg.unclean_recovery_timeout_ms == 5 * 60 * 1000
    assert cfg.recovery_strategy_for({}) is None


def test_recovery_strategy_accepts_kafka_spelling_in_any_case_and_rejects_others():
    cfg = ProtocolConfig.from_properties(
        {"unclean.recovery.manager.enabled": "true", "unclean.recovery.strategy": "aggressive"}
    )
    assert cfg.unclean_recovery_strategy == "Aggressive"
    with pytest.raises(ConfigError, match="unclean.recovery.strategy must be one of"):
        ProtocolConfig.from_properties({"unclean.recovery.strategy": "fast"})


def test_unclean_leader_election_enable_maps_to_aggressive_only_with_the_recovery_manager():
    on = recovery_config("None")
    assert on.recovery_strategy_for({}) == "None"
    assert on.recovery_strategy_for({"unclean.leader.election.enable": "true"}) == "Aggressive"
    assert on.with_variants(unclean_election=True).recovery_strategy_for({}) == "Aggressive"
    # manager off, or KIP-966 off: the old random unclean election decides
    assert ProtocolConfig(unclean_leader_election_enable=True).recovery_strategy_for({}) is None
    assert on.with_variants(kip966=False, unclean_election=True).recovery_strategy_for({}) is None


def test_get_replica_log_info_messages_cross_the_wire_codec():
    req = GetReplicaLogInfoRequest(2, (TP,), 9)
    resp = GetReplicaLogInfoResponse(2, 40, 9, (ReplicaLogInfo(TP, 3, 4, 120),))
    assert REGISTRY.loads(REGISTRY.dumps((1, req))) == (1, req)
    assert REGISTRY.loads(REGISTRY.dumps((1, resp))) == (1, resp)


# ---------------------------------------------------------------------------
# the election order (seed 002, "Unclean recovery")
# ---------------------------------------------------------------------------


def test_balanced_waits_for_a_fenced_elr_member_instead_of_recovering():
    c = fenced_elr_only(recovery_config("Balanced"))
    c.keep_alive(3000, alive=(1, 2))
    assert asked(c) == [] and c.part().leader == NO_LEADER
    # the ELR member comes back: a plain ELR election, no recovery
    c.heartbeat(0)
    p = c.part()
    assert p.leader == 0 and elections(c)[-1]["data_kind"] == "elr"
    assert asked(c) == []


def test_aggressive_recovers_at_once_when_the_only_elr_members_are_fenced():
    c = fenced_elr_only(recovery_config("Aggressive"))
    assert sorted({b for b, _ in asked(c)}) == [1, 2]
    answer(c, 1, last_epoch=0, leo=5)
    assert c.part().leader == NO_LEADER  # 2 has not answered yet
    answer(c, 2, last_epoch=0, leo=8)
    p = c.part()
    assert p.leader == 2 and p.isr == (2,) and p.leader_recovery_state == RECOVERING
    assert elections(c)[-1] == {"tp": "t-0", "data_kind": "recovery", "leader": 2, "leader_epoch": p.leader_epoch}
    # the fenced ELR member stays in the ELR; nothing else is in flight
    assert p.elr == (0,) and c.active.recovering_partitions == []


def test_none_strategy_never_recovers_but_an_elr_member_still_leads_when_back():
    c = no_elr_at_all(recovery_config("None"))
    c.heartbeat(0)
    c.keep_alive(TIMEOUT + 2000, alive=(0, 1, 2))
    assert asked(c) == [] and c.part().leader == NO_LEADER


def test_balanced_recovers_only_once_every_last_known_elr_member_is_unfenced():
    c = no_elr_at_all(recovery_config("Balanced"))
    c.keep_alive(2000, alive=(1, 2))
    assert asked(c) == [], "LastKnownELR member 0 is fenced: Balanced must not start"
    c.heartbeat(0)
    assert sorted({b for b, _ in asked(c)}) == [0, 1, 2]
    assert c.active.recovering_partitions == [TP]


def test_balanced_waits_for_every_last_known_elr_member_to_answer_even_past_the_timeout():
    c = no_elr_at_all(recovery_config("Balanced"))
    c.heartbeat(0)
    answer(c, 1, last_epoch=1, leo=10)
    answer(c, 2, last_epoch=1, leo=12)
    n = len(c.loop.sent)
    c.keep_alive(TIMEOUT + 2000, alive=(0, 1, 2))
    assert c.part().leader == NO_LEADER
    # the silent LastKnownELR member was asked again
    assert 0 in [b for b, _ in asked(c, n)]
    answer(c, 0, last_epoch=1, leo=11)
    assert c.part().leader == 2 and elections(c)[-1]["data_kind"] == "recovery"


@pytest.mark.parametrize(
    "logs, winner",
    [
        ({0: (2, 10), 1: (3, 4), 2: (1, 50)}, 1),  # highest last epoch wins over a longer log
        ({0: (3, 10), 1: (3, 14), 2: (3, 12)}, 1),  # same epoch: highest LEO
        ({0: (3, 10), 1: (3, 14), 2: (3, 14)}, 1),  # full tie: assignment order
        ({0: (-1, 0), 1: (-1, 0), 2: (0, 1)}, 2),  # empty logs lose to any record
    ],
)
def test_recovery_elects_highest_last_epoch_then_highest_leo(logs, winner):
    c = no_elr_at_all(recovery_config("Balanced"))
    c.heartbeat(0)
    for b, (epoch, leo) in logs.items():
        answer(c, b, last_epoch=epoch, leo=leo)
    p = c.part()
    assert p.leader == winner and p.isr == (winner,) and p.leader_recovery_state == RECOVERING


def test_aggressive_elects_among_the_answers_once_the_timeout_has_passed():
    c = fenced_elr_only(recovery_config("Aggressive"))
    started = min(t for (t, _s, _d, m) in c.loop.sent if isinstance(m, GetReplicaLogInfoRequest))
    answer(c, 1, last_epoch=0, leo=5)
    c.keep_alive(started + TIMEOUT - 1000 - c.loop.now, alive=(1, 2))
    assert c.part().leader == NO_LEADER, "2 is unfenced but silent: wait until the timeout"
    c.keep_alive(2000, alive=(1, 2))
    assert c.part().leader == 1 and elections(c)[-1]["data_kind"] == "recovery"


def test_aggressive_elects_the_first_answer_after_a_silent_timeout():
    c = fenced_elr_only(recovery_config("Aggressive"))
    c.keep_alive(TIMEOUT + 1000, alive=(1, 2))
    assert c.part().leader == NO_LEADER
    answer(c, 2, last_epoch=0, leo=3)
    assert c.part().leader == 2


def test_a_last_known_elr_member_fenced_again_stops_a_balanced_recovery():
    c = no_elr_at_all(recovery_config("Balanced"))
    c.heartbeat(0)
    assert c.active.recovering_partitions == [TP]
    c.keep_alive(SESSION + 2000, alive=(1, 2))  # 0 stops heartbeating and is fenced
    assert c.active.image.brokers[0].fenced
    assert c.active.recovering_partitions == []
    answer(c, 1, last_epoch=5, leo=50)
    answer(c, 2, last_epoch=5, leo=50)
    assert c.part().leader == NO_LEADER


def test_a_replica_fenced_during_the_recovery_leaves_the_wait():
    c = fenced_elr_only(recovery_config("Aggressive"))
    c.keep_alive(SESSION + 2000, alive=(1,))  # 2 is fenced: it leaves the wait
    answer(c, 1, last_epoch=0, leo=5)
    p = c.part()
    # only 1 was left to answer: elected at once
    assert p.leader == 1


def test_a_replica_unfenced_during_the_recovery_is_asked_too():
    c = three_brokers(config=recovery_config("Aggressive"), topic_configs=(("min.insync.replicas", "2"),))
    c.alter(0, [0])
    c.register(1, previous=-1)
    c.register(2, previous=-1)
    c.heartbeat(1)  # 2 stays fenced after its unclean restart
    c.keep_alive(SESSION + 2000, alive=(1,))
    assert {b for b, _ in asked(c)} == {1}
    c.heartbeat(2)
    assert {b for b, _ in asked(c)} == {1, 2}
    answer(c, 1, last_epoch=0, leo=5)
    assert c.part().leader == NO_LEADER
    answer(c, 2, last_epoch=0, leo=9)
    assert c.part().leader == 2


def test_last_known_elr_is_cleared_once_the_isr_reaches_min_isr():
    """Seed 002, "LastKnownELR will be cleaned when ISR reaches the min ISR";
    the recovered leader itself leaves it at once (it is in the ISR)."""
    c = no_elr_at_all(recovery_config("Balanced"))
    c.heartbeat(0)
    for b, leo in ((0, 3), (1, 9), (2, 5)):
        answer(c, b, last_epoch=1, leo=leo)
    p = c.part()
    assert p.leader == 1 and p.last_known_elr == (0, 2)
    assert c.alter(1, [1], state=0).results[0].error == Errors.NONE  # RECOVERED, still alone
    assert c.part().last_known_elr == (0, 2)
    assert c.alter(1, [1, 2]).results[0].error == Errors.NONE  # ISR reaches min ISR 2
    p = c.part()
    assert p.isr == (1, 2) and p.elr == () and p.last_known_elr == ()


def test_answers_from_a_rebooted_broker_or_an_old_round_are_refused():
    c = fenced_elr_only(recovery_config("Aggressive"))
    answer(c, 1, last_epoch=0, leo=5)
    # seed 002: the broker epoch must still be the registered one
    answer(c, 2, last_epoch=9, leo=99, broker_epoch=c.epochs[2] - 1)
    # an answer naming another recovery round
    answer(c, 2, last_epoch=9, leo=99, corr=12345)
    # an answer whose replica knows a newer leader epoch than this recovery
    answer(c, 2, last_epoch=9, leo=99, current=c.part().leader_epoch + 1)
    # a replica without the log answers an error: not a candidate yet
    answer(c, 2, last_epoch=9, leo=99, error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert c.part().leader == NO_LEADER
    answer(c, 2, last_epoch=0, leo=4)
    assert c.part().leader == 1


def test_recovery_is_not_used_when_the_manager_is_off():
    """Seed 002, "Delivery plan": without the recovery manager, fenced ELR
    members and unclean.leader.election.enable=true mean the old unclean
    election of any live replica, with no GetReplicaLogInfo round."""
    c = fenced_elr_only(ProtocolConfig().with_variants(unclean_election=True), leaderless=False)
    p = c.part()
    assert p.leader == 1 and p.isr == (1,) and p.leader_recovery_state == RECOVERING and elections(c)[-1]["data_kind"] == "unclean" and asked(c) == []


def test_topic_unclean_leader_election_enable_makes_a_balanced_cluster_aggressive():
    c = three_brokers(
        config=recovery_config("Balanced"),
        topic_configs=(("min.insync.replicas", "2"), ("unclean.leader.election.enable", "true")),
    )
    strand_on_a_fenced_elr_member(c)
    assert c.part().elr == (0,) and sorted({b for b, _ in asked(c)}) == [1, 2]


# ---------------------------------------------------------------------------
# controller failover (seed 002: nothing is stored, a new controller starts over)
# ---------------------------------------------------------------------------


def test_a_new_active_controller_starts_the_recovery_again():
    cfg = recovery_config("Aggressive")
    c = Cluster(voters=(100, 101, 102), config=cfg, seed=3)
    c.start_brokers(0, 1, 2)
    assert c.create("t", configs=(("min.insync.replicas", "2"),), assignments=((0, 1, 2),)).error == Errors.NONE
    strand_on_a_fenced_elr_member(c)
    old = c.active_id()
    first = asked(c)
    assert sorted(b for b, _ in first) == [1, 2]
    # the active controller is cut off before any broker answers
    c.loop.isolate(old)
    n = len(c.loop.sent)
    assert c.loop.run_until_true(lambda: c.active_id() not in (None, old), 30_000)
    c.keep_alive(1000, alive=(1, 2))
    again = asked(c, n)
    assert sorted({b for b, _ in again}) == [1, 2]
    answer(c, 1, last_epoch=0, leo=7)
    answer(c, 2, last_epoch=0, leo=3)
    assert c.loop.run_until_true(lambda: c.part().leader != NO_LEADER, 5000)  # three voters: commit takes a round trip
    p = c.part()
    assert p.leader == 1 and p.leader_recovery_state == RECOVERING


def test_forward_wall_jump_on_the_controller_does_not_end_an_unclean_recoverys_wait():
    """The recovery's deadline is a deferred event of the controller's
    KafkaEventQueue, which waits on ``time.nanoseconds()`` (monotonic): a
    wall-clock jump of twice unclean.recovery.timeout.ms on the active
    controller, with one of two replicas answered, elects nobody; the
    timeout passing for real elects the one that answered."""
    c = fenced_elr_only(recovery_config("Aggressive"))
    answer(c, 1, last_epoch=0, leo=5)
    t = c.loop.now
    c.loop._apply(c.active_id(), c.active.tick(t + 2 * TIMEOUT, t))
    c.loop.run_for(10)
    assert c.part().leader == NO_LEADER and c.active.recovering_partitions == [TP]
    c.keep_alive(TIMEOUT + 2000, alive=(1, 2))
    assert c.part().leader == 1 and elections(c)[-1]["data_kind"] == "recovery"
