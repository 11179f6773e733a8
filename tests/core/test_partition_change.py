"""PartitionChangeBuilder: election order and KIP-966 ELR update rules (seed 002)."""

from __future__ import annotations

from reference_impl.core.messages import NO_LEADER, TopicPartition
from reference_impl.core.metadata import RECOVERED, RECOVERING, PartitionRegistration
from reference_impl.core.partition_change import CLEAN, ELR, UNCLEAN, PartitionChangeBuilder

TP = TopicPartition("t", 0)


def part(isr, leader, elr=(), lkelr=(), replicas=(0, 1, 2), le=5, pe=9, state=RECOVERED):
    return PartitionRegistration(tuple(replicas), tuple(isr), leader, le, pe, tuple(elr), tuple(lkelr), state)


def builder(p, alive=(0, 1, 2), min_isr=2, elr=True, unclean=False):
    return PartitionChangeBuilder(TP, p, lambda b: b in alive, min_isr=min_isr, elr_enabled=elr, unclean_allowed=unclean)


# -- elections -----------------------------------------------------------------


def test_leader_that_stays_in_isr_and_alive_is_kept():
    ch = builder(part([0, 1, 2], 0)).set_target_isr([0, 1]).build()
    assert ch.record.leader is None and ch.election is None
    assert ch.after.leader_epoch == 5 and ch.after.partition_epoch == 10  # ISR-only change: partition epoch only


def test_clean_election_picks_first_active_isr_member_in_assignment_order():
    ch = builder(part([0, 1, 2], 0), alive=(1, 2)).remove_from_isr(0).build()
    assert (ch.after.leader, ch.election) == (1, CLEAN)
    assert ch.after.leader_epoch == 6 and ch.after.partition_epoch == 10
    assert ch.after.isr == (1, 2)


def test_without_elr_the_last_isr_member_stays_when_fenced_and_partition_goes_leaderless():
    ch = builder(part([2], 2), alive=(0, 1), elr=False).remove_from_isr(2).build()
    assert ch.after.isr == (2,) and ch.after.leader == NO_LEADER and ch.election is None
    assert ch.after.elr == () and ch.after.last_known_elr == ()


def test_elr_member_elected_when_isr_has_no_active_member():
    ch = builder(part([], NO_LEADER, elr=[1, 2]), alive=(0, 1)).build()
    assert (ch.after.leader, ch.election) == (1, ELR)
    assert ch.after.isr == (1,) and ch.after.elr == (2,)


def test_fenced_elr_members_are_not_elected_and_unclean_waits_when_disallowed():
    assert builder(part([], NO_LEADER, elr=[1, 2]), alive=(0,)).build() is None


def test_unclean_election_only_when_allowed_and_it_sets_recovering():
    p = part([2], NO_LEADER, elr=[], replicas=(0, 1, 2))
    assert builder(p, alive=(0, 1), elr=False, unclean=False).build() is None
    ch = builder(p, alive=(0, 1), elr=False, unclean=True).build()
    assert (ch.after.leader, ch.election) == (0, UNCLEAN)
    assert ch.after.isr == (0,) and ch.after.leader_recovery_state == RECOVERING


def test_unclean_election_empties_elr_and_last_known_elr():
    """PartitionChangeBuilder.maybeUpdateRecordElr: after an unclean election
    the fenced ELR members no longer hold what is committed (the new leader's
    log defines it), so they must not win a later clean ELR election."""
    p = part([], NO_LEADER, elr=[0, 1], lkelr=[2], replicas=(0, 1, 2, 3))
    ch = builder(p, alive=(3,), unclean=True).build()
    assert (ch.after.leader, ch.election) == (3, UNCLEAN) and ch.after.isr == (3,)
    assert ch.after.elr == () and ch.after.last_known_elr == ()
    # the unclean leader fails; the old ELR members are back, none was in its ISR
    again = builder(ch.after, alive=(0, 1), unclean=False).remove_from_isr(3).build()
    assert again.election is None and again.after.leader == NO_LEADER


def test_isr_member_preferred_over_elr_member():
    ch = builder(part([2], NO_LEADER, elr=[1]), alive=(1, 2)).build()
    assert (ch.after.leader, ch.election) == (2, CLEAN)


# -- ELR updates (seed 002 "ELR update") ------------------------------------------


def test_isr_at_or_above_min_isr_clears_elr_and_last_known_elr():
    ch = builder(part([0], 0, elr=[1], lkelr=[2])).set_target_isr([0, 2]).build()
    assert ch.after.elr == () and ch.after.last_known_elr == ()


def test_isr_below_min_isr_adds_removed_isr_members_to_elr():
    ch = builder(part([0, 1, 2], 0), min_isr=3).set_target_isr([0, 1]).build()
    assert ch.after.isr == (0, 1) and ch.after.elr == (2,)


def test_elr_retains_members_and_drops_those_back_in_isr():
    ch = builder(part([0], 0, elr=[1, 2]), min_isr=3).set_target_isr([0, 1]).build()
    assert ch.after.elr == (2,)


def test_no_elr_while_isr_shrinks_but_stays_at_min_isr():
    ch = builder(part([0, 1, 2], 0), min_isr=2).set_target_isr([0, 1]).build()
    assert ch.after.elr == ()


def test_only_members_of_the_isr_when_it_fell_below_min_join_the_elr():
    # 2 was out of the ISR before it fell below min ISR: it never joins the ELR
    ch = builder(part([0, 1], 0), min_isr=2).set_target_isr([0]).build()
    assert ch.after.elr == (1,)
    ch2 = builder(ch.after, min_isr=2).remove_from_isr(0).build()
    assert 2 not in ch2.after.elr


def test_elr_change_alone_does_not_bump_leader_epoch():
    p = part([0], 0, elr=[1, 2])
    ch = builder(p).mark_unclean_shutdown(2).build()
    assert ch.record.leader is None
    assert ch.after.leader_epoch == p.leader_epoch and ch.after.partition_epoch == p.partition_epoch + 1


def test_unclean_shutdown_removes_from_isr_and_elr_into_last_known_elr():
    ch = builder(part([0], 0, elr=[1, 2])).mark_unclean_shutdown(1).build()
    assert ch.after.elr == (2,) and ch.after.last_known_elr == (1,)
    ch2 = builder(part([0, 1], 0), min_isr=3).mark_unclean_shutdown(1).build()
    assert ch2.after.isr == (0,) and 1 not in ch2.after.elr and ch2.after.last_known_elr == (1,)


def test_effective_min_isr_is_capped_by_replication_factor():
    # min.insync.replicas=3 on a 2-replica partition behaves like 2 (seed 002)
    b = builder(part([0, 1], 0, replicas=(0, 1)), min_isr=3)
    assert b.effective_min_isr == 2
    assert b.set_target_isr([0, 1]).build() is None


def test_kip966_off_never_records_elr():
    ch = builder(part([0, 1, 2], 0), min_isr=3, elr=False).set_target_isr([0]).build()
    assert ch.after.elr == () and ch.after.last_known_elr == ()


def test_fencing_last_isr_member_with_elr_empties_isr_and_keeps_it_electable():
    ch = builder(part([2], 2, elr=[1]), alive=(0,)).remove_from_isr(2).build()
    assert ch.after.isr == () and ch.after.leader == NO_LEADER
    assert ch.after.elr == (1, 2)


def test_no_change_builds_no_record():
    assert builder(part([0, 1, 2], 0)).set_target_isr([0, 1, 2]).build() is None



def test_a_change_that_drops_a_replica_below_min_isr_keeps_it_out_of_the_elr():
    """The ELR holds replicas only (KIP-966): a broker the change takes off
    the replica list does not join it, though it was in the ISR. Kafka 4.4
    differs: PartitionChangeBuilder.maybePopulateTargetElr unions the ELR
    with the ISR from before the change and filters out only the target ISR
    and unclean shutdowns, never the brokers the new replica list dropped
    (kafka-metadata-4.4.0.jar, lines 533-563 by its line table; build() calls
    it after completeReassignmentIfNeeded, lines 427-451). Kafka answered
    DescribeTopicPartitions with ELR [3] beside replicas [1, 2, 4] after a
    reassignment and a decommission moved broker 3 off the partition (the
    reassign/decommission batch of the differential campaign, pair 3)."""
    p = part([1, 3], 1, replicas=(1, 2, 3))
    ch = builder(p, alive=(1, 2, 3)).set_target_replicas((1, 2)).set_target_isr([1]).build()
    assert ch.after.replicas == (1, 2) and ch.after.isr == (1,)
    assert ch.after.elr == ()  # Kafka's rule would make it [3]
