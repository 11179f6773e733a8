"""A local user with no privileges (a throwaway one, tests/nobody.py) cannot
take a node's connection slots or memory from everyone else: real node
processes, attacked by tests/server/hostile.py as that user from loopback addresses of its own
(127.0.0.2 and up: distinct peers to the node), while a real confluent-kafka
producer on 127.0.0.1 keeps getting its acknowledgements.

* slots: one address holds at most max.connections.per.ip; once
  max.connections are open, a newcomer from an address holding fewer takes
  the least recently active slot of the address holding the most;
* deadlines: a socket that sends nothing, only the peer magic, or half a frame
  is closed after connections.handshake.timeout.ms or
  socket.request.read.timeout.ms, long before connections.max.idle.ms;
* memory: the bytes of unfinished frames stay under queued.max.request.bytes
  (the connection holding the most is closed when they would not).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest
from hostile_user import as_nobody, create_topic, finish, produce_acked, start_as_nobody
from confluent_kafka import Producer
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from reference_impl.server.launcher import HOST, LocalCluster
from reference_impl.server.procs import proc_status_kib
from reference_impl.server.rpc import MAGIC

pytestmark = pytest.mark.integration


def _api_versions() -> bytes:
    req = ApiVersionsRequest[0]()
    req.with_header(correlation_id=1, client_id="hostile")
    return bytes(req.encode(header=True, framed=True))


API_VERSIONS = _api_versions()


def _node(tmp_path_factory, name: str, config: dict[str, str]):
    c = LocalCluster.plan(str(tmp_path_factory.mktemp(name)), 1, 1, 0, combined=True, config=config)
    c.up(60)
    create_topic(c.bootstrap, "t")
    return c


def _status(c: LocalCluster) -> dict:
    return c.control(c.nodes[0].node_id, "GET", "/status")


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """Only max.connections set (a key the node has always taken)."""
    c = _node(tmp_path_factory, "capped", {"max.connections": "20"})
    yield c
    c.down(20)


def test_sockets_held_from_one_address_do_not_shut_out_a_producer_from_another(capped):
    port = capped.nodes[0].port
    hold = start_as_nobody({"port": port, "sources": ["127.0.0.2"], "count": 40, "send": API_VERSIONS.hex(),
                            "answer": True, "watch": 25})
    deadline = time.monotonic() + 20
    while _status(capped)["counters"].get("refused_connections", 0) < 20:  # the attacker has its slots
        assert time.monotonic() < deadline, "the attacker never filled max.connections"
        time.sleep(0.2)
    assert produce_acked(capped.bootstrap, "t", 20, timeout_s=10) == 20
    counters = _status(capped)["counters"]
    finish(hold)
    assert counters.get("evicted_connections", 0) >= 1  # the producer took the attacker's idlest slot


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    c = _node(tmp_path_factory, "strict", {
        "max.connections": "60", "max.connections.per.ip": "10", "max.connections.per.ip.overrides": "127.0.0.9:3",
        "connections.handshake.timeout.ms": "1000", "socket.request.read.timeout.ms": "1000",
        "connections.max.idle.ms": "60000"})
    yield c
    c.down(20)


def test_one_address_holds_at_most_max_connections_per_ip_and_its_override(strict):
    port = strict.nodes[0].port
    one = as_nobody({"port": port, "sources": ["127.0.0.2"], "count": 25, "send": API_VERSIONS.hex(),
                     "answer": True, "watch": 0.5})
    assert (one["held"], one["refused"]) == (10, 15)
    overridden = as_nobody({"port": port, "sources": ["127.0.0.9"], "count": 5, "send": API_VERSIONS.hex(),
                            "answer": True, "watch": 0.5})
    assert (overridden["held"], overridden["refused"]) == (3, 2)
    assert _status(strict)["counters"].get("refused_connections_per_ip", 0) >= 17


HALF_HEAD = struct.pack(">i", 100)[:2]
HALF_FRAME = struct.pack(">i", 100) + b"\0" * 50


@pytest.mark.parametrize("what,send", [
    ("nothing at all", b""),
    ("only the peer magic", MAGIC),
    ("the peer magic and half a hello", MAGIC + HALF_FRAME),
    ("half a size", HALF_HEAD),
    ("half a request", HALF_FRAME),
    ("a request and half the next", API_VERSIONS + HALF_FRAME),
])
def test_a_socket_that_stalls_in_a_handshake_or_a_frame_is_closed_after_its_deadline(strict, what, send):
    r = as_nobody({"port": strict.nodes[0].port, "sources": ["127.0.0.3", "127.0.0.4"], "count": 4,
                   "send": send.hex(), "watch": 6})
    assert r["held"] == 4, r
    assert len(r["closed_at"]) == 4 and max(r["closed_at"]) < 3.5, (what, r)  # deadlines 1 s, idle 60 s


def test_a_connection_that_keeps_completing_frames_outlives_the_deadlines(strict):
    with socket.create_connection((HOST, strict.nodes[0].port), timeout=5) as s:
        for _ in range(12):  # 3 s: three times the deadlines
            s.sendall(API_VERSIONS[:5])
            time.sleep(0.1)
            s.sendall(API_VERSIONS[5:])
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            assert len(s.recv(size, socket.MSG_WAITALL)) == size
            time.sleep(0.15)


MIB = 1024 * 1024


@pytest.fixture(scope="module")
def lean(tmp_path_factory):
    c = _node(tmp_path_factory, "lean", {"socket.request.max.bytes": str(4 * MIB),
                                         "queued.max.request.bytes": str(8 * MIB)})
    yield c
    c.down(20)


def test_unfinished_frames_stay_under_queued_max_request_bytes(lean):
    """24 connections each send 3.9 MiB of a 4 MiB request and stall: 94 MiB
    if the node kept them all; it keeps at most 8 MiB of them."""
    pid = lean.nodes[0].pid
    before = proc_status_kib(pid)
    attack = start_as_nobody({"port": lean.nodes[0].port, "sources": ["127.0.0.5", "127.0.0.6"], "count": 24,
                              "send": struct.pack(">i", 4 * MIB).hex(), "pad": int(3.9 * MIB), "watch": 3})
    peak, buffered = before, 0
    acked: list[int] = []
    producer = threading.Thread(target=lambda: acked.append(produce_acked(lean.bootstrap, "t", 20, gap_s=0.1)))
    producer.start()
    while attack.poll() is None:
        peak = max(peak, proc_status_kib(pid))
        buffered = max(buffered, _status(lean)["connections"]["buffered_bytes"])
        time.sleep(0.05)
    producer.join(60)
    finish(attack)
    grew = (peak - before) / 1024
    assert buffered <= 8 * MIB + 256 * 1024, buffered
    assert grew < 40, f"RSS grew {grew:.0f} MiB"
    assert _status(lean)["counters"].get("buffer_evicted", 0) >= 10
    assert acked == [20]


def _fetch(topic: str) -> bytes:
    F = FetchRequest[12]
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    req.with_header(correlation_id=2, client_id="hostile")
    return bytes(req.encode(header=True, framed=True))


def test_answers_clients_leave_unread_stay_under_queued_max_request_bytes(lean):
    """Ten connections each pipeline 150 fetches of a 900 KB record and read
    none of the answers: 1.3 GB of answers if the node kept them; it keeps at
    most 8 MiB of them, closing the connection that holds the most."""
    pid = lean.nodes[0].pid
    create_topic(lean.bootstrap, "big")
    p = Producer({"bootstrap.servers": lean.bootstrap, "log_level": 0})
    p.produce("big", os.urandom(900_000), partition=0)
    assert p.flush(30) == 0
    before = proc_status_kib(pid)
    attack = start_as_nobody({"port": lean.nodes[0].port, "sources": ["127.0.0.7"], "count": 10,
                              "send": (_fetch("big") * 150).hex(), "watch": 4, "rcvbuf": 4096,
                              "noread": True})
    peak, buffered = before, 0
    while attack.poll() is None:
        peak = max(peak, proc_status_kib(pid))
        buffered = max(buffered, _status(lean)["connections"]["buffered_bytes"])
        time.sleep(0.05)
    finish(attack)
    assert buffered <= 8 * MIB, buffered
    assert (peak - before) / 1024 < 40, f"RSS grew {(peak - before) / 1024:.0f} MiB"
    assert _status(lean)["counters"].get("buffer_evicted", 0) >= 1
    assert produce_acked(lean.bootstrap, "t", 5) == 5


def test_a_flood_of_hostile_connections_leaves_the_producer_served_and_the_node_small(tmp_path):
    """A smaller flood than bench/broker_flood.py's, on a node with the
    default limits: 2,500 connections from three addresses (silent, bare
    magic, half frames, idle requests) fill max.connections; then every
    message of a producer on another address is acknowledged, and the node
    stays under 200 MB."""
    c = LocalCluster.plan(str(tmp_path / "flood"), 1, 1, 0, combined=True)
    c.up(60)
    try:
        create_topic(c.bootstrap, "t")
        pid, port = c.nodes[0].pid, c.nodes[0].port
        kinds = [b"", MAGIC, HALF_FRAME, API_VERSIONS + HALF_HEAD, API_VERSIONS]
        floods = [start_as_nobody({"port": port, "sources": [f"127.0.0.{10 + i}" for i in range(3)], "count": 500,
                                   "send": k.hex(), "rate": 250, "watch": 8}) for k in kinds]
        peak, deadline = 0, time.monotonic() + 30
        while sum(_status(c)["counters"].get(k, 0) for k in ("refused_connections", "evicted_connections")) == 0:
            assert time.monotonic() < deadline, "the flood never filled max.connections"
            peak = max(peak, proc_status_kib(pid))
            time.sleep(0.1)
        acked: list[int] = []
        producer = threading.Thread(target=lambda: acked.append(produce_acked(c.bootstrap, "t", 40, gap_s=0.1)))
        producer.start()
        while any(f.poll() is None for f in floods) or producer.is_alive():
            peak = max(peak, proc_status_kib(pid))
            time.sleep(0.05)
        results = [finish(f) for f in floods]
        assert sum(r["connected"] for r in results) >= 2000  # the flood reached the node, past its cap
        assert acked == [40]
        assert peak < 200 * 1024, f"node RSS peaked at {peak / 1024:.0f} MiB"
    finally:
        c.down(20)


def test_every_slot_a_hostile_address_held_is_given_back(strict):
    """Once the attackers' sockets are gone the node counts none of them: a
    slot that leaked would shut its address out for good."""
    deadline = time.monotonic() + 10
    while (st := _status(strict)["connections"])["open"] > 0:
        assert time.monotonic() < deadline, st
        time.sleep(0.2)
    again = as_nobody({"port": strict.nodes[0].port, "sources": ["127.0.0.2"], "count": 10,
                       "send": API_VERSIONS.hex(), "answer": True, "watch": 0.2})
    assert again["held"] == 10
