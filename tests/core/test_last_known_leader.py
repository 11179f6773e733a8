"""KIP-966 LastKnownLeader (seed 002, "The last known leader will be tracked"
and "Delivery plan" when unclean recovery has not shipped or is disabled).

The election order with the recovery manager off:

* ISR member -> unfenced ELR member;
* fenced ELR members: unclean off -> the first ELR member to be unfenced;
  unclean on -> an unclean election;
* no ELR members: unclean on -> an unclean election; unclean off -> the
  LastKnownLeader once it is unfenced.

The first tests state the rules on ``PartitionChangeBuilder`` alone; the
controller tests drive a real ``ControllerRole`` through broker requests; the
last one runs whole nodes: every replica is killed, all restart uncleanly, and
the partition leads again with its acknowledged records.
"""

from __future__ import annotations


from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import (
    NO_LEADER,
    Errors,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from reference_impl.core.metadata import RECOVERED, RECOVERING, PartitionRegistration
from reference_impl.core.node import Node
from reference_impl.core.partition_change import (
    BALANCED,
    ELR,
    LAST_KNOWN_LEADER,
    STRATEGY_NONE,
    UNCLEAN,
    PartitionChangeBuilder,
)
from reference_impl.core.raft.testkit import Loop
from reference_impl.core.storage import StoredState

from tests.core.controllerkit import BROKERS, OneController
from tests.core.test_node_cluster import build, create_and_produce, replies_of

TP = TopicPartition("t", 0)


# ---------------------------------------------------------------------------
# the builder's rules
# ---------------------------------------------------------------------------


def builder(reg: PartitionRegistration, active: set[int], *, unclean=False, elr=True, strategy=None, reason="test"):
    return PartitionChangeBuilder(
        tp=TP,
        current=reg,
        is_active=lambda b: b in active,
        min_isr=2,
        elr_enabled=elr,
        unclean_allowed=unclean,
        reason=reason,
        recovery_strategy=strategy,
    )


def leaderless(elr=(), lkl=1, last_known_elr=(), replicas=(1, 2, 3)) -> PartitionRegistration:
    """All replicas fenced, ISR empty: what is left after the last ISR member
    (``lkl``) was fenced."""
    return PartitionRegistration(
        replicas=replicas,
        isr=(),
        leader=NO_LEADER,
        leader_epoch=4,
        partition_epoch=9,
        elr=tuple(elr),
        last_known_elr=tuple(last_known_elr),
        last_known_leader=lkl,
    )


def test_fencing_the_last_isr_member_records_it_as_last_known_leader():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(2,), leader=2, leader_epoch=3, partition_epoch=7)
    change = builder(reg, active=set()).remove_from_isr(2).build()
    assert change is not None
    assert change.record.last_known_leader == 2
    assert change.after.leader == NO_LEADER and change.after.isr == ()
    assert change.after.last_known_leader == 2
    # it also joins the ELR (it was in the ISR when the ISR fell below min ISR)
    assert change.after.elr == (2,)


def test_shrinking_a_larger_isr_does_not_record_a_last_known_leader():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2), leader=1, leader_epoch=3, partition_epoch=7)
    change = builder(reg, active={1}).remove_from_isr(2).build()
    assert change is not None and change.after.isr == (1,)
    assert change.record.last_known_leader is None and change.after.last_known_leader == NO_LEADER


def test_a_new_leader_clears_the_last_known_leader():
    change = builder(leaderless(elr=(3,), lkl=1), active={3}).build()
    assert change is not None and change.election == ELR and change.after.leader == 3
    assert change.after.last_known_leader == NO_LEADER


def test_fenced_elr_members_unclean_off_wait_for_an_elr_member_not_the_last_known_leader():
    # the LastKnownLeader is back, but an ELR member (fenced) exists: wait for it
    assert builder(leaderless(elr=(3,), lkl=1), active={1, 2}).build() is None


def test_fenced_elr_members_unclean_on_start_an_unclean_election():
    change = builder(leaderless(elr=(3,), lkl=1), active={2}, unclean=True).build()
    assert change is not None and change.election == UNCLEAN and change.after.leader == 2


def test_no_elr_members_unclean_on_the_active_last_known_leader_comes_before_an_unclean_election_kafka_order():
    """Kafka's PartitionChangeBuilder.electAnyLeader tries the last known
    leader before an unclean election (seed 002: "the LastKnownLeader is
    preferred when ELR and ISR are both empty"), though the replica order
    puts 3 first."""
    reg = leaderless(lkl=1, replicas=(3, 1, 2))
    change = builder(reg, active={1, 3}, unclean=True).build()
    assert change is not None and change.election == LAST_KNOWN_LEADER and change.after.leader == 1


def test_no_elr_members_unclean_on_a_fenced_last_known_leader_leaves_room_for_an_unclean_election():
    """Seed 002 "Delivery plan": no ELR member and unclean election enabled
    start an unclean election; a fenced broker cannot lead (Kafka's builder
    only logs the last known leader's liveness, docs/architecture.md)."""
    reg = leaderless(lkl=1, replicas=(3, 1, 2))
    change = builder(reg, active={2, 3}, unclean=True).build()
    assert change is not None and change.election == UNCLEAN and change.after.leader == 3


def test_no_elr_members_unclean_off_elect_the_last_known_leader_once_unfenced():
    reg = leaderless(lkl=1, last_known_elr=(1, 2, 3))
    # while it is fenced nobody leads, even with every other replica back
    assert builder(reg, active={2, 3}).build() is None
    change = builder(reg, active={1, 2, 3}).build()
    assert change is not None and change.election == LAST_KNOWN_LEADER
    assert change.after.leader == 1 and change.after.isr == (1,)
    # it may have lost an un-fsynced tail: it recovers alone, as after an unclean election
    assert change.after.leader_recovery_state == RECOVERING
    assert change.after.last_known_leader == NO_LEADER
    assert change.after.leader_epoch == reg.leader_epoch + 1
    assert change.record.reason.endswith("election:last-known-leader")
    # an unclean result, so LastKnownELR is emptied (Kafka's maybeUpdateRecordElr)
    assert change.after.last_known_elr == () and change.after.elr == ()


def test_an_isr_member_leaving_in_the_same_change_counts_as_an_elr_member():
    # ISR {2} loses 2 (fenced) while an old LastKnownLeader value is active:
    # 2 joins the ELR, so the ELR is not empty and no LastKnownLeader election happens
    reg = PartitionRegistration(
        replicas=(1, 2, 3), isr=(2,), leader=NO_LEADER, leader_epoch=3, partition_epoch=7, last_known_leader=1
    )
    change = builder(reg, active={1}).remove_from_isr(2).build()
    assert change is not None and change.after.leader == NO_LEADER and change.after.elr == (2,)


def test_recovery_manager_on_keeps_its_own_rules_and_never_elects_the_last_known_leader():
    reg = leaderless(lkl=1, last_known_elr=(1,))
    b = builder(reg, active={1, 2, 3}, strategy=BALANCED)
    change = b.build()
    # Balanced: every LastKnownELR member is back -> ask the replicas, no direct election
    assert b.needs_recovery and (change is None or change.election is None)
    b = builder(reg, active={1, 2, 3}, strategy=STRATEGY_NONE)
    change = b.build()
    assert not b.needs_recovery and (change is None or change.after.leader == NO_LEADER)


def test_without_kip966_no_last_known_leader_is_tracked():
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(2,), leader=2, leader_epoch=3, partition_epoch=7)
    change = builder(reg, active=set(), elr=False).remove_from_isr(2).build()
    # the last ISR member stays in the ISR (seed 001 §2.8): it is the one that may lead again
    assert change is not None and change.after.isr == (2,) and change.after.leader == NO_LEADER
    assert change.after.last_known_leader == NO_LEADER


def test_merge_keeps_last_known_leader_unless_the_change_sets_it():
    from reference_impl.core.messages import PartitionChangeRecord

    reg = leaderless(lkl=2)
    assert reg.merge(PartitionChangeRecord(TP, elr=(3,))).last_known_leader == 2
    assert reg.merge(PartitionChangeRecord(TP, last_known_leader=NO_LEADER)).last_known_leader == NO_LEADER


# ---------------------------------------------------------------------------
# a real controller, driven by broker requests
# ---------------------------------------------------------------------------

class Controller(OneController):
    def __init__(self) -> None:
        super().__init__(ProtocolConfig(), 1)

    def restart(self, b: int, unclean: bool) -> None:
        """A new incarnation of ``b``; an unclean one has no clean-shutdown marker."""
        self.register(b, -1 if unclean else self.epochs.get(b, -1))

    def fence(self, b: int) -> None:
        self.hb(b, want_fence=True)

    def fence_all_leader_last(self) -> int:
        """Fence the followers, then the leader: the leader is the last ISR member."""
        leader = self.part.leader
        for b in BROKERS:
            if b != leader:
                self.fence(b)
        self.fence(leader)
        return leader


def test_controller_records_the_last_isr_member_and_traces_it():
    c = Controller()
    leader = c.fence_all_leader_last()
    p = c.part
    assert p.leader == NO_LEADER and p.isr == () and p.last_known_leader == leader
    ev = [e.data for _t, _n, e in c.loop.traces if e.kind == "partition_metadata"][-1]
    assert ev["last_known_leader"] == leader


def test_controller_elects_the_first_elr_member_to_be_unfenced():
    c = Controller()
    leader = c.fence_all_leader_last()
    elr = c.part.elr
    assert len(elr) >= 2 and leader in elr
    # bring back the ELR member that comes *last* in assignment order first
    first_back = elr[-1]
    c.hb(first_back)
    assert c.part.leader == first_back and c.elections()[-1]["data_kind"] == "elr"
    assert c.part.last_known_leader == NO_LEADER
    # the next one to come back does not take over
    c.hb(elr[0])
    assert c.part.leader == first_back


def test_controller_elects_an_uncleanly_restarted_last_known_leader_once_unfenced():
    c = Controller()
    leader = c.fence_all_leader_last()
    elr = set(c.part.elr)
    # every replica restarts after an unclean shutdown: ISR and ELR are empty,
    # the ELR members move to the LastKnownELR
    for b in BROKERS:
        c.restart(b, unclean=True)
    p = c.part
    assert p.isr == () and p.elr == () and set(p.last_known_elr) == elr and p.last_known_leader == leader
    for b in BROKERS:
        if b != leader:
            c.hb(b)
            assert c.part.leader == NO_LEADER  # the others never lead on their own
    c.hb(leader)
    p = c.part
    assert p.leader == leader and p.isr == (leader,) and p.leader_recovery_state == RECOVERING
    assert p.last_known_leader == NO_LEADER
    assert c.elections()[-1]["data_kind"] == "last-known-leader"


# ---------------------------------------------------------------------------
# whole nodes: every replica killed, all restart uncleanly
# ---------------------------------------------------------------------------

VOTERS = (101, 102, 103)


def restarted(node_id: int, stored: StoredState, cfg: ProtocolConfig) -> Node:
    """A broker process started again, with a fresh incarnation id."""
    return build(node_id, {"broker"}, VOTERS, stored=stored, cfg=cfg, rng_seed=node_id + 2000, incarnation="-again")


def test_all_replicas_killed_the_last_known_leader_leads_again_with_the_acknowledged_records():
    cfg = ProtocolConfig()
    loop = Loop(latency=2)
    for i in VOTERS:
        loop.add(i, build(i, {"controller"}, VOTERS, cfg=cfg))
    brokers = (1, 2, 3)
    for i in brokers:
        loop.add(i, build(i, {"broker"}, VOTERS, cfg=cfg))
    create_and_produce(loop, brokers, entry=2)

    def active():
        return next(loop.nodes[v].controller for v in VOTERS if loop.nodes[v].controller.is_active)

    # SIGKILL of every broker: no clean-shutdown marker, the page cache survives
    for b in brokers:
        loop.crash(b)
    assert loop.run_until_true(lambda: active().image.partitions[TP].isr == (), limit_ms=60_000)
    lkl = active().image.partitions[TP].last_known_leader
    assert lkl in brokers
    for b in brokers:
        loop.restart(b, lambda stored, b=b: restarted(b, stored, cfg))
    assert loop.run_until_true(lambda: active().image.partitions[TP].leader != NO_LEADER, limit_ms=60_000)
    p = active().image.partitions[TP]
    assert p.leader == lkl
    assert [e.data for _t, _n, e in loop.traces if e.kind == "election"][-1]["data_kind"] == "last-known-leader"
    # it recovers, the others rejoin the ISR, and acks=all produces succeed again
    assert loop.run_until_true(
        lambda: len(active().image.partitions[TP].isr) >= 2
        and active().image.partitions[TP].leader_recovery_state == RECOVERED,
        limit_ms=60_000,
    )
    # the leader learns the expanded ISR from its AlterPartition answer
    assert loop.run_until_true(
        lambda: loop.nodes[lkl].broker.partitions[TP].is_leader
        and len(loop.nodes[lkl].broker.partitions[TP].state.isr) >= 2,
        limit_ms=10_000,
    )
    loop.deliver(lkl, ProduceRequest("send-2", TP, -1, 1, ("c",)))
    assert loop.run_until_true(lambda: len(replies_of(loop, ProduceResponse)) == 2, limit_ms=30_000)
    assert replies_of(loop, ProduceResponse)[-1].error == Errors.NONE
    log = loop.nodes[lkl].broker.partitions[TP].log
    assert [b.payload for b in log.batches] == [("a", "b"), ("c",)]
