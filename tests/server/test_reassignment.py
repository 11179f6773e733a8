"""AlterPartitionReassignments / ListPartitionReassignments (KIP-455) from a
real admin client against reference processes. confluent-kafka 2.16's
AdminClient has no call for either, so kafka-python's KafkaAdminClient
(which the db kafka nemesis uses too) speaks them: the broker forwards to
the active controller, the new replica catches up and joins the ISR, the
reassignment completes and every acks=all record written before it is still
read back. The glass-box monitor checks the traces on the way out."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.errors import NoReassignmentInProgressError
from kafka.structs import TopicPartition as KTP

from harness.dbs.admin import ReassignmentRefused, alter_partition_reassignment
from harness.dbs.parts import Membership, MetadataObserver, Topology
from reference_impl.server.launcher import LocalCluster
from tests.server.test_integration import FAST, create_topic, wait_for

pytestmark = pytest.mark.integration

#: the broker the first test moved every replica off
MOVED_OFF: list[int] = []


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """Four combined nodes, one of them also the only controller (shared:
    the second test unregisters the broker the first one moved off)."""
    c = LocalCluster.plan(str(tmp_path_factory.mktemp("cluster")), 4, 1, 0, combined=True, config=FAST)
    c.up(90)
    yield c
    c.down(40)
    from checkers.invariants import check_trace_dir

    summary = check_trace_dir(c.dir, min_isr=2)
    assert summary["valid"] is True, summary["violations"][:5]


def _replicas(c: LocalCluster, topic: str) -> tuple[int, list[int], list[int]]:
    p = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(topic, timeout=10).topics[topic].partitions[0]
    return p.leader, list(p.replicas), sorted(p.isrs)


def test_kip455_alter_partition_reassignments_from_kafka_python_moves_a_replica_and_keeps_acks_all_records(four):
    topic = "moved"
    create_topic(four, topic, rf=3, min_isr=2)
    p = Producer({"bootstrap.servers": four.bootstrap, "acks": "all", "linger.ms": 0})
    acked: list[bytes] = []
    for i in range(200):
        p.produce(topic, str(i).encode(), on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    p.flush(30)
    assert len(acked) == 200

    admin = KafkaAdminClient(bootstrap_servers=four.bootstrap, request_timeout_ms=20_000)
    try:
        leader, before, _isr = _replicas(four, topic)
        spare = next(b for b in (1, 2, 3, 4) if b not in before)
        # move the leader's replica to the spare broker: the leadership moves too
        target = [spare if r == leader else r for r in before]
        with pytest.raises(NoReassignmentInProgressError):
            # cancelling with none in progress is refused (per partition in
            # kafka-python's answer dict, so raise it here to see it)
            res = admin.alter_partition_reassignments({KTP(topic, 0): None})
            raise res[KTP(topic, 0)]()
        assert admin.alter_partition_reassignments({KTP(topic, 0): target}) == {KTP(topic, 0): None}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not admin.list_partition_reassignments([KTP(topic, 0)]) and _replicas(four, topic)[1] == target:
                break
            time.sleep(0.2)
        new_leader, after, isr = _replicas(four, topic)
        assert after == target and isr == sorted(target) and new_leader != leader and new_leader in target
        MOVED_OFF.append(leader)
    finally:
        admin.close()

    for i in range(200, 300):
        p.produce(topic, str(i).encode(), on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    p.flush(30)
    c = Consumer({"bootstrap.servers": four.bootstrap, "group.id": "r", "enable.auto.commit": False})
    c.assign([CTP(topic, 0, 0)])
    seen: set[bytes] = set()
    wait_for(lambda: seen.update(m.value() for m in c.consume(500, 0.5) if m.error() is None) or len(seen) >= 300,
             30, "every acknowledged record read back")
    c.close()
    assert set(acked) <= seen and len(acked) == 300


def test_kip631_unregister_broker_over_the_wire_forgets_a_broker_which_registers_again_as_new(four):
    """UnregisterBroker (api key 64 v0, framed by harness.dbs.admin: no Python
    client sends it) through a broker to the controller: an unknown id is
    refused with BROKER_ID_NOT_REGISTERED; the broker moved off by the
    first test is forgotten, and, still running, registers again as new."""
    from harness.dbs.admin import UnregisterRefused, unregister_broker

    with pytest.raises(UnregisterRefused, match="error 102 Broker ID 9 is not currently registered"):
        unregister_broker(four.bootstrap, 9)
    (b,) = MOVED_OFF or [1]
    unregister_broker(four.bootstrap, b)
    wait_for(lambda: _unregistered(four, b), 10, "the controller replayed the UnregisterBrokerRecord")
    # registered again as new: unfenced under a later epoch in the metadata
    # log (a broker's Metadata answer alone may come from an image that has
    # not yet replayed the unregistration, and the next test moves a
    # replica onto this broker, which the controller refuses unless it is)
    gone = max(e["broker_epoch"] for e in _events(four, "broker_unregistered") if e["broker"] == b)
    wait_for(lambda: any(e["broker"] == b and e["broker_epoch"] > gone for e in _events(four, "broker_unfenced")),
             20, "the running broker registered again and was unfenced")
    wait_for(lambda: b in AdminClient({"bootstrap.servers": four.bootstrap}).list_topics(timeout=5).brokers, 20,
             "the running broker listed again")


def _events(c: LocalCluster, kind: str) -> list[dict]:
    """The nodes' trace events of ``kind`` so far (a line a node is still
    writing is left for the next look)."""
    out = []
    for trace in Path(c.dir).rglob("trace.jsonl"):
        for line in trace.open():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("kind") == kind:
                out.append(e)
    return out


def _unregistered(c: LocalCluster, broker: int) -> bool:
    return any(e["broker"] == broker for e in _events(c, "broker_unregistered"))


def test_the_membership_faults_reassignment_asks_the_next_broker_when_one_refuses_the_connection(four):
    """The nemesis's own request (``harness.dbs.admin``), as the simulator's
    admin endpoint sends it: a broker that is down (nothing listens on port
    1) is passed over, the next one forwards it, the move completes."""
    topic = "via-next"
    create_topic(four, topic, rf=3, min_isr=2)
    _, before, _ = _replicas(four, topic)
    spare = next(b for b in (1, 2, 3, 4) if b not in before)
    target = [spare if r == before[-1] else r for r in before]
    alter_partition_reassignment("127.0.0.1:1," + four.bootstrap, f"{topic}-0", target)
    wait_for(lambda: _replicas(four, topic)[1] == target, 30, "the move")
    with pytest.raises(ReassignmentRefused, match="no broker got it to the controller"):
        alter_partition_reassignment("127.0.0.1:1", f"{topic}-0", before)


class _Asks(Membership):
    def __init__(self, topo: Topology, bootstrap: str) -> None:
        self.topo, self.bootstrap = topo, lambda: bootstrap


def test_a_reassignment_the_harness_asks_makes_the_observers_cached_replicas_stale(four):
    """The observer keeps one Metadata answer for a while (``FRESH_S``; a
    minute here, so only the rule can end it): a move the harness asks and
    the controller takes makes the next look ask again. Kept, a replayed
    schedule's move 0.36 s after a decommission's on Kafka read the
    replicas from before the decommission and was played on them."""
    topic = "observed-move"
    create_topic(four, topic, rf=3, min_isr=2)
    topo = Topology.of((f"n{i}", i, ("broker",)) for i in (1, 2, 3, 4))
    obs = MetadataObserver(topo, lambda: four.bootstrap, [f"{topic}-0"])
    obs.FRESH_S = 60.0
    asks = _Asks(topo, four.bootstrap)
    asks.on_move(obs.forget)
    before = obs.replicas_of(f"{topic}-0")
    spare = next(f"n{b}" for b in (1, 2, 3, 4) if f"n{b}" not in before)
    target = [spare if r == before[-1] else r for r in before]
    asks.reassign(f"{topic}-0", target)
    wait_for(lambda: f"{topic}-0" in getattr(asks, "reassigned", {}), 15, "the controller's answer")
    assert asks.reassigned[f"{topic}-0"] is None
    ids = [topo.id_of(n) for n in target]
    wait_for(lambda: _replicas(four, topic)[1][:3] == ids, 15, "the brokers' metadata listing the move")
    time.sleep(0.5)  # every broker's metadata, not only the one that answered
    assert obs.replicas_of(f"{topic}-0")[:3] == target
