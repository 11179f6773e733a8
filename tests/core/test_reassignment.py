"""Partition reassignment on the active controller (KIP-455), as Kafka's
ReplicationControlManager (alterPartitionReassignments,
changePartitionReassignment, cancelPartitionReassignment,
listPartitionReassignments) and PartitionReassignmentReplicas /
PartitionReassignmentRevert / PartitionChangeBuilder make it: the replica
list grows to the union with adding/removing recorded, the new replicas join
the ISR through the leader's AlterPartition, and the change that lets the ISR
hold the whole target completes it (target replicas, removing ones out of
ISR, leader moved if removed, leader epoch bumped when a replica leaves)."""

from __future__ import annotations

from reference_impl.core.messages import (
    AlterPartitionReassignmentsRequest,
    Errors,
    ListPartitionReassignmentsRequest,
    PartitionChangeRecord,
    ReassignPartition,
    TopicPartition,
)
from reference_impl.core.metadata import RECOVERED, PartitionRegistration
from reference_impl.core.partition_change import (
    complete_reassignment,
    reassignment_replicas,
    revert_reassignment,
)

from tests.core.test_controller import TP, Cluster


def four_brokers(assignment=(0, 1, 2)) -> Cluster:
    c = Cluster()
    c.start_brokers(0, 1, 2, 3)
    assert c.create("t", assignments=(assignment,)).error == Errors.NONE
    return c


def reassign(c: Cluster, replicas, tp=TP):
    target = None if replicas is None else tuple(replicas)
    return c.ask(AlterPartitionReassignmentsRequest("r", (ReassignPartition(tp, target),)), 1)


def listed(c: Cluster, tps=None):
    return c.ask(ListPartitionReassignmentsRequest("l", tps), 1)


# -- the pure rules ---------------------------------------------------------------


def test_kip455_reassignment_replicas_are_target_then_removing_partition_reassignment_replicas():
    assert reassignment_replicas((0, 1, 2), (3, 1, 2)) == ((3, 1, 2, 0), (3,), (0,))
    assert reassignment_replicas((0, 1, 2), (2, 1, 0)) == ((2, 1, 0), (), ())  # a reorder adds and removes nothing
    assert reassignment_replicas((0, 1), (0, 1, 2, 3)) == ((0, 1, 2, 3), (2, 3), ())


def test_kip455_reassignment_completes_once_the_isr_holds_every_adding_replica_maybe_complete_reassignment():
    """Kafka 4.4's rule (PartitionReassignmentReplicas, kafka-metadata-4.4.0.jar
    lines 99-132): the adding replicas in the ISR, and every staying one only
    when the move lowers the replication factor."""
    # replicas 3,1,2 + removing 0: 3 still catching up
    assert complete_reassignment((3, 1, 2, 0), (3,), (0,), (0, 1, 2)) is None
    assert complete_reassignment((3, 1, 2, 0), (3,), (0,), (0, 1, 2, 3)) == ((3, 1, 2), (1, 2, 3))
    # 3 caught up while 1 and 2 are out of the ISR: done, with the ISR it has
    # (as Kafka did in the reassign batch: replicas [4, 1, 3], ISR [3])
    assert complete_reassignment((3, 1, 2, 0), (3,), (0,), (0, 3)) == ((3, 1, 2), (3,))
    # a move that lowers the replication factor waits for every staying replica
    assert complete_reassignment((1, 2, 0), (), (0,), (0, 1)) is None
    assert complete_reassignment((1, 2, 0), (), (0,), (0, 1, 2)) == ((1, 2), (1, 2))
    # nothing in progress: nothing to complete
    assert complete_reassignment((0, 1, 2), (), (), (0, 1, 2)) is None
    # the ISR without the removing replicas must not be empty
    assert complete_reassignment((1, 0), (), (0,), (0,)) is None


def test_kip455_cancel_keeps_removing_replicas_and_drops_adding_ones_partition_reassignment_revert():
    p = PartitionRegistration((3, 1, 2, 0), (0, 1, 2), 0, 0, 1, adding_replicas=(3,), removing_replicas=(0,))
    assert revert_reassignment(p) == ((1, 2, 0), (0, 1, 2), False)
    only_adding_in_isr = PartitionRegistration((3, 0), (3,), 3, 1, 2, adding_replicas=(3,), removing_replicas=(0,))
    assert revert_reassignment(only_adding_in_isr) == ((0,), (0,), True)


def test_a_record_that_drops_a_replica_bumps_the_leader_epoch_trigger_leader_epoch_bump_for_replica_reassignment():
    p = PartitionRegistration((3, 1, 2, 0), (0, 1, 2, 3), 1, 4, 7, adding_replicas=(3,), removing_replicas=(0,))
    done = p.merge(PartitionChangeRecord(TopicPartition("t", 0), isr=(1, 2, 3), replicas=(3, 1, 2),
                                         adding_replicas=(), removing_replicas=()))
    assert (done.leader, done.leader_epoch, done.partition_epoch) == (1, 5, 8)
    grown = p.merge(PartitionChangeRecord(TopicPartition("t", 0), replicas=(3, 1, 2, 0, 4)))
    assert grown.leader_epoch == 4  # nothing left the list


# -- the controller -----------------------------------------------------------------


def test_kip455_a_move_grows_the_replicas_to_the_union_and_completes_when_the_new_replica_joins_the_isr():
    c = four_brokers()
    p0 = c.part()
    (r,) = reassign(c, (3, 1, 2)).results
    assert r.error == Errors.NONE
    p = c.part()
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 1, 2, 0), (3,), (0,))
    assert p.isr == p0.isr and p.leader == 0 and p.leader_epoch == p0.leader_epoch  # growing fences nobody
    ongoing = listed(c)
    assert ongoing.error == Errors.NONE
    assert [(o.tp, o.replicas, o.adding_replicas, o.removing_replicas) for o in ongoing.reassignments] == [
        (TP, (3, 1, 2, 0), (3,), (0,))]
    # the leader (0, being removed) adds 3 to the ISR: that completes the
    # reassignment and moves the leadership off 0 (NEW_LEADER_ELECTED)
    (a,) = c.alter(0, [0, 1, 2, 3]).results
    assert a.error == Errors.NEW_LEADER_ELECTED
    p = c.part()
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 1, 2), (), ())
    assert set(p.isr) == {1, 2, 3} and p.leader == 3 and p.leader_epoch == p0.leader_epoch + 1
    assert listed(c).reassignments == ()


def test_kip455_completion_keeping_the_leader_still_bumps_its_epoch_so_the_removed_replica_is_fenced():
    c = four_brokers()
    p0 = c.part()
    reassign(c, (0, 1, 3))
    (a,) = c.alter(0, [0, 1, 2, 3]).results
    assert a.error == Errors.NONE
    p = c.part()
    assert p.replicas == (0, 1, 3) and set(p.isr) == {0, 1, 3} and p.leader == 0
    assert p.leader_epoch == p0.leader_epoch + 1


def test_kip455_a_reorder_or_a_removal_the_isr_already_allows_completes_in_one_record():
    c = four_brokers()
    reassign(c, (2, 1, 0))
    p = c.part()
    assert p.replicas == (2, 1, 0) and not p.is_reassigning
    reassign(c, (2, 1))
    p = c.part()
    assert p.replicas == (2, 1) and 0 not in p.isr and not p.is_reassigning and p.leader in (1, 2)


def test_kip455_a_target_with_an_unregistered_or_repeated_broker_is_invalid_replica_assignment():
    c = four_brokers()
    (r,) = reassign(c, (0, 1, 9)).results
    assert r.error == Errors.INVALID_REPLICA_ASSIGNMENT and "9" in r.message
    (r,) = reassign(c, (0, 1, 1)).results
    assert r.error == Errors.INVALID_REPLICA_ASSIGNMENT
    (r,) = reassign(c, ()).results
    assert r.error == Errors.INVALID_REPLICA_ASSIGNMENT
    (r,) = reassign(c, (0, 1), tp=TopicPartition("nope", 0)).results
    assert r.error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert c.part().replicas == (0, 1, 2)


def test_kip455_cancel_without_a_reassignment_is_no_reassignment_in_progress_and_with_one_reverts():
    c = four_brokers()
    (r,) = reassign(c, None).results
    assert r.error == Errors.NO_REASSIGNMENT_IN_PROGRESS
    reassign(c, (3, 1, 2))
    (r,) = reassign(c, None).results
    assert r.error == Errors.NONE
    p = c.part()
    assert p.replicas == (1, 2, 0) and not p.is_reassigning and set(p.isr) == {0, 1, 2}
    assert p.leader_recovery_state == RECOVERED


def test_kip455_a_removed_replica_fenced_meanwhile_does_not_block_completion():
    c = four_brokers()
    reassign(c, (3, 1, 2))
    c.keep_alive(c.config.broker_session_timeout_ms + 2000, alive=(1, 2, 3))
    p = c.part()
    assert c.active.image.brokers[0].fenced and 0 not in p.isr and p.leader in (1, 2)
    (a,) = c.alter(p.leader, [*p.isr, 3]).results
    assert a.error == Errors.NONE
    p = c.part()
    assert p.replicas == (3, 1, 2) and set(p.isr) == {1, 2, 3} and not p.is_reassigning


def test_kip860_without_allow_replication_factor_change_a_target_of_another_size_is_invalid_replication_factor():
    c = four_brokers()
    req = AlterPartitionReassignmentsRequest(
        "r", (ReassignPartition(TP, (0, 1, 2, 3)),), allow_replication_factor_change=False)
    (r,) = c.ask(req, 1).results
    assert r.error == Errors.INVALID_REPLICATION_FACTOR and c.part().replicas == (0, 1, 2)
    req = AlterPartitionReassignmentsRequest("r", (ReassignPartition(TP, (3, 1, 2)),), allow_replication_factor_change=False)
    assert c.ask(req, 1).results[0].error == Errors.NONE
