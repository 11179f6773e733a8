"""Plans of the membership faults read replicas as Metadata lists them:
a partition under a reassignment (KIP-455) lists its target and its leaving
replicas together, so a plan made from it would grow the partition. Those
partitions wait for their move to end."""

from nemesis.membership import settled_replicas


def test_a_partition_listing_more_replicas_than_the_replication_factor_is_moving_and_left_out():
    reps = {"t-0": ["n1", "n2", "n3"], "t-1": ["n2", "n3", "n4", "n1"], "t-2": ["n3", "n4", "n1"]}
    assert settled_replicas(reps) == {"t-0": ["n1", "n2", "n3"], "t-2": ["n3", "n4", "n1"]}


def test_no_partition_known_plans_nothing():
    assert settled_replicas({}) == {}
