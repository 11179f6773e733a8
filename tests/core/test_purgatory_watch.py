"""The fetch purgatory's watch sets (Kafka 4.4's DelayedOperationPurgatory
keeps a watch list per key; here a set of parked fetch ids per partition):
an emptied set stays, cleared, for the partition's next parked fetch, and
must then hand out its ids in the order a new set would (the order parked
fetches are answered in, so the order of their answers on the network)."""

from __future__ import annotations

from reference_impl.core.broker_context import BrokerContext
from reference_impl.core.messages import ClientFetchRequest, FetchPartitionRequest, TopicPartition
from reference_impl.core.metadata import MetadataImage
from reference_impl.core.purgatory import FROM_CONSUMER, FetchPurgatory

TP = TopicPartition("t", 0)


def park(purgatory: FetchPurgatory, n: int, deadline: int) -> None:
    for _ in range(n):
        reqs = (FetchPartitionRequest(TP, 0),)
        purgatory.park(FROM_CONSUMER, ClientFetchRequest(("c", 1), reqs), None, deadline, reqs)


def test_an_emptied_watch_set_kept_for_the_next_fetches_iterates_as_a_new_one():
    purgatory = FetchPurgatory({}, MetadataImage(), BrokerContext(1))
    park(purgatory, 20, deadline=10)  # ids 1..20: the set grows past its small table
    assert len(purgatory.expire(10, 10)) == 20 and len(purgatory.watch[TP]) == 0
    park(purgatory, 4, deadline=30)  # ids 21..24
    assert list(purgatory.watch[TP]) == list({21, 22, 23, 24})
    assert [r.partitions[0].tp for r in (e.msg for e in purgatory.expire(30, 30))] == [TP] * 4
