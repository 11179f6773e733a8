"""Kafka wire layer: requests decoded and responses encoded with kafka-python's
schema-generated codecs, in exactly the shapes librdkafka relies on
(notes/kafka-wire.md)."""

from __future__ import annotations

import struct

import pytest
from helpers import v2_batch
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch

from reference_impl.core import messages as m
from reference_impl.server import wire


def _frame(req, corr=11) -> bytes:
    req.with_header(correlation_id=corr, client_id="test")
    return req.encode(header=True)  # unframed: what the runtime hands decode_request


def _roundtrip(req, corr=11):
    d = wire.decode_request(_frame(req, corr))
    return d, wire.translate(d, lambda i: ("ref", i))


def _decode_response(resp_cls, version, data, flexible_header):
    size = struct.unpack(">i", data[:4])[0]
    assert size == len(data) - 4
    corr = struct.unpack(">i", data[4:8])[0]
    pos = 8 + (1 if flexible_header else 0)  # v1 response header: empty tagged fields
    return corr, resp_cls.decode(data[pos:], version=version)


def test_api_versions_v3_advertises_librdkafka_set_with_v0_header():
    d, p = _roundtrip(ApiVersionsRequest[3](client_software_name="x", client_software_version="1"))
    assert p.done and not p.parts
    corr, r = _decode_response(ApiVersionsResponse, 3, p.encode(), flexible_header=False)
    got = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert corr == 11
    assert got == {0: (3, 10), 1: (4, 12), 2: (1, 9), 3: (1, 12), 18: (0, 3), 19: (2, 4), 22: (0, 4), 23: (2, 4), 44: (0, 1),
                   45: (0, 1), 46: (0, 0),  # AlterPartitionReassignments, ListPartitionReassignments (KIP-455)
                   64: (0, 0),  # UnregisterBroker (KIP-631)
                   # the classic consumer-group APIs (server/wire_groups.py)
                   8: (2, 9), 9: (1, 7), 10: (0, 4), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5)}


def test_api_versions_unsupported_version_gets_error_35_and_v0_body():
    frame = struct.pack(">hhi", 18, 9, 77) + b"\x00\x00"
    with pytest.raises(wire.UnsupportedVersion) as e:
        wire.decode_request(frame)
    data = wire.unsupported_version_response(e.value)
    corr, r = _decode_response(ApiVersionsResponse, 0, data, flexible_header=False)
    assert corr == 77 and r.error_code == 35 and any(k.api_key == 18 for k in r.api_keys)


def test_unknown_api_key_and_other_unsupported_versions_close_the_connection():
    with pytest.raises(wire.ProtocolError):
        wire.decode_request(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00")
    with pytest.raises(wire.UnsupportedVersion) as e:
        wire.decode_request(struct.pack(">hhi", 0, 2, 1) + b"\x00\x00")
    assert wire.unsupported_version_response(e.value) is None


def _produce(version, acks, records, name="t"):
    P = ProduceRequest[version]
    return P(
        transactional_id=None, acks=acks, timeout_ms=1500,
        topic_data=[P.TopicProduceData(name=name, partition_data=[P.TopicProduceData.PartitionProduceData(index=2, records=records)])],
    )


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_produce_passes_batch_bytes_and_producer_state_to_core(version):
    raw = v2_batch([b"a", b"b", b"c"], producer_id=9, producer_epoch=1, base_sequence=30)
    d, p = _roundtrip(_produce(version, -1, raw))
    [(i, req)] = p.parts
    assert isinstance(req, m.ProduceRequest)
    assert (req.tp, req.acks, req.count, req.payload) == (m.TopicPartition("t", 2), -1, 3, raw)
    assert (req.producer_id, req.producer_epoch, req.base_sequence, req.timeout_ms) == (9, 1, 30, 1500)
    p.results[i] = m.ProduceResponse(req.ref, req.tp, 0, 500, 0)
    corr, r = _decode_response(ProduceResponse, version, p.encode(), flexible_header=version >= 9)
    pr = r.responses[0].partition_responses[0]
    assert (r.responses[0].name, pr.index, pr.error_code, pr.base_offset) == ("t", 2, 0, 500)


def test_produce_acks0_expects_no_response():
    _, p = _roundtrip(_produce(9, 0, v2_batch([b"a"])))
    assert not p.expects_response


def test_produce_with_bad_crc_is_answered_corrupt_message_without_core():
    raw = bytearray(v2_batch([b"hello"]))
    raw[-2] ^= 0x55
    _, p = _roundtrip(_produce(9, -1, bytes(raw)))
    assert not p.parts and p.done
    _, r = _decode_response(ProduceResponse, 9, p.encode(), flexible_header=True)
    assert r.responses[0].partition_responses[0].error_code == 2


def test_fetch_v12_response_rewrites_batch_offsets_and_epochs_and_carries_lso_and_divergence():
    F = FetchRequest[12]
    req = F(
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=[F.FetchTopic(topic="t", partitions=[F.FetchTopic.FetchPartition(partition=0, current_leader_epoch=4,
                fetch_offset=10, last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="",
    )
    _, p = _roundtrip(req)
    [(i, cf)] = p.parts
    assert cf.partitions[0].fetch_offset == 10 and cf.partitions[0].current_leader_epoch == 4
    stored = m.Batch(10, 4, 2, v2_batch([b"x", b"y"]))  # client bytes still say offset 0, epoch 0
    p.results[i] = m.ClientFetchResponse(cf.ref, (m.FetchPartitionResponse(
        m.TopicPartition("t", 0), 0, high_watermark=12, last_stable_offset=-1, log_start_offset=0,
        batches=(stored,), diverging_epoch=(3, 9)),))
    _, r = _decode_response(FetchResponse, 12, p.encode(), flexible_header=True)
    part = r.responses[0].partitions[0]
    assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (12, 12, 0)
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (3, 9)
    raw = bytes(part.records) if not hasattr(part.records, "buffer") else part.records.buffer()
    b = DefaultRecordBatch(bytes(raw))
    assert (b.base_offset, b.leader_epoch) == (10, 4) and b.validate_crc()


def test_metadata_v12_reports_leader_epochs_and_controller():
    d, p = _roundtrip(MetadataRequest[12](topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    [(i, mr)] = p.parts
    assert mr.topics is None
    tp = m.TopicPartition("t", 0)
    p.results[i] = m.MetadataResponse(mr.ref, (m.BrokerEndpoint(1, "127.0.0.1", 9092),), 1001,
                                      (m.TopicMetadata("t", 0, (m.PartitionMetadata(tp, 0, 1, 7, (1, 2), (1,)),)),))
    _, r = _decode_response(MetadataResponse, 12, p.encode(), flexible_header=True)
    part = r.topics[0].partitions[0]
    assert (r.controller_id, part.leader_id, part.leader_epoch, part.isr_nodes) == (1001, 1, 7, [1])


def test_list_offsets_and_create_topics_translate_every_partition_and_config():
    L = ListOffsetsRequest[7]
    req = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name="t", partitions=[
        L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=2, timestamp=-1),
        L.ListOffsetsTopic.ListOffsetsPartition(partition_index=1, current_leader_epoch=2, timestamp=-2)])])
    _, p = _roundtrip(req)
    assert [(x.tp.partition, x.timestamp) for _, x in p.parts] == [(0, -1), (1, -2)]
    for i, x in p.parts:
        p.results[i] = m.ListOffsetsResponse(x.ref, x.tp, 0, 40 + i, 2)
    _, r = _decode_response(ListOffsetsResponse, 7, p.encode(), flexible_header=True)
    assert [q.offset for q in r.topics[0].partitions] == [40, 41]

    C = CreateTopicsRequest[4]
    T = C.CreatableTopic
    req = C(topics=[T(name="new", num_partitions=3, replication_factor=3, assignments=[], configs=[
        T.CreatableTopicConfig(name="min.insync.replicas", value="2"),
        T.CreatableTopicConfig(name="unclean.leader.election.enable", value="true")])], timeout_ms=5000, validate_only=False)
    _, p = _roundtrip(req)
    [(i, ct)] = p.parts
    nt = ct.topics[0]
    assert (nt.name, nt.num_partitions, nt.replication_factor) == ("new", 3, 3)
    assert dict(nt.configs) == {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    p.results[i] = m.CreateTopicsResponse(ct.ref, (m.CreateTopicResult("new", 36, "exists"),))
    _, r = _decode_response(CreateTopicsResponse, 4, p.encode(), flexible_header=False)
    assert (r.topics[0].error_code, r.topics[0].error_message) == (36, "exists")


def test_unanswered_parts_expire_as_request_timed_out():
    """Kafka's purgatory always completes: an unanswered produce times out (7)."""
    raw = v2_batch([b"a"])
    _, p = _roundtrip(_produce(9, -1, raw))
    assert not p.done
    assert p.expire() == 1 and p.done
    _, r = _decode_response(ProduceResponse, 9, p.encode(), flexible_header=True)
    assert r.responses[0].partition_responses[0].error_code == 7


def _stamped_batch(stamps: list[int]) -> bytes:
    from kafka.record import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24)
    for i, ts in enumerate(stamps):
        b.append(timestamp=ts, key=None, value=b"v%d" % i, headers=[])
    b.close()
    return bytes(b.buffer())


def test_list_offsets_v9_narrows_a_found_batch_to_the_first_record_at_or_after_the_timestamp():
    """UnifiedLog.fetchOffsetByTimestamp: the core finds the batch, the wire
    layer the record in it (and for max timestamp, the first record holding
    it); v8/v9 carry earliest-local (-4) and latest-tiered (-5) to the core."""
    L = ListOffsetsRequest[9]
    P = L.ListOffsetsTopic.ListOffsetsPartition
    req = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name="t", partitions=[
        P(partition_index=0, current_leader_epoch=-1, timestamp=1500),
        P(partition_index=1, current_leader_epoch=-1, timestamp=m.MAX_TIMESTAMP),
        P(partition_index=2, current_leader_epoch=-1, timestamp=m.EARLIEST_LOCAL_TIMESTAMP),
        P(partition_index=3, current_leader_epoch=-1, timestamp=m.LATEST_TIERED_TIMESTAMP)])])
    _, p = _roundtrip(req)
    assert [x.timestamp for _, x in p.parts] == [1500, -3, -4, -5]
    payload = _stamped_batch([1000, 3000, 2000, 3000])
    batch = m.Batch(10, 4, 4, payload, max_timestamp=3000)
    (i0, x0), (i1, x1), (i2, x2), (i3, x3) = p.parts
    p.results[i0] = m.ListOffsetsResponse(x0.ref, x0.tp, 0, 10, 4, 3000, batch)
    p.results[i1] = m.ListOffsetsResponse(x1.ref, x1.tp, 0, 10, 4, 3000, batch)
    p.results[i2] = m.ListOffsetsResponse(x2.ref, x2.tp, 0, 0, 1)
    p.results[i3] = m.ListOffsetsResponse(x3.ref, x3.tp, 0, -1, -1)
    _, r = _decode_response(ListOffsetsResponse, 9, p.encode(), flexible_header=True)
    got = [(q.offset, q.timestamp, q.leader_epoch) for q in r.topics[0].partitions]
    assert got == [(11, 3000, 4), (11, 3000, 4), (0, -1, 1), (-1, -1, -1)]


@pytest.mark.parametrize("version", [0, 1])
def test_kip455_alter_partition_reassignments_is_one_forwarded_core_request_and_answers_per_partition(version):
    R = AlterPartitionReassignmentsRequest[version]
    T, P = R.ReassignableTopic, R.ReassignableTopic.ReassignablePartition
    kw = {"allow_replication_factor_change": False} if version >= 1 else {}
    d, p = _roundtrip(R(timeout_ms=900, topics=[T(name="t", partitions=[P(partition_index=0, replicas=[3, 1, 2]),
                                                                           P(partition_index=1, replicas=None)])], **kw))
    (_, core), = p.parts
    assert core.partitions == (m.ReassignPartition(m.TopicPartition("t", 0), (3, 1, 2)),
                               m.ReassignPartition(m.TopicPartition("t", 1), None))
    assert core.timeout_ms == 900 and core.allow_replication_factor_change is (version == 0)
    p.results[0] = m.AlterPartitionReassignmentsResponse(None, (
        m.ReassignmentResult(m.TopicPartition("t", 0), 0),
        m.ReassignmentResult(m.TopicPartition("t", 1), m.Errors.NO_REASSIGNMENT_IN_PROGRESS, "none")))
    corr, r = _decode_response(AlterPartitionReassignmentsResponse, version, p.encode(), flexible_header=True)
    assert corr == 11 and r.error_code == 0
    (topic,) = r.responses
    assert topic.name == "t" and [(x.partition_index, x.error_code, x.error_message) for x in topic.partitions] == [
        (0, 0, None), (1, 85, "none")]


def test_kip455_list_partition_reassignments_names_replicas_adding_and_removing():
    R = ListPartitionReassignmentsRequest[0]
    d, p = _roundtrip(R(timeout_ms=900, topics=[R.ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 2])]))
    (_, core), = p.parts
    assert core.tps == (m.TopicPartition("t", 0), m.TopicPartition("t", 2))
    d, p = _roundtrip(R(timeout_ms=900, topics=None))
    (_, core), = p.parts
    assert core.tps is None
    p.results[0] = m.ListPartitionReassignmentsResponse(None, 0, (
        m.OngoingReassignment(m.TopicPartition("t", 0), (3, 1, 2, 0), (3,), (0,)),))
    corr, r = _decode_response(ListPartitionReassignmentsResponse, 0, p.encode(), flexible_header=True)
    (topic,) = r.topics
    (x,) = topic.partitions
    assert (topic.name, x.partition_index, x.replicas, x.adding_replicas, x.removing_replicas) == (
        "t", 0, [3, 1, 2, 0], [3], [0])


def test_kip631_unregister_broker_v0_is_forwarded_and_answered_in_its_flexible_shape():
    client = b"kraftwerk"
    frame = struct.pack(">hhih", 64, 0, 11, len(client)) + client + b"\x00" + wire.UnregisterBrokerRequest.encode_body(3)
    d = wire.decode_request(frame)
    p = wire.translate(d, lambda i: ("ref", i))
    (_, core), = p.parts
    assert core == m.UnregisterBrokerRequest(("ref", 0), 3)
    p.results[0] = m.UnregisterBrokerResponse(None, m.Errors.BROKER_ID_NOT_REGISTERED, "Broker ID 3 is not currently registered")
    data = p.encode()
    assert struct.unpack(">i", data[4:8])[0] == 11 and data[8] == 0  # v1 header: correlation id, no tagged fields
    r = wire.UnregisterBrokerResponse.decode(data[9:])
    assert (r.error_code, r.error_message) == (102, "Broker ID 3 is not currently registered")
    with pytest.raises(wire.ProtocolError):
        wire.decode_request(frame[:-3])
