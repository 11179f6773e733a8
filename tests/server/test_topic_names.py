"""Kafka's topic-name rules on the wire (``Topic.validate``): a CreateTopics
naming an illegal or internal topic is answered INVALID_TOPIC_EXCEPTION (17)
and nothing is made on disk, so ``../../x`` cannot write outside a node's data
directory, ``a/b`` cannot nest, and ``__cluster_metadata`` cannot collide with
the metadata log. The disk store keeps its own containment check."""

from __future__ import annotations

import os
import socket
import struct

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from reference_impl.core.topic_names import topic_name_error
from reference_impl.server.disk import DiskStore
from reference_impl.server.launcher import LocalCluster, recv_exact

BAD = ["../../escaped", "a/b", "__cluster_metadata", "__consumer_offsets", ".", "..", "x" * 250, "",
       "sp ace", "t\n", "é"]


@pytest.mark.parametrize("name", BAD)
def test_kafka_topic_rules_refuse(name):
    assert topic_name_error(name) is not None


@pytest.mark.parametrize("name", ["t", "x" * 249, "a.b_c-D9", "...", "_internal-looking"])
def test_kafka_topic_rules_accept(name):
    assert topic_name_error(name) is None


def test_disk_store_contains_every_log_path(tmp_path):
    store = DiskStore(str(tmp_path / "data"))
    for name in ("../x", "a/b", "..", ".", "/abs"):
        with pytest.raises(ValueError):
            store.log(name)
    with pytest.raises(ValueError):
        store.write_file("../outside", b"")
    assert sorted(os.listdir(tmp_path)) == ["data"]


def _create_topics(port: int, names: list[str], validate_only: bool = False) -> dict[str, int]:
    R = CreateTopicsRequest[4]
    req = R(topics=[R.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
                    for n in names], timeout_ms=10000, validate_only=validate_only)
    req.with_header(correlation_id=7, client_id="names")
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(req.encode(header=True, framed=True))
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        body = recv_exact(s, size)
    resp = CreateTopicsResponse.decode(body[4:], version=4)
    return {t.name: t.error_code for t in resp.topics}


@pytest.mark.integration
def test_create_topics_with_illegal_names_answers_17_and_writes_nothing(tmp_path):
    c = LocalCluster.plan(str(tmp_path / "c"), 1, 1, 0, combined=True)
    base = c.nodes[0].port
    c.up(60)
    try:
        names = ["../../escaped", "a/b", "__cluster_metadata", "..", "x" * 250]
        for validate_only in (True, False):
            got = _create_topics(base, names + ["fine"], validate_only)
            assert {n: got[n] for n in names} == {n: 17 for n in names}
            assert got["fine"] in (0, 36)  # created (or already, the second time)
        data = tmp_path / "c" / "nodes" / "n1"
        assert not (tmp_path / "escaped-0").exists() and not (tmp_path / "c" / "escaped-0").exists()
        assert not (data / "a").exists()
        assert (data / "fine-0").is_dir()
        assert (data / "__cluster_metadata-0").is_dir()
        c.stop_node(1)
        c.start_node(1)
        c.wait_ready(60)  # the metadata log was not disturbed
    finally:
        c.down(20)
