"""Real clients against a local cluster of node processes (3 brokers + 3
controllers): confluent-kafka (librdkafka), kafka-python and kcat.

Rules exercised: acks=all acknowledges only what every ISR member has
(seed 001: HW = min LEO over the ISR); min.insync.replicas rejects acks=all
with NOT_ENOUGH_REPLICAS when the ISR is too small; leader failover keeps
acknowledged writes; SIGTERM writes the clean-shutdown marker and SIGKILL
makes the restart unclean (KIP-966), after which the broker recovers its log
and rejoins the ISR.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reference_impl.server.launcher import LocalCluster, metadata_brokers
from tests.needs import need_program

pytestmark = pytest.mark.integration

#: fast failure detection so the suite stays short
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
}


def _checked_cluster(dir: str, min_steps: int = 100):
    """A 3-broker, 3-controller cluster; on the way out every node shuts down
    cleanly and the glass-box monitor checks the run's traces (HW, ISR,
    epochs, truncation), having seen at least ``min_steps`` of them."""
    c = LocalCluster.plan(dir, 3, 3, 0, config=FAST)
    c.up(90)
    yield c
    res = c.down(40)
    assert all(res.values()), f"controlled shutdown timed out for {res}"
    from checkers.invariants import check_trace_dir

    summary = check_trace_dir(c.dir, min_isr=2)
    assert summary["valid"] is True, summary["violations"][:5]
    assert summary["steps"] > min_steps


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Shared by the tests that leave every node running."""
    yield from _checked_cluster(str(tmp_path_factory.mktemp("cluster")))


@pytest.fixture
def own_cluster(tmp_path):
    """A cluster of its own, for a test that kills, stops or restarts nodes,
    so no other test inherits the state it leaves (one test: fewer trace
    events than the shared cluster's many)."""
    yield from _checked_cluster(str(tmp_path / "cluster"), min_steps=20)


def create_topic(c: LocalCluster, name: str, rf: int = 3, min_isr: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    for f in admin.create_topics([NewTopic(name, 1, rf, config={"min.insync.replicas": str(min_isr)})]).values():
        f.result(60)
    wait_for(lambda: partition_state(c, name)[0] >= 0, 30, f"{name} has a leader")


def partition_state(c: LocalCluster, topic: str) -> tuple[int, list[int]]:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    md = admin.list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return -1, []
    p = t.partitions[0]
    return p.leader, sorted(p.isrs)


def wait_for(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting until {what}")


def produce(bootstrap: str, topic: str, values: list[bytes], **conf) -> list[tuple[object, int]]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    out: list = [None] * len(values)

    for i, v in enumerate(values):
        def cb(err, msg, i=i):
            out[i] = (err, msg.offset() if err is None else -1)
        while True:
            try:
                p.produce(topic, v, partition=0, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return out


def read_all(bootstrap: str, topic: str, upto: int | None = None, timeout: float = 60) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                  "auto.offset.reset": "error"})
    c.assign([TopicPartition(topic, 0, 0)])
    if upto is None:
        _, upto = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while (not got or got[-1][0] < upto - 1) and time.monotonic() < deadline:
        for m in c.consume(5000, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error {m.error()}")
            got.append((m.offset(), m.value()))
    c.close()
    return got


def assert_contiguous(got: list[tuple[int, bytes]]) -> None:
    offsets = [o for o, _ in got]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "offsets are not contiguous"


@pytest.mark.parametrize("acks", ["all", "1"])
def test_10k_messages_read_back_with_assign_same_values_contiguous_offsets(cluster, acks):
    topic = f"bulk-{acks}"
    create_topic(cluster, topic)
    values = [f"{acks}-{i}".encode() for i in range(10_000)]
    res = produce(cluster.bootstrap, topic, values, acks=acks)
    assert all(err is None for err, _ in res)
    got = read_all(cluster.bootstrap, topic, upto=10_000)
    assert_contiguous(got)
    assert [v for _, v in got] == values
    assert [o for _, o in res] == list(range(10_000))


def test_idempotent_producer_writes_each_message_once(cluster):
    create_topic(cluster, "idem")
    values = [b"idem-%d" % i for i in range(5_000)]
    res = produce(cluster.bootstrap, "idem", values, acks="all", **{"enable.idempotence": True})
    assert all(err is None for err, _ in res)
    got = read_all(cluster.bootstrap, "idem", upto=5_000)
    assert [v for _, v in got] == values


def test_a_transactional_producer_is_refused_at_once_as_kafka_refuses_a_transactional_id_it_denies(cluster):
    """The reference models replication, not transactions: a transactional
    InitProducerId is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53),
    the answer Kafka's KafkaApis.handleInitProducerIdRequest gives, before
    its transaction coordinator is asked, to a transactional id it will not
    serve; its FindCoordinator for a transaction key answers the same, as
    Kafka's KafkaApis.getCoordinator does (an unavailable coordinator would
    be retried until the client's timeout). librdkafka takes it as fatal, so
    the client learns at once and for good, while the idempotent
    InitProducerId beside it works."""
    from confluent_kafka import KafkaException

    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "refused", "log_level": 0})
    t0 = time.monotonic()
    with pytest.raises(KafkaException) as e:
        p.init_transactions(30)
    err = e.value.args[0]
    assert err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, err
    assert err.fatal() and time.monotonic() - t0 < 20
    create_topic(cluster, "not-txn")
    res = produce(cluster.bootstrap, "not-txn", [b"idempotent"], acks="all", **{"enable.idempotence": True})
    assert res == [(None, 0)]


def test_leader_sigkill_failover_keeps_acked_writes_then_unclean_restart_rejoins_isr(own_cluster):
    topic = "failover"
    create_topic(own_cluster, topic)
    leader, isr = partition_state(own_cluster, topic)
    assert isr == sorted(b.node_id for b in own_cluster.brokers)
    acked: dict[bytes, int] = {}
    stop = threading.Event()
    errors: list = []

    def writer():
        p = Producer({"bootstrap.servers": own_cluster.bootstrap, "acks": "all", "linger.ms": 2,
                      "message.timeout.ms": 60000, "enable.idempotence": True})
        i = 0
        while not stop.is_set():
            v = b"fo-%d" % i
            i += 1

            def cb(err, msg, v=v):
                if err is None:
                    acked[v] = msg.offset()
                else:
                    errors.append(err)
            try:
                p.produce(topic, v, partition=0, on_delivery=cb)
            except BufferError:
                pass
            p.poll(0.0005 if i % 50 else 0.005)
        p.flush(90)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    wait_for(lambda: len(acked) > 2000, 30, "2000 acks before the kill")
    own_cluster.kill(leader)
    n_at_kill = len(acked)
    wait_for(lambda: partition_state(own_cluster, topic)[0] not in (-1, leader), 30, "a new leader")
    wait_for(lambda: len(acked) > n_at_kill + 2000, 60, "producers continue after failover")
    own_cluster.start_node(leader)
    own_cluster.wait_ready(60, [leader])
    st = own_cluster.control(leader, "GET", "/status")
    assert st["clean_start"] is False  # SIGKILL => unclean restart (KIP-966)
    assert any(r["log"] == f"{topic}-0" and not r["clean"] for r in st["recovery"])
    wait_for(lambda: leader in partition_state(own_cluster, topic)[1], 60, "the restarted broker rejoins the ISR")
    stop.set()
    t.join(120)
    got = read_all(own_cluster.bootstrap, topic)
    assert_contiguous(got)
    by_value = {v: o for o, v in got}
    lost = [v for v in acked if v not in by_value]
    assert not lost, f"{len(lost)} acks=all acknowledged messages lost"
    assert all(by_value[v] == o for v, o in acked.items()), "an acked offset holds another value"


def test_isr_below_min_isr_fails_acks_all_with_not_enough_replicas_while_acks1_succeeds(own_cluster):
    topic = "minisr"
    create_topic(own_cluster, topic)
    leader, isr = partition_state(own_cluster, topic)
    followers = [b for b in isr if b != leader]
    for f in followers:
        own_cluster.kill(f)
    wait_for(lambda: partition_state(own_cluster, topic)[1] == [leader], 30, "the ISR shrinks to the leader")
    res = produce(own_cluster.bootstrap, topic, [b"must-fail"], acks="all", retries=0, **{"message.timeout.ms": 20000})
    assert res[0][0] is not None and res[0][0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    res = produce(own_cluster.bootstrap, topic, [b"acks1-ok"], acks="1")
    assert res[0][0] is None
    for f in followers:
        own_cluster.start_node(f)
    own_cluster.wait_ready(60, followers)
    wait_for(lambda: partition_state(own_cluster, topic)[1] == sorted(isr), 60, "the ISR expands back")
    res = produce(own_cluster.bootstrap, topic, [b"after"], acks="all")
    assert res[0][0] is None


def test_sigterm_writes_clean_shutdown_marker_and_restart_is_clean(own_cluster):
    b = own_cluster.brokers[-1]
    assert own_cluster.stop_node(b.node_id, 40), "controlled shutdown did not finish"
    marker = os.path.join(b.data_dir, "clean-shutdown")
    with open(marker) as f:
        content = f.read()
    assert '"brokerEpoch"' in content
    own_cluster.start_node(b.node_id)
    own_cluster.wait_ready(60, [b.node_id])
    assert own_cluster.control(b.node_id, "GET", "/status")["clean_start"] is True
    assert not os.path.exists(marker)  # removed at start: a crash from now on is unclean


def test_kafka_python_producer_and_consumer(cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    create_topic(cluster, "kpy")
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    futs = [p.send("kpy", value=b"k%d" % i, partition=0) for i in range(500)]
    p.flush(60)
    offsets = [f.get(30).offset for f in futs]
    p.close()
    assert offsets == list(range(500))
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=30000)
    c.assign([KTP("kpy", 0)])
    c.seek(KTP("kpy", 0), 0)
    got = []
    for r in c:  # up to what was sent, then the log end says nothing follows
        got.append((r.offset, r.value))
        if len(got) == len(offsets):
            break
    end = c.end_offsets([KTP("kpy", 0)])[KTP("kpy", 0)]
    c.close()
    assert end == 500
    assert got == [(i, b"k%d" % i) for i in range(500)]


def test_kcat_produce_consume_and_metadata_listing(cluster):
    need_program("kcat", "kafkacat")
    create_topic(cluster, "kcat")
    bs = cluster.bootstrap
    subprocess.run(["kcat", "-b", bs, "-P", "-t", "kcat", "-p", "0"], input=b"one\ntwo\nthree\n", check=True, timeout=60)
    out = subprocess.run(["kcat", "-b", bs, "-C", "-t", "kcat", "-p", "0", "-o", "beginning", "-e", "-q"],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == [b"one", b"two", b"three"]
    listing = subprocess.run(["kcat", "-b", bs, "-L"], capture_output=True, check=True, timeout=60, text=True).stdout
    assert "3 brokers" in listing and 'topic "kcat" with 1 partitions' in listing


def test_malformed_frames_close_the_connection_and_the_broker_keeps_serving(cluster):
    b = cluster.brokers[0]
    rng = random.Random(7)
    for i in range(300):
        with socket.create_connection(("127.0.0.1", b.port), timeout=2) as s:
            s.settimeout(0.2)
            kind = i % 3
            if kind == 0:  # lying length prefix
                s.sendall(struct.pack(">i", rng.choice([-1, 2**31 - 1, 3])) + rng.randbytes(20))
            elif kind == 1:  # unknown API key
                body = struct.pack(">hhi", 999, 0, i) + b"\x00\x00"
                s.sendall(struct.pack(">i", len(body)) + body)
            else:  # garbage body
                body = struct.pack(">hhi", 0, 9, i) + rng.randbytes(rng.randint(0, 60))
                s.sendall(struct.pack(">i", len(body)) + body)
            try:
                s.recv(100)
            except socket.timeout:
                pass
    assert sorted(metadata_brokers("127.0.0.1", b.port)) == sorted(x.node_id for x in cluster.brokers)
    assert cluster.control(b.node_id, "GET", "/status")["counters"].get("bad_frames", 0) >= 200


def test_acks0_produce_gets_no_response_and_does_not_block_later_requests_on_the_connection(cluster):
    """Kafka sends nothing for acks=0; the next request's response must still come."""
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    from kafka.protocol.producer import ProduceRequest
    from helpers import v2_batch

    create_topic(cluster, "acks0")
    # acks=0 gets no error back, so first make sure the leader accepts writes
    assert produce(cluster.bootstrap, "acks0", [b"ready"], acks="all")[0][0] is None
    leader, _ = partition_state(cluster, "acks0")
    port = cluster.node(leader).port
    P = ProduceRequest[9]
    prod = P(transactional_id=None, acks=0, timeout_ms=1000, topic_data=[P.TopicProduceData(name="acks0", partition_data=[
        P.TopicProduceData.PartitionProduceData(index=0, records=v2_batch([b"fire-and-forget"]))])])
    prod.with_header(correlation_id=1, client_id="t")
    av = ApiVersionsRequest[0]()
    av.with_header(correlation_id=2, client_id="t")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(prod.encode(header=True, framed=True) + av.encode(header=True, framed=True))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack(">i", body[:4])[0] == 2  # the first response is ApiVersions'
    assert ApiVersionsResponse.decode(body[4:], version=0).error_code == 0
    got = read_all(cluster.bootstrap, "acks0", upto=2, timeout=20)
    assert [v for _, v in got] == [b"ready", b"fire-and-forget"]


def test_clock_offset_shifts_the_time_the_node_stamps_on_its_trace(cluster):
    """A shift through the control endpoint moves the node's own clock: the
    trace events it writes afterwards carry a node time 60 s ahead of the
    host's, and a reset brings it back."""
    b = cluster.brokers[0]
    trace = os.path.join(b.data_dir, "trace.jsonl")
    before = cluster.control(b.node_id, "GET", "/status")
    r = cluster.control(b.node_id, "POST", "/clock", {"shift_ms": 60_000})
    assert r["clock_offset_ms"] == before["clock_offset_ms"] + 60_000
    mark = os.path.getsize(trace)
    create_topic(cluster, "skewed")  # every broker is a replica: it traces its appends
    produce(cluster.bootstrap, "skewed", [b"x"], acks="1")
    wait_for(lambda: os.path.getsize(trace) > mark, 30, "trace events after the shift")

    def skews(since: int) -> list[int]:
        with open(trace, "rb") as f:
            f.seek(since)
            lines = [json.loads(x) for x in f.read().splitlines() if x.strip()]
        return [ln["node_t"] - ln["t"] for ln in lines if "node_t" in ln]

    wait_for(lambda: any(d >= 55_000 for d in skews(mark)), 30, "a trace event stamped 60 s ahead")
    cluster.control(b.node_id, "POST", "/clock", {"offset_ms": 0})
    mark = os.path.getsize(trace)
    produce(cluster.bootstrap, "skewed", [b"y"], acks="1")
    wait_for(lambda: skews(mark) and all(abs(d) < 5_000 for d in skews(mark)), 30, "events stamped in step again")


def test_offsets_for_times_answers_the_first_offset_at_or_after_the_timestamp(cluster):
    """ListOffsets by timestamp (UnifiedLog.fetchOffsetByTimestamp) through
    confluent-kafka's offsets_for_times: the first record whose timestamp is at
    or after the target, inside a batch too; past the last one, offset -1
    (librdkafka's OFFSET_END)."""
    create_topic(cluster, "times")
    t0 = 1_700_000_000_000
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 200})
    for i in range(5):
        p.produce("times", value=b"v%d" % i, partition=0, timestamp=t0 + 1000 * i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "times"})
    try:
        # one partition per call: librdkafka merges repeats of a partition in one list
        got = [c.offsets_for_times([TopicPartition("times", 0, ts)], timeout=20)[0]
               for ts in (t0 - 5, t0 + 1500, t0 + 4000, t0 + 4001)]
    finally:
        c.close()
    assert [(tp.offset, tp.error) for tp in got] == [(0, None), (2, None), (4, None), (-1, None)]


def test_incremental_alter_configs_of_min_isr_takes_effect_acks_all_refused_with_not_enough_replicas(cluster):
    """IncrementalAlterConfigs through confluent-kafka's AdminClient, written
    as a ConfigRecord through the quorum: once min.insync.replicas exceeds the
    ISR, acks=all is refused with NOT_ENOUGH_REPLICAS (seed 000); deleting the
    topic override brings the broker default (1) back."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic = "altered"
    create_topic(cluster, topic, min_isr=1)
    leader, isr = partition_state(cluster, topic)
    follower = next(b for b in isr if b != leader)
    cluster.kill(follower)
    try:
        wait_for(lambda: len(partition_state(cluster, topic)[1]) == 2, 30, "the ISR shrinks to two")
        assert produce(cluster.bootstrap, topic, [b"before"], acks="all")[0][0] is None
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

        def alter(op: AlterConfigOpType, value: str | None) -> None:
            res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
                ConfigEntry("min.insync.replicas", value, incremental_operation=op)])
            for f in admin.incremental_alter_configs([res]).values():
                f.result(30)

        alter(AlterConfigOpType.SET, "3")
        refused: list = []

        def acks_all_refused() -> bool:
            r = produce(cluster.bootstrap, topic, [b"must-fail"], acks="all", retries=0,
                        **{"message.timeout.ms": 10000})
            refused.append(r[0][0])
            return r[0][0] is not None and r[0][0].code() == KafkaError.NOT_ENOUGH_REPLICAS

        wait_for(acks_all_refused, 30, f"acks=all refused under min ISR 3 (saw {refused[-3:]})")
        alter(AlterConfigOpType.DELETE, None)
        wait_for(lambda: produce(cluster.bootstrap, topic, [b"after"], acks="all")[0][0] is None, 30,
                 "acks=all accepted again with the override deleted")
    finally:
        cluster.start_node(follower)
        cluster.wait_ready(60, [follower])
