"""The seeds' narratives, scripted in the simulator.

Each test places faults at chosen moments on chosen nodes through
:class:`reference_impl.sim.script.Scenario` and checks what the seed says must
(or, with a historical variant switched back on, must not) happen. The
invariant monitor watches every test: a protocol-violating variant is expected
to trip it, today's protocol never.

Node ids: brokers 1, 2, 3; controllers 101, 102, 103.
"""

from __future__ import annotations

from reference_impl.core.messages import Errors
from reference_impl.sim.script import Scenario


def test_hw_is_min_leo_over_the_isr_seed000_example() -> None:
    """Seed 000: leader LEO 105, replica 2 LEO 104, replica 3 LEO 102 ->
    HW = min(105, 104, 102) = 102; when the laggards catch up the HW follows."""
    s = Scenario(seed=0, replica_lag_time_max_ms=60_000)
    (tp,) = s.start(replicas=(1, 2, 3))
    r = s.produce(1, tp, list(range(102)), acks=-1)
    assert r.error == Errors.NONE and r.base_offset == 0
    s.wait(lambda: s.hw(1, tp) == 102, what="HW 102")

    s.sim.cut({(1, 3)} | {(3, 1)})  # replica 3 stops at LEO 102
    s.produce(1, tp, [102, 103], acks=1)
    s.wait(lambda: s.leo(2, tp) == 104, what="replica 2 at LEO 104")
    # replica 2 stops at LEO 104; its next fetch (offset 104) still reaches the leader
    s.sim.cut({(1, 2)})
    s.produce(1, tp, [104], acks=1)
    s.sim.run_for(1000)
    assert (s.leo(1, tp), s.leo(2, tp), s.leo(3, tp)) == (105, 104, 102)
    assert s.isr_of(tp) == [1, 2, 3] or set(s.isr_of(tp)) == {1, 2, 3}
    assert s.hw(1, tp) == 102

    s.sim.net.heal_pairs({(1, 3), (3, 1)})  # replica 3 catches up to 105, replica 2 still at 104
    s.wait(lambda: s.leo(3, tp) == 105, what="replica 3 catching up")
    s.wait(lambda: s.hw(1, tp) == 104, what="HW = min(105, 104, 105)")
    s.sim.heal()
    s.wait(lambda: s.hw(1, tp) == 105, what="HW 105 once every ISR member has 105")
    assert s.kinds() == {}


def test_acks_all_under_min_isr_is_not_enough_replicas_and_nothing_is_appended() -> None:
    """Seed 000 (appendRecordsToLeader): with ISR < min ISR an acks=all produce
    fails with NOT_ENOUGH_REPLICAS *before* writing; acks=1 still appends."""
    s = Scenario(seed=2)
    (tp,) = s.start(replicas=(1, 2, 3))
    assert s.produce(1, tp, [1, 2], acks=-1).error == Errors.NONE
    s.isolate(1, from_=[2, 3])
    # a follower at the leader's LEO counts as caught up (ReplicaState.isCaughtUp):
    # only new data makes the silent followers fall behind
    assert s.produce(1, tp, [0], acks=1).error == Errors.NONE
    s.wait(lambda: s.leader_isr(1, tp) == ([1], "committed"), timeout_ms=20_000, what="ISR shrunk to the leader")
    leo = s.leo(1, tp)
    r = s.produce(1, tp, [3], acks=-1)
    assert r.error == Errors.NOT_ENOUGH_REPLICAS
    assert s.leo(1, tp) == leo
    assert not [e for e in s.trace("append", node=1, tp=tp) if e["base"] >= leo]
    r1 = s.produce(1, tp, [4], acks=1)
    assert r1.error == Errors.NONE and r1.base_offset == leo and s.leo(1, tp) == leo + 1
    assert s.kinds() == {}


def _pre_kip101_narrative(kip101: bool) -> tuple[Scenario, object, dict[int, object]]:
    """Seed 003, "Why Leader Epoch was needed": a follower whose HW lags the
    leader's truncates to that HW when it becomes a follower (pre-KIP-101),
    and is elected before it can fetch the record back.

    Replicas in preference order A=1, C=3, B=2. B fetches the last acks=all
    record but never hears the HW that covers it (leader->B cut right after
    B's append). A is isolated; C leads (epoch 1); B, cut from C, becomes
    C's follower and (kip101 off) truncates to its HW. C dies; B, the last
    ISR member, leads (epoch 2).
    """
    s = Scenario(seed=3, variants={"kip101": kip101}, replica_lag_time_max_ms=60_000, min_isr=1)
    (tp,) = s.start(replicas=(1, 3, 2))
    assert s.produce(1, tp, [0, 1, 2, 3, 4], acks=-1).error == Errors.NONE
    s.wait(lambda: s.hw(2, tp) == 5, what="B knows HW 5")
    box = s.produce_async(1, tp, [5], acks=-1)
    s.wait(lambda: s.leo(2, tp) == 6, what="B appended offset 5")
    s.sim.cut({(1, 2)})  # B's next fetch reaches A (acks the produce), A's answer does not
    s.wait(lambda: bool(box), what="the acks=all produce of offset 5")
    assert box[0].error == Errors.NONE and box[0].base_offset == 5
    assert s.hw(2, tp) == 5, "precondition: B's HW lags the leader's"
    s.sim.cut({(2, 3), (3, 2)})
    s.isolate(1)
    s.wait(lambda: s.sim.leader_of(tp) == 3, what="C elected")
    s.wait(lambda: bool(s.trace("become_follower", node=2, tp=tp, leader=3)), what="B follows C")
    s.sim.run_for(500)
    s.sim.kill(3)
    s.wait(lambda: s.sim.leader_of(tp) == 2, what="B elected")
    s.sim.run_for(1000)
    s.sim.heal_everything()
    s.sim.run_for(10_000)
    return s, tp, s.read_all(tp)


def test_pre_kip101_hw_truncation_loses_an_acknowledged_offset() -> None:
    s, tp, log = _pre_kip101_narrative(kip101=False)
    assert [e for e in s.trace("truncate", node=2, tp=tp) if e["reason"] == "hw" and e["to"] == 5]
    assert 5 not in log or log[5] != 5, "offset 5 (acked with acks=all) is gone"
    assert s.kinds().get("leader-completeness", 0) >= 1


def test_epoch_based_truncation_keeps_the_acknowledged_offset_kip101() -> None:
    s, tp, log = _pre_kip101_narrative(kip101=True)
    assert log.get(5) == 5
    assert not [e for e in s.trace("truncate", node=2, tp=tp) if e["to"] <= 5]
    assert s.kinds() == {}


def _last_replica_standing(kip966: bool) -> tuple[Scenario, object, list[int], dict[int, object]]:
    """Seed 002 (KIP-966 motivation), brokers 0, 1, 2 as ids 1, 2, 3; the
    leader is 3 ("broker 2"), ISR {1, 2, 3}, min ISR 2.

    T0 broker 1 is partitioned from the leader and leaves the ISR; T1 broker 2
    too: the leader is alone (acks=all refused, acks=1 accepted). T2 the leader
    loses power (un-fsynced data gone). T3 the partition heals. T4 the leader
    restarts. Without ELR it is re-elected from the ISR {3} it never left and
    the others truncate to its empty log: committed data is gone everywhere.
    With ELR, broker 2 (in the ELR since it left an under-min ISR) is elected.
    """
    s = Scenario(seed=4, variants={"kip966": kip966})
    (tp,) = s.start(replicas=(3, 1, 2))
    acked = list(range(10))
    assert s.produce(3, tp, acked, acks=-1).error == Errors.NONE
    # T0
    s.sim.cut({(1, 3), (3, 1)})
    assert s.produce(3, tp, [10], acks=-1).error == Errors.NONE  # new data makes broker 1 fall behind
    acked.append(10)
    s.wait(lambda: 1 not in s.isr_of(tp), what="T0: broker 1 out of the ISR")
    # T1
    s.sim.cut({(2, 3), (3, 2)})
    s.produce(3, tp, [11], acks=1)
    s.wait(lambda: s.leader_isr(3, tp) == ([3], "committed"), what="T1: the leader alone in the ISR")
    assert s.produce(3, tp, [12], acks=-1).error == Errors.NOT_ENOUGH_REPLICAS
    # T2
    s.sim.power_loss(3)
    s.sim.run_for(5000)
    # T3
    s.sim.heal()
    s.sim.run_for(5000)
    # T4
    s.sim.restart(3)
    s.sim.run_for(15_000)
    return s, tp, acked, s.read_all(tp)


def test_last_replica_standing_loses_committed_data_without_kip966() -> None:
    s, tp, acked, log = _last_replica_standing(kip966=False)
    assert [e for e in s.trace("become_leader", node=3, tp=tp) if e["leader_epoch"] > 0], "T4: broker 3 re-elected"
    lost = [v for v in acked if v not in log.values()]
    assert lost, "acks=all records acknowledged before T0 are gone from every replica"
    assert s.kinds().get("leader-completeness", 0) >= 1


def test_last_replica_standing_keeps_committed_data_with_elr_kip966() -> None:
    s, tp, acked, log = _last_replica_standing(kip966=True)
    assert [e for e in s.trace("election", tp=tp) if e.get("data_kind") == "elr"], "an ELR member was elected"
    assert all(v in log.values() for v in acked)
    assert s.kinds() == {}


def _all_isr_down(unclean: bool) -> tuple[Scenario, object, list[int]]:
    """Seed 003, "Data Loss Scenario Walkthrough" (pre-KIP-966 rules): leader 1
    and follower 2 in sync, follower 3 behind and out of the ISR; 1 and 2
    crash. Returns after the crash, with the acks=all values acknowledged."""
    s = Scenario(seed=5, variants={"kip966": False, "unclean_election": unclean})
    (tp,) = s.start(replicas=(1, 2, 3))
    acked = list(range(5))
    assert s.produce(1, tp, acked, acks=-1).error == Errors.NONE
    s.sim.cut({(1, 3), (3, 1)})
    assert s.produce(1, tp, [5], acks=-1).error == Errors.NONE
    acked.append(5)
    s.wait(lambda: s.leader_isr(1, tp) == ([1, 2], "committed"), what="broker 3 out of the ISR")
    assert s.produce(1, tp, [6, 7], acks=-1).error == Errors.NONE  # on 1 and 2 only
    acked += [6, 7]
    s.sim.kill(1)
    s.sim.kill(2)
    s.sim.heal()
    s.sim.run_for(10_000)
    return s, tp, acked


def test_unclean_election_elects_the_laggard_and_loses_acknowledged_writes() -> None:
    s, tp, acked = _all_isr_down(unclean=True)
    assert s.sim.leader_of(tp) == 3
    assert [e for e in s.trace("election", tp=tp) if e.get("data_kind") == "unclean"]
    s.sim.restart(1)
    s.sim.restart(2)
    s.sim.run_for(10_000)
    log = s.read_all(tp)
    assert [v for v in acked if v not in log.values()], "acks=all records only 1 and 2 had are gone"
    assert s.kinds().get("leader-completeness", 0) >= 1


def test_clean_election_only_keeps_the_partition_offline_until_an_isr_member_returns() -> None:
    s, tp, acked = _all_isr_down(unclean=False)
    assert s.sim.leader_of(tp) == -1 and s.meta(tp)["leader"] == -1, "offline: no leader"
    md = s.metadata(3)
    (pm,) = [p for t in md.topics for p in t.partitions if p.tp == tp]
    assert pm.leader == -1 or pm.error == Errors.LEADER_NOT_AVAILABLE
    (last,) = s.meta(tp)["isr"]  # the ISR keeps its last member (pre-KIP-966)
    other = 3 - last
    s.sim.restart(other)
    s.sim.run_for(10_000)
    assert s.sim.leader_of(tp) == -1, "a replica outside the ISR is never elected cleanly"
    s.sim.restart(last)
    s.wait(lambda: s.sim.leader_of(tp) == last, what="the last ISR member elected once it is back")
    s.sim.run_for(10_000)
    log = s.read_all(tp)
    assert all(v in log.values() for v in acked)
    assert s.kinds() == {}


def test_stale_alter_partition_is_rejected_by_partition_epoch() -> None:
    """Seed 000/001 (AlterPartition with partition epochs): a proposal built on
    an older partition state — here the leader's own shrink, delivered again
    after the ISR moved on — is refused with INVALID_UPDATE_VERSION and
    changes nothing."""
    from reference_impl.core.messages import AlterPartitionRequest, AlterPartitionResponse

    s = Scenario(seed=6)
    (tp,) = s.start(replicas=(1, 2, 3))
    alters = s.tap_messages(lambda src, dst, m: isinstance(m, AlterPartitionRequest))
    answers = s.tap_messages(lambda src, dst, m: isinstance(m, AlterPartitionResponse))
    s.sim.cut({(1, 3), (3, 1)})
    assert s.produce(1, tp, [0], acks=1).error == Errors.NONE
    s.wait(lambda: s.leader_isr(1, tp) == ([1, 2], "committed"), what="shrink committed")
    shrink = alters[-1]
    assert [m for m, _ in shrink[2].items[0].new_isr] == [1, 2]
    s.sim.heal()
    s.wait(lambda: s.leader_isr(1, tp) == ([1, 2, 3], "committed"), what="expansion committed")
    epoch_now = s.meta(tp)["partition_epoch"]
    assert shrink[2].items[0].partition_epoch < epoch_now
    n_meta = len(s.trace("partition_metadata", node=s.sim.active_controller()))
    before = len(answers)
    s.sim.net.send(shrink[0], shrink[1], shrink[2])  # the stale request arrives again
    s.sim.run_for(2000)
    replies = [m for _, _, m in answers[before:] if m.correlation_id == shrink[2].correlation_id]
    assert replies and replies[0].error == Errors.NONE
    assert [r.error for r in replies[0].results] == [Errors.INVALID_UPDATE_VERSION]
    assert s.meta(tp)["isr"] == [1, 2, 3] and s.meta(tp)["partition_epoch"] == epoch_now
    assert len(s.trace("partition_metadata", node=s.sim.active_controller())) == n_meta
    assert s.kinds() == {}


def test_zombie_leader_is_fenced_its_produce_fails_and_its_alter_partition_is_rejected() -> None:
    """Seed 001 (leader epochs fence zombies): leader 1 is cut off from the
    controllers and the other brokers but still reachable by clients. The
    controllers elect a new leader; the zombie accepts an acks=all produce it
    can never commit (it fails), and its ISR shrink, once it reaches the
    controller, is refused for its stale leader epoch. Nothing it wrote survives."""
    from reference_impl.core.messages import AlterPartitionRequest, AlterPartitionResponse

    s = Scenario(seed=7)
    (tp,) = s.start(replicas=(1, 2, 3))
    assert s.produce(1, tp, [0, 1], acks=-1).error == Errors.NONE
    from_zombie = s.tap_messages(lambda src, dst, m: src == 1 and isinstance(m, AlterPartitionRequest))
    to_zombie = s.tap_messages(lambda src, dst, m: dst == 1 and isinstance(m, AlterPartitionResponse))
    s.isolate(1)  # every node, but not the client
    s.wait(lambda: s.sim.leader_of(tp) in (2, 3), what="a new leader")
    new_leader = s.sim.leader_of(tp)
    box = s.produce_async(1, tp, [666], acks=-1, timeout_ms=8000)
    s.wait(lambda: bool(box), timeout_ms=12_000, what="the zombie's answer")
    assert box[0].error != Errors.NONE
    s.wait(lambda: bool(from_zombie), what="the zombie proposing an ISR shrink")
    # its requests reach the controllers again, their answers (and metadata) do not
    s.sim.net.heal_pairs({(1, c) for c in s.sim.controller_ids})
    s.wait(lambda: any(r.error != Errors.NONE for _, _, m in to_zombie for r in m.results),
           what="the controller refusing the zombie's AlterPartition")
    refusal = [m for _, _, m in to_zombie if m.results][0]
    assert refusal.results[0].error == Errors.FENCED_LEADER_EPOCH
    s.sim.heal()
    s.wait(lambda: bool(s.trace("become_follower", node=1, tp=tp, leader=new_leader)), what="zombie follows")
    s.sim.run_for(5000)
    log = s.read_all(tp)
    assert 666 not in log.values() and log.get(0) == 0 and log.get(1) == 1
    assert s.kinds() == {}


def _isr_expansion(strict: bool) -> tuple[Scenario, object, int, dict[int, object]]:
    """Seed 000 (maybeExpandIsr / isFollowerInSync): a follower joins the ISR
    only when its LEO reaches the HW *and* the leader-epoch start offset.

    Replicas A=1, C=2, B=3. B stops at LEO 9 and leaves the ISR; offset 9 is
    committed by A and C, but C never hears that HW (A->C cut after C's
    append). A is isolated; C leads epoch 1 from offset 10 with HW 9. B's first
    fetch from C is at 9 >= HW: without the start-offset rule B joins at once.
    The moment C proposes B, B is cut from C's answers; C dies; B leads.
    Returns the scenario, B's LEO when C proposed it, and the final log.
    """
    s = Scenario(seed=8, variants={"strict_isr_expand": strict})
    (tp,) = s.start(replicas=(1, 2, 3))
    assert s.produce(1, tp, list(range(9)), acks=-1).error == Errors.NONE
    s.sim.cut({(1, 3), (3, 1)})
    box = s.produce_async(1, tp, [9], acks=1)
    s.wait(lambda: s.leo(2, tp) == 10, what="C appended offset 9")
    s.sim.cut({(1, 2)})
    s.wait(lambda: bool(box) and box[0].error == Errors.NONE, what="acks=1 produce of offset 9")
    s.wait(lambda: s.leader_isr(1, tp) == ([1, 2], "committed"), what="B out of the ISR")
    s.wait(lambda: s.hw(1, tp) == 10, what="offset 9 committed on A")
    assert s.hw(2, tp) == 9, "precondition: C's HW lags"
    s.isolate(1)
    s.wait(lambda: s.sim.leader_of(tp) == 2, what="C leads")
    proposed: list[int] = []

    def b_proposed() -> bool:
        if not proposed:
            for e in s.trace("isr", node=2, tp=tp):
                if 3 in e["maximal_isr"] and e["leader_epoch"] >= 1:
                    proposed.append(s.leo(3, tp))
                    s.sim.cut({(2, 3)})
                    break
        return bool(proposed)

    s.wait(b_proposed, what="C proposing B for the ISR")
    s.wait(lambda: s.leader_isr(2, tp) == ([2, 3], "committed") or s.leader_isr(2, tp) == ([3, 2], "committed"),
           what="B in the ISR")
    s.sim.kill(2)
    s.wait(lambda: s.sim.leader_of(tp) == 3, what="B leads")
    s.sim.heal_everything()
    s.sim.run_for(10_000)
    return s, tp, proposed[0], s.read_all(tp)


def test_isr_expansion_before_the_epoch_start_offset_loses_a_committed_offset() -> None:
    s, tp, b_leo, log = _isr_expansion(strict=False)
    assert b_leo == 9, "B was proposed below the leader-epoch start offset 10"
    assert log.get(9) != 9, "committed offset 9 is gone"
    assert s.kinds().get("leader-completeness", 0) >= 1


def test_isr_expansion_waits_for_the_leader_epoch_start_offset_strict_isr_expand() -> None:
    s, tp, b_leo, log = _isr_expansion(strict=True)
    assert b_leo >= 10
    assert log.get(9) == 9
    assert s.kinds() == {}


def _committed_metadata(s: Scenario, node: int) -> list[object]:
    from reference_impl.core.storage import METADATA_LOG

    hws = [e["high_watermark"] for e in s.trace("raft_commit", node=node)]
    hw = max(hws) if hws else 0
    log = s.sim.host(node).disk.logs.get(METADATA_LOG)
    return [e for e in (log.cache if log else []) if e.offset < hw]


def test_controller_failover_elects_a_complete_log_and_loses_no_committed_record() -> None:
    """Seed 004 (KRaft): the new active controller's metadata log holds every
    record the old one committed (same offset, epoch and record), so no
    committed topic or partition change is lost; the quorum never has two
    leaders in one epoch."""
    from reference_impl.core.messages import CreateTopicsRequest, NewTopic

    s = Scenario(seed=9)
    (tp,) = s.start(replicas=(1, 2, 3))
    old = s.sim.active_controller()
    r = s.request(1, lambda ref: CreateTopicsRequest(ref, (NewTopic("u", 2, 3),)))
    assert r is not None and r.results[0].error == Errors.NONE
    s.sim.run_for(1000)
    committed = _committed_metadata(s, old)
    assert any(getattr(e.record, "name", None) == "u" for e in committed)
    old_epoch = s.sim.controller_leader[0]
    s.isolate(old)
    s.wait(lambda: s.sim.controller_leader[0] > old_epoch, what="a new active controller")
    new = s.sim.active_controller()
    assert new != old
    s.sim.run_for(1000)
    now_log = _committed_metadata(s, new)
    assert now_log[: len(committed)] == committed, "the new leader's log holds every committed record"
    for _ in range(5):  # a broker may still forward to the old controller: retry like a client
        r2 = s.request(2, lambda ref: CreateTopicsRequest(ref, (NewTopic("v", 1, 3),), timeout_ms=5000), 8000)
        if r2 is not None and r2.results[0].error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            break
    assert r2 is not None and r2.results[0].error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS)
    s.sim.heal()
    s.sim.run_for(5000)
    final = _committed_metadata(s, old)
    assert final[: len(committed)] == committed
    assert final == _committed_metadata(s, new)[: len(final)]
    md = s.metadata(3)
    assert {t.name for t in md.topics} >= {"t", "u", "v"}
    assert s.kinds() == {}


def test_paused_leader_resumes_as_a_follower_and_its_queued_work_is_harmless() -> None:
    """SIGSTOP semantics: messages and timers queue while a node is paused.
    A leader paused past the session timeout is fenced and replaced; on
    resume it processes the backlog, learns the new epoch and follows."""
    s = Scenario(seed=15)
    (tp,) = s.start(replicas=(1, 2, 3))
    assert s.produce(1, tp, [0, 1], acks=-1).error == Errors.NONE
    s.sim.pause(1)
    queued_before = len(s.sim.host(1).queued)
    s.wait(lambda: s.sim.leader_of(tp) in (2, 3), what="a new leader while 1 is paused")
    assert len(s.sim.host(1).queued) > queued_before, "messages queued for the paused node"
    assert s.produce_to_leader(tp, 2)[0] == "ok"
    s.sim.resume(1)
    assert s.sim.host(1).queued == []
    s.wait(lambda: bool(s.trace("become_follower", node=1, tp=tp)), what="old leader follows")
    s.sim.run_for(5000)
    assert [v for _, v in sorted(s.read_all(tp).items())] == [0, 1, 2]
    assert s.kinds() == {}


def test_controlled_shutdown_moves_leadership_halts_and_leaves_a_clean_shutdown_marker() -> None:
    from reference_impl.core.storage import CLEAN_SHUTDOWN

    s = Scenario(seed=16)
    (tp,) = s.start(replicas=(1, 2, 3))
    assert s.produce(1, tp, [0, 1, 2], acks=-1).error == Errors.NONE
    s.sim.shutdown(1)
    s.wait(lambda: s.sim.host(1).halted, what="the node halting")
    assert s.sim.leader_of(tp) in (2, 3)
    assert CLEAN_SHUTDOWN in s.sim.host(1).disk.stored_state().files
    assert s.produce_to_leader(tp, 3)[0] == "ok"
    s.sim.restart(1)
    s.wait(lambda: 1 in s.isr_of(tp), what="broker 1 back in the ISR")
    assert [v for _, v in sorted(s.read_all(tp).items())] == [0, 1, 2, 3]
    assert s.kinds() == {}


def test_controlled_shutdown_completes_when_the_active_controller_dies_midway() -> None:
    """The shutdown's progress lives in the active controller's memory (Kafka's
    BrokerHeartbeatManager); killed mid-shutdown, the next controller
    resumes it from the broker's next shutdown heartbeat: leadership stays
    moved, the broker halts cleanly, and nothing acknowledged is lost."""
    from reference_impl.core.storage import CLEAN_SHUTDOWN

    s = Scenario(seed=19)
    (tp,) = s.start(replicas=(1, 2, 3))
    assert s.produce(1, tp, [0, 1, 2], acks=-1).error == Errors.NONE
    old = s.sim.active_controller()
    s.sim.shutdown(1)
    s.wait(lambda: s.sim.leader_of(tp) in (2, 3), what="leadership moved off the shutting-down broker")
    assert not s.sim.host(1).halted
    s.sim.kill(old)
    s.wait(lambda: s.sim.host(1).halted, what="the node halting under the next controller")
    assert s.sim.active_controller() not in (old, -1)
    assert s.sim.leader_of(tp) in (2, 3)
    assert CLEAN_SHUTDOWN in s.sim.host(1).disk.stored_state().files
    assert s.produce_to_leader(tp, 3)[0] == "ok"
    s.sim.restart(old)
    s.sim.restart(1)
    s.wait(lambda: 1 in s.isr_of(tp), what="broker 1 back in the ISR")
    assert [v for _, v in sorted(s.read_all(tp).items())] == [0, 1, 2, 3]
    assert s.kinds() == {}


def test_a_leader_of_an_empty_epoch_rejoins_the_isr_as_a_follower() -> None:
    """Seed 000 (epoch-based truncation): broker 2 leads epoch 1 without
    appending anything, so its epoch cache ends with (1, LEO). As broker 3's
    follower its fetches name epoch 1, which 3 never had; the divergence
    answer is its own LEO, and truncating to it must still drop the empty
    epoch (Kafka's UnifiedLog.truncateTo) or every later fetch diverges again
    and broker 2 never rejoins the ISR (found by the soak, seed 1158)."""
    s = Scenario(seed=18)
    (tp,) = s.start(replicas=(1, 2, 3))
    assert s.produce(1, tp, [0, 1, 2, 3, 4], acks=-1).error == Errors.NONE
    s.isolate(1)
    s.wait(lambda: s.sim.leader_of(tp) == 2, what="broker 2 leads epoch 1")
    s.isolate(2)
    s.wait(lambda: s.sim.leader_of(tp) == 3, what="broker 3 leads")
    s.sim.heal()
    s.wait(lambda: sorted(s.isr_of(tp)) == [1, 2, 3], timeout_ms=30_000, what="every broker back in the ISR")
    assert s.produce_to_leader(tp, 5)[0] == "ok"
    assert [v for _, v in sorted(s.read_all(tp).items())] == [0, 1, 2, 3, 4, 5]
    assert s.kinds() == {}
