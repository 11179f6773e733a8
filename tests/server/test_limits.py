"""Broker resource limits as Kafka has them: max.connections, idle connections
closed after connections.max.idle.ms, frames over socket.request.max.bytes
refused, a client that pipelines requests without reading the answers is
no longer read from once its unread answers pass a bound (the node's memory
stays bounded), and a CreateTopics asking for more partitions than the
controller's cap is refused at once (Kafka 4.4's MAX_PARTITIONS_PER_BATCH);
real clients keep working throughout."""

from __future__ import annotations

import os
import select
import socket
import struct
import time

import pytest
from helpers import v2_batch
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from reference_impl.server.launcher import HOST, LocalCluster, metadata_brokers
from reference_impl.server.procs import proc_status_kib

pytestmark = pytest.mark.integration
LIMITS = {"max.connections": "20", "connections.max.idle.ms": "2000", "socket.request.max.bytes": "1000000"}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    base = 26000 + (os.getpid() % 200) * 10
    c = LocalCluster.plan(str(tmp_path_factory.mktemp("limits")), 1, 1, base, combined=True, config=LIMITS)
    c.up(60)
    yield c
    c.down(20)


def _closed(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_max_connections_refuses_the_connection_past_the_cap(node):
    socks = [socket.create_connection((HOST, node.nodes[0].port)) for _ in range(30)]
    try:
        time.sleep(0.5)  # well inside the 2 s idle limit
        readable, _, _ = select.select(socks, [], [], 0)  # the node sends nothing: readable = closed
        assert 10 <= len(readable) <= 11  # 20 allowed (one may be another caller's)
        assert node.control(1, "GET", "/status")["counters"]["refused_connections"] >= 10
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)
    assert metadata_brokers(HOST, node.nodes[0].port) == [1]


def test_idle_connection_is_closed_after_connections_max_idle_ms(node):
    silent = socket.create_connection((HOST, node.nodes[0].port))
    used = socket.create_connection((HOST, node.nodes[0].port))
    req = MetadataRequest[1](topics=[])
    req.with_header(correlation_id=1, client_id="idle")
    used.sendall(req.encode(header=True, framed=True))
    size = struct.unpack(">i", used.recv(4, socket.MSG_WAITALL))[0]
    used.recv(size, socket.MSG_WAITALL)
    assert not _closed(silent, 1.0)
    assert _closed(silent, 4.0) and _closed(used, 2.0)


def test_frame_over_socket_request_max_bytes_is_refused(node):
    with socket.create_connection((HOST, node.nodes[0].port)) as s:
        s.sendall(struct.pack(">i", 1_000_001) + b"\0" * 1000)
        assert _closed(s, 5.0)


def _call(port: int, req, resp_cls, version: int):
    req.with_header(correlation_id=1, client_id="limits")
    with socket.create_connection((HOST, port), timeout=30) as s:
        s.sendall(req.encode(header=True, framed=True))
        n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        return resp_cls.decode(s.recv(n, socket.MSG_WAITALL)[4:], version=version)


def test_a_client_that_never_reads_its_answers_stops_being_read(node):
    port = node.nodes[0].port
    C = CreateTopicsRequest[4]
    _call(port, C(topics=[C.CreatableTopic(name="big", num_partitions=1, replication_factor=1, assignments=[],
                                           configs=[])], timeout_ms=30000, validate_only=False), CreateTopicsResponse, 4)
    P = ProduceRequest[8]
    produce = P(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[P.TopicProduceData(name="big",
                partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=v2_batch([os.urandom(900_000)]))])])
    deadline = time.monotonic() + 30
    while _call(port, produce, ProduceResponse, 8).responses[0].partition_responses[0].error_code != 0:
        assert time.monotonic() < deadline, "no leader for big-0"
        time.sleep(0.3)
    F = FetchRequest[12]
    fetch = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
              session_epoch=-1, topics=[F.FetchTopic(topic="big", partitions=[F.FetchTopic.FetchPartition(
                  partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                  partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    fetch.with_header(correlation_id=2, client_id="limits")
    frame = fetch.encode(header=True, framed=True)
    with socket.create_connection((HOST, port), timeout=30) as one:
        one.sendall(frame)
        assert struct.unpack(">i", one.recv(4, socket.MSG_WAITALL))[0] > 800_000  # the answer carries the batch
    rss0 = proc_status_kib(node.nodes[0].pid)
    s = socket.create_connection((HOST, port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    pending, peak, end = frame * 2000, rss0, time.monotonic() + 10  # 2000 answers of ~900 KB, none read
    while time.monotonic() < end:
        try:
            pending = pending[s.send(pending):] if pending else pending
        except BlockingIOError:
            pass
        time.sleep(0.05)
        peak = max(peak, proc_status_kib(node.nodes[0].pid))
    grew_mib = (peak - rss0) / 1024
    assert grew_mib < 150, grew_mib  # 1.8 GB of answers if the node kept reading
    s.close()
    assert metadata_brokers(HOST, port) == [1]


def test_create_topics_over_the_partition_cap_is_refused_at_once_and_the_controller_keeps_leading(node):
    """One CreateTopics of 50000 partitions once kept the controller busy
    for a minute: it lost its quorum leadership and the topic was left with
    no partitions. Kafka 4.4 refuses it before writing anything
    (ReplicationControlManager.validateTotalNumberOfPartitions)."""
    port = node.nodes[0].port
    before = node.control(1, "GET", "/status")["raft"]
    assert before["role"] == "leader"
    C = CreateTopicsRequest[4]
    bomb = C(topics=[C.CreatableTopic(name="bomb", num_partitions=50000, replication_factor=1, assignments=[],
                                      configs=[])], timeout_ms=30000, validate_only=False)
    t0 = time.monotonic()
    resp = _call(port, bomb, CreateTopicsResponse, 4)
    took = time.monotonic() - t0
    assert [(t[0], t[1], t[2]) for t in resp.topics] == [
        ("bomb", 44, "Excessively large number of partitions per request.")]  # POLICY_VIOLATION
    assert took < 5, f"the refusal took {took:.1f} s"
    after = node.control(1, "GET", "/status")["raft"]
    assert (after["role"], after["epoch"]) == ("leader", before["epoch"])  # no election happened
    ok = _call(port, C(topics=[C.CreatableTopic(name="after-bomb", num_partitions=3, replication_factor=1,
                                                assignments=[], configs=[])], timeout_ms=30000, validate_only=False),
               CreateTopicsResponse, 4)
    assert [(t[0], t[1]) for t in ok.topics] == [("after-bomb", 0)]
    assert metadata_brokers(HOST, port) == [1]
