"""Consumer groups on the reference cluster with real clients: a
confluent-kafka (librdkafka) consumer group under the classic protocol, and
kcat's balanced consumer (``kcat -G``).

Rules exercised (Kafka's classic group protocol, core/groups/group.py):
a group's partitions are split among its members and re-split when a member
joins or leaves or its session times out; an offset commit is durable once
acknowledged and a new member resumes from it, also after the broker that
coordinated the group is killed (the offsets live on ``__consumer_offsets``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reference_impl.server.launcher import LocalCluster
from tests.needs import need_program

pytestmark = pytest.mark.integration

CONFIG = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
}
TOPIC = "orders"
PARTITIONS = 4
RECORDS = 40


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster.plan(str(tmp_path_factory.mktemp("groups")), 3, 3, 0, config=CONFIG)
    c.up(90)
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
            f.result(60)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        for i in range(RECORDS):
            p.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
        assert p.flush(60) == 0
        yield c
    finally:
        c.down(40)


def consumer(c: LocalCluster, group: str, **extra) -> Consumer:
    conf = {"bootstrap.servers": c.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    conf.update(extra)
    return Consumer(conf)


def poll_until(consumers: list[Consumer], done, timeout: float = 60.0) -> list:
    """Poll every consumer until ``done()``; the messages seen."""
    seen = []
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not reached"
        for k in consumers:
            m = k.poll(0.2)
            if m is not None and not m.error():
                seen.append(m)
    return seen


def read(k: Consumer, n: int, timeout: float = 60.0) -> list:
    """At least ``n`` messages polled by ``k``."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} messages read"
        m = k.poll(0.2)
        if m is not None and not m.error():
            got.append(m)
    return got


def parts(k: Consumer) -> set[int]:
    return {tp.partition for tp in k.assignment()}


def test_a_group_splits_partitions_and_rebalances_on_join_and_leave(cluster):
    a = consumer(cluster, "split")
    a.subscribe([TOPIC])
    poll_until([a], lambda: len(parts(a)) == PARTITIONS)
    b = consumer(cluster, "split")
    b.subscribe([TOPIC])
    # the join of b rebalances: each member gets a share, together all of them
    poll_until([a, b], lambda: parts(a) and parts(b) and parts(a) | parts(b) == set(range(PARTITIONS)))
    assert not parts(a) & parts(b)
    b.close()  # LeaveGroup: a takes every partition back without waiting for b's session
    poll_until([a], lambda: len(parts(a)) == PARTITIONS)
    a.close()


def test_committed_offsets_are_read_back_by_a_new_member(cluster):
    a = consumer(cluster, "resume")
    a.subscribe([TOPIC])
    got = read(a, RECORDS // 2)
    a.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in a.committed([TopicPartition(TOPIC, i) for i in range(PARTITIONS)], 10)}
    a.close()
    b = consumer(cluster, "resume")
    b.subscribe([TOPIC])
    rest = read(b, RECORDS - len(got))
    firsts = {}
    for m in rest:
        firsts.setdefault(m.partition(), m.offset())
    # b starts each partition where a's commit said, so nothing is read twice
    for p, first in firsts.items():
        assert first == max(committed[p], 0)
    assert sorted(int(m.value()) for m in got + rest) == list(range(RECORDS))
    b.close()


MEMBER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    k = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})
    k.subscribe([sys.argv[3]])
    while True:
        k.poll(0.2)
        if k.assignment():
            print("assigned", flush=True)
""")


def test_a_member_silent_for_its_session_timeout_is_removed(cluster):
    a = consumer(cluster, "silent")
    a.subscribe([TOPIC])
    poll_until([a], lambda: len(parts(a)) == PARTITIONS)
    proc = subprocess.Popen([sys.executable, "-c", MEMBER, cluster.bootstrap, "silent", TOPIC],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        poll_until([a], lambda: 0 < len(parts(a)) < PARTITIONS)
        proc.send_signal(signal.SIGKILL)  # no LeaveGroup: only its session timeout tells the coordinator
        proc.wait(10)
        poll_until([a], lambda: len(parts(a)) == PARTITIONS)
    finally:
        proc.kill()
        proc.wait()
        a.close()


def offsets_leader(c: LocalCluster) -> int:
    md = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics("__consumer_offsets", timeout=10)
    return {p.id: p.leader for p in md.topics["__consumer_offsets"].partitions.values()}


def test_committed_offsets_survive_the_coordinators_death(cluster):
    a = consumer(cluster, "survivor")
    a.assign([TopicPartition(TOPIC, i, 3) for i in range(PARTITIONS)])
    a.commit(offsets=[TopicPartition(TOPIC, i, 3 + i) for i in range(PARTITIONS)], asynchronous=False)
    a.close()
    from reference_impl.core.groups.offsets_log import partition_for

    leader = offsets_leader(cluster)[partition_for("survivor", 3)]
    cluster.kill(leader)
    try:
        b = consumer(cluster, "survivor")
        want = [TopicPartition(TOPIC, i) for i in range(PARTITIONS)]
        deadline = time.monotonic() + 60
        while True:
            try:
                got = {tp.partition: tp.offset for tp in b.committed(want, 10)}
                break
            except Exception:
                assert time.monotonic() < deadline
        assert got == {i: 3 + i for i in range(PARTITIONS)}
        b.close()
    finally:
        cluster.start_node(leader)
        cluster.wait_ready(60, [leader])


def test_kcat_balanced_consumer_reads_and_commits(cluster):
    kcat = need_program("kcat")
    out = subprocess.run([kcat, "-b", cluster.bootstrap, "-G", "kcat", "-c", str(RECORDS), "-f", "%p %o\\n",
                          "-X", "auto.offset.reset=earliest", TOPIC], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert len(lines) == 2 * RECORDS
    k = consumer(cluster, "kcat")
    got = {tp.partition: tp.offset for tp in k.committed([TopicPartition(TOPIC, i) for i in range(PARTITIONS)], 10)}
    k.close()
    # kcat commits what it consumed when it leaves the group
    assert got == {i: RECORDS // PARTITIONS for i in range(PARTITIONS)}


def static_member(c: LocalCluster, group: str, instance: str, events: list | None = None) -> Consumer:
    """A subscribed consumer with ``group.instance.id`` (KIP-345); its
    rebalance callbacks append to ``events``."""
    k = consumer(c, group, **{"group.instance.id": instance})
    log = events if events is not None else []
    k.subscribe([TOPIC], on_assign=lambda _c, tps: log.append(("assign", sorted(tp.partition for tp in tps))),
                on_revoke=lambda _c, tps: log.append(("revoke", sorted(tp.partition for tp in tps))))
    return k


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(cluster):
    """KIP-345: b restarts (a static member's close sends no LeaveGroup) and
    rejoins with its instance id within its session: it gets the same
    partitions and a sees no rebalance at all."""
    a_events: list = []
    a = static_member(cluster, "static", "ia", a_events)
    poll_until([a], lambda: len(parts(a)) == PARTITIONS)
    b = static_member(cluster, "static", "ib")
    poll_until([a, b], lambda: parts(a) and parts(b) and parts(a) | parts(b) == set(range(PARTITIONS)))
    mine = parts(b)
    a_settled = len(a_events)
    b.close()
    b2 = static_member(cluster, "static", "ib")
    poll_until([a, b2], lambda: parts(b2) == mine)
    end = time.monotonic() + 2  # a keeps polling: still no rebalance reaches it
    poll_until([a, b2], lambda: time.monotonic() > end)
    assert a_events[a_settled:] == [] and parts(a) | mine == set(range(PARTITIONS))
    b2.close()
    # b2 does not come back: its session ends and a takes everything
    poll_until([a], lambda: len(parts(a)) == PARTITIONS, timeout=30)
    a.close()


def test_a_second_consumer_with_the_same_instance_id_fences_the_first(cluster):
    """The newer member takes the instance's place; the older one's next
    request is answered FENCED_INSTANCE_ID, a fatal error to librdkafka."""
    from confluent_kafka import KafkaError

    old = static_member(cluster, "fence", "i1")
    poll_until([old], lambda: len(parts(old)) == PARTITIONS)
    new = static_member(cluster, "fence", "i1")
    poll_until([new], lambda: len(parts(new)) == PARTITIONS)
    errors: list = []
    deadline = time.monotonic() + 30
    while not errors:
        assert time.monotonic() < deadline, "the old member was never fenced"
        m = old.poll(0.2)
        if m is not None and m.error() is not None:
            errors.append(m.error())
        new.poll(0)
    e = errors[0]
    # librdkafka raises the broker's FENCED_INSTANCE_ID as its fatal consumer error
    assert e.code() in (KafkaError._FATAL, KafkaError.FENCED_INSTANCE_ID), e
    assert "fenced by other consumer with same group.instance.id" in e.str(), e
    new.close()
    old.close()
