"""The order in which the active controller fences brokers whose sessions
expire together: Kafka 4.4's, one broker per pass of its fencing task, 10 ms
apart, in the iteration order of ``BrokerHeartbeatTracker``'s
``ConcurrentHashMap<BrokerIdAndEpoch, Long>`` (``BrokerHeartbeatTracker.java:111-117``,
``ReplicationControlManager.java:1769-1795``, ``PeriodicTask``'s 10 ms
immediate period; kafka-metadata 4.4.0 by the jar's line tables). The
expected orders below were also read off the 4.4.0 jars' own classes
(``BrokerHeartbeatTracker``, ``ConcurrentHashMap``, ``TimelineHashMap``)."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.controller.fencing_task import IMMEDIATE_PERIOD_MS
from reference_impl.core.controller.heartbeat_tracker import (
    BrokerHeartbeatTracker,
    broker_id_and_epoch_hash,
    chm_spread,
    kafka_expiry_order,
    timeline_hash_map_order,
)
from reference_impl.core.messages import NO_LEADER, BrokerHeartbeatRequest, Errors, TopicPartition

from .test_controller import MIN2, Cluster

CFG = ProtocolConfig()
TP = TopicPartition("t", 0)


# ---------------------------------------------------------------------------
# the hash order (pure)
# ---------------------------------------------------------------------------


def test_broker_id_and_epoch_hash_is_the_java_records_31_id_plus_long_hash_of_epoch():
    """A record's hashCode: ``31 * id + Long.hashCode(epoch)`` in int arithmetic."""
    assert [broker_id_and_epoch_hash(b, e) for b, e in ((1, 17), (2, 15), (3, 10))] == [48, 77, 103]
    # Long.hashCode folds the high word in; int overflow wraps
    assert broker_id_and_epoch_hash(0, 1 << 32) == 1
    assert broker_id_and_epoch_hash(70_000_000, 0) == -2124967296
    assert chm_spread(0x12345) == 0x12344  # h ^ (h >>> 16)


def test_pair_64s_brokers_1_2_3_at_epochs_17_15_10_are_fenced_1_3_2_by_the_trackers_hash_order():
    """Pair 64 (docs/analysis-kafka-4.4.md): hashes 48, 77, 103 fall in bins
    0, 13 and 7 of 16, so Kafka fenced 1, 3, 2, whatever the insertion order."""
    pairs = [(1, 17), (2, 15), (3, 10)]
    assert kafka_expiry_order(pairs) == [(1, 17), (3, 10), (2, 15)]
    assert kafka_expiry_order(reversed(pairs)) == [(1, 17), (3, 10), (2, 15)]


def test_pair_82s_broker_1_at_epoch_10_is_fenced_before_broker_3_at_epoch_14():
    """Pair 82: hashes 41 and 107, bins 9 and 11."""
    assert kafka_expiry_order([(3, 14), (1, 10)]) == [(1, 10), (3, 14)]


def test_sessions_sharing_a_bin_are_fenced_in_the_order_they_joined_the_map():
    """(1, 17) and (2, 2) both hash into bin 0 (48 and 64): a
    ConcurrentHashMap bin is a list in insertion order, and a put of a key
    already present (a later heartbeat) keeps its place."""
    assert kafka_expiry_order([(1, 17), (2, 2)]) == [(1, 17), (2, 2)]
    assert kafka_expiry_order([(2, 2), (1, 17)]) == [(2, 2), (1, 17)]
    t = BrokerHeartbeatTracker()
    t.touch((2, 2), 100)
    t.touch((1, 17), 100)
    t.touch((2, 2), 100)  # heartbeats again: still first in its bin
    assert t.remove_expired(100) == (2, 2)
    assert t.remove_expired(100) == (1, 17)
    assert t.remove_expired(100) is None


def test_the_twelfth_key_doubles_the_map_and_its_bins_split_as_concurrent_hash_map_transfer_does():
    """At 12 keys (0.75 of 16) the table becomes 32 bins; ``transfer`` keeps
    the last run of each bin in order and pushes the nodes before it, so the
    split bins can come out reversed (the order read off Java 17's map)."""
    bin0 = [(0, 16 * i) for i in range(6)]  # hashes 0, 16, ..., 80: bin 0 of 16
    bin1 = [(0, 16 * i + 1) for i in range(6)]  # hashes 1, 17, ..., 81: bin 1
    keys = [k for two in zip(bin0, bin1) for k in two]  # put alternately
    assert kafka_expiry_order(keys[:11]) == bin0 + bin1[:5]  # 16 bins, each in insertion order
    assert kafka_expiry_order(keys) == [
        (0, 64), (0, 32), (0, 0),  # bin 0 (bit 16 clear)
        (0, 65), (0, 33), (0, 1),  # bin 1
        (0, 48), (0, 16), (0, 80),  # bin 16
        (0, 49), (0, 17), (0, 81),  # bin 17
    ]


def test_activation_inserts_brokers_in_the_timeline_hash_maps_order():
    """``ClusterControlManager.activate`` walks ``brokerRegistrations``, a
    TimelineHashMap (Fibonacci hashing, each slot's entries last first): the
    orders read off kafka-server-common 4.4.0's own map."""
    assert timeline_hash_map_order([1, 2, 3]) == [2, 1, 3]
    assert timeline_hash_map_order([0, 1, 2, 3, 4]) == [2, 0, 4, 1, 3]


# ---------------------------------------------------------------------------
# the controller
# ---------------------------------------------------------------------------


def _together(c: Cluster, brokers) -> None:
    """Heartbeats of ``brokers`` handled at one instant: one contact time."""
    for b in brokers:
        c.loop.deliver(c.active_id(), BrokerHeartbeatRequest(b, c.epochs[b], c.active.image.offset), b)


def _fences(c: Cluster, since: int):
    return [(t, ev.data["broker"]) for t, _n, ev in c.loop.traces[since:] if ev.kind == "broker_fenced"]


def test_three_sessions_expiring_together_are_fenced_in_kafkas_order_10_ms_apart_and_the_last_stays_last_known_elr():
    """Brokers 0, 1, 2 (ISR of t-0, min ISR 2, ELR on) go silent after one
    shared contact: Kafka's fencing task takes one expired session per pass,
    the first in its map's order, and runs again 10 ms later; the broker
    fenced last is the ISR's last member, kept as the last known ELR member
    that KIP-966 may elect after every replica shut down uncleanly."""
    c = Cluster()
    # epochs 1, 3, 2 for brokers 0, 1, 2: hashes 1, 34, 64, bins 1, 2, 0: fenced 2, 0, 1
    c.start_brokers(0, 2, 1)
    assert c.create("t", configs=MIN2, assignments=((0, 1, 2),)).error == Errors.NONE
    order = [b for b, _e in kafka_expiry_order((b, c.epochs[b]) for b in (0, 1, 2))]
    assert order != sorted(order), (c.epochs, order)  # a case the old broker-id order gets wrong
    n = len(c.loop.traces)
    _together(c, (0, 1, 2))
    c.loop.run_for(CFG.broker_session_timeout_ms + 1000)
    fences = _fences(c, n)
    assert [b for _t, b in fences] == order
    assert [t2 - t1 for (t1, _), (t2, _) in zip(fences, fences[1:])] == [IMMEDIATE_PERIOD_MS] * 2
    p = c.part()
    assert p.isr == () and p.leader == NO_LEADER and p.last_known_leader == order[-1]
    assert set(p.elr) == set(order[1:])
    # every replica restarts after an unclean shutdown: only the one fenced
    # last may lead (PartitionChangeBuilder.canElectLastKnownLeader), once back
    for b in order:
        c.register(b, previous=-1)
    for b in order[:-1]:
        c.heartbeat(b)
        assert c.part().leader == NO_LEADER
    c.heartbeat(order[-1])
    assert c.part().leader == order[-1]


def test_a_session_of_an_earlier_epoch_expires_without_fencing_the_brokers_new_incarnation():
    """Kafka's tracker keeps a restarted broker's old (id, epoch) entry until
    it expires (nothing removes it on re-registration); the pass that takes
    it only drops it ("Removing heartbeat tracker entry for broker ... at
    previous epoch", ReplicationControlManager.java:1782-1786), and the new
    incarnation, heartbeating under its new epoch, stays unfenced."""
    c = Cluster()
    c.start_brokers(0, 1, 2)
    tracker = c.active.cluster.sessions
    old = (0, c.epochs[0])
    assert c.heartbeat(0, want_fence=True).is_fenced
    c.register(0)  # fenced, so no session to wait for: a new epoch at once
    c.heartbeat(0)
    new = (0, c.epochs[0])
    assert new != old and {old, new} <= set(tracker.deadlines)
    n = len(c.loop.traces)
    c.keep_alive(CFG.broker_session_timeout_ms + 1000, alive=(0, 1, 2))
    assert old not in tracker.deadlines and new in tracker.deadlines
    assert _fences(c, n) == [] and not c.active.image.brokers[0].fenced
