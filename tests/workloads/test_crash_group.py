"""A crashed client leaves its consumer group as a killed process does, and
so does a subscribed client that turns to assigning (the final reads' ``assign``
op): it sends no LeaveGroup, so the group keeps the member, and the partitions it
held, until the member's session times out (the subscribe mode's
``session.timeout.ms``, 6 s). A clean close would hand them over at once.

(A closing subscribed consumer runs its revocation through confluent-kafka's
rebalance callback, which waits on librdkafka holding the GIL; with every
broker killed that froze the harness, so a crash never closes; nor does the
switch to assigning, which once froze a run under broker kills and client
crashes the same way.)
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from reference_impl.server.launcher import LocalCluster
from workloads.queue import QueueClient

pytestmark = pytest.mark.integration

GROUP = "crash-group"


@pytest.fixture
def cluster(tmp_path):
    # one broker: the offsets topic must fit on it
    c = LocalCluster.plan(str(tmp_path / "cluster"), 1, 1, 0, config={
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0"})
    c.up(90)
    yield c
    c.down(40)


def poll_until(consumers: list[Consumer], done, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        for c in consumers:
            c.poll(0.1)


def _crash(a: QueueClient) -> None:
    a.crash()
    assert a.consumer is None


def _assign(a: QueueClient) -> None:
    old = a.consumer
    assert a.invoke({"f": "assign", "value": [], "final": True})["type"] == "ok"
    assert a.sub_via == "assign" and a.consumer is not None and a.consumer is not old


@pytest.mark.parametrize("leave", [_crash, _assign], ids=["crash", "assign"])
def test_a_crashed_or_reassigning_subscriber_keeps_its_partitions_until_its_session_times_out(cluster, leave):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic("g", 2, 1)]).values():
        f.result(60)
    a = QueueClient(cluster.bootstrap, ["g-0", "g-1"], "all", 0, 5.0, sub_via="subscribe", group_id=GROUP)
    a.open()
    b = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    b.subscribe(["g"])
    try:
        assert a.consumer is not None
        poll_until([a.consumer, b], lambda: len(a.consumer.assignment()) == 1 and len(b.assignment()) == 1, 60,
                   "the two members never shared the partitions")
        leave(a)
        quiet_until = time.monotonic() + 2
        while time.monotonic() < quiet_until:
            b.poll(0.1)
        assert len(b.assignment()) == 1, "the member left its group (a clean close, not a killed process's going)"
        poll_until([b], lambda: len(b.assignment()) == 2, 60, "the member's session never expired")
    finally:
        b.close()
        a.close()
