"""The Kafka wire protocol for clients, on kafka-python 3.0.12's codecs.

kafka-python's request/response classes are generated from Kafka's JSON
message schemas, so nothing here hand-encodes a field they provide. This
module is sans-IO: :func:`decode_request` turns one frame (without its length
prefix) into a :class:`Decoded`; :func:`translate` turns a decoded request into
the core's messages plus a :class:`Pending` that collects the core's replies
and encodes the Kafka response once every part has answered.

Supported APIs and versions are what librdkafka needs
(notes/kafka-wire.md): ApiVersions 0-3, Metadata 1-12, Produce 3-10,
Fetch 4-12, ListOffsets 1-9, OffsetForLeaderEpoch 2-4, InitProducerId 0-4,
CreateTopics 2-4, IncrementalAlterConfigs 0-1, AlterPartitionReassignments
0-1 and ListPartitionReassignments 0 (Kafka 4.4's ranges, KIP-455; v1 of
AlterPartitionReassignments adds AllowReplicationFactorChange, KIP-860),
UnregisterBroker 0 (KIP-631; coded here, kafka-python has no schema for
it), and
the consumer-group APIs
of :mod:`.wire_groups` (registered at the end of this module). The decoded
request, the pending answer and the shared field checks are
:mod:`.wire_base`'s, which this module re-exports.
"""

from __future__ import annotations

import io
import struct
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse

from reference_impl.core import messages as m
from reference_impl.core.topic_names import INTERNAL_TOPICS, topic_name_error

from . import wire_groups
from .records import InvalidBatch, find_record, rewrite, split_batches
from .wire_base import (  # re-exported: the runtime and the tests speak of wire.Pending etc.
    REQUEST_TIMED_OUT,
    Decoded,
    Pending,
    ProtocolError,
    UnsupportedVersion,
    encode_response,
    require_array,
    require_name,
    timed_out,
)

UNSUPPORTED_VERSION = 35
CLUSTER_ID = "kraftwerk-reference"
_ZERO_UUID = uuid.UUID(int=0)
_KEY_VER = struct.Struct(">hhi")
#: a request header's most bytes: api key, version, correlation id, a client
#: id of at most 32767 bytes (an int16-sized string) and room for tagged fields
MAX_HEADER_BYTES = 64 * 1024

#: api key -> (request class, response class, min version, max version)
APIS: dict[int, tuple[Any, Any, int, int]] = {
    0: (ProduceRequest, ProduceResponse, 3, 10),
    1: (FetchRequest, FetchResponse, 4, 12),
    2: (ListOffsetsRequest, ListOffsetsResponse, 1, 9),
    3: (MetadataRequest, MetadataResponse, 1, 12),
    18: (ApiVersionsRequest, ApiVersionsResponse, 0, 3),
    19: (CreateTopicsRequest, CreateTopicsResponse, 2, 4),
    22: (InitProducerIdRequest, InitProducerIdResponse, 0, 4),
    23: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4),
    44: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
    45: (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 1),
    46: (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0),
}


def decode_request(frame: bytes | bytearray) -> Decoded:
    """Decode a request frame (the bytes after the 4-byte size).

    Only the header is copied (at most :data:`MAX_HEADER_BYTES`): the body
    is decoded from a view of ``frame``, so a large frame is never held twice.

    Raises :class:`UnsupportedVersion` for a known API at a version outside
    our range (ApiVersions answers it with error 35), :class:`ProtocolError`
    for anything else that cannot be parsed (the connection is closed).
    """
    if len(frame) < 8:
        raise ProtocolError("request shorter than a header")
    api_key, version, corr = _KEY_VER.unpack_from(frame, 0)
    api = APIS.get(api_key)
    if api is None:
        raise ProtocolError(f"unknown api key {api_key}")
    req_cls, _, lo, hi = api
    if not lo <= version <= hi:
        raise UnsupportedVersion(api_key, version, corr)
    flexible = req_cls.flexible_version_q(version)
    try:
        bio = io.BytesIO(bytes(memoryview(frame)[:MAX_HEADER_BYTES]))
        hdr = RequestHeader.decode(bio, flexible=flexible)
        body = req_cls.decode(memoryview(frame)[bio.tell() :], version=version)
    except Exception as e:  # the generated decoders raise many types on garbage
        raise ProtocolError(f"malformed {req_cls.__name__} v{version}: {type(e).__name__}") from None
    return Decoded(api_key, version, corr, hdr.client_id, body)


def api_versions_body(version: int, error: int = 0) -> Any:
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (_, _, lo, hi) in sorted(APIS.items())
    ]
    return ApiVersionsResponse[version](error_code=error, api_keys=keys, throttle_time_ms=0)


def unsupported_version_response(exc: UnsupportedVersion) -> bytes | None:
    """Kafka answers an ApiVersions request of an unknown version with error
    35 and a v0 body listing its range; any other API's bad version closes the
    connection (None)."""
    if exc.api_key != 18:
        return None
    return encode_response(18, 0, exc.correlation_id, api_versions_body(0, UNSUPPORTED_VERSION))


def translate(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    """Turn a decoded request into core messages. ``ref(i)`` makes the opaque
    ``ref`` for part ``i`` (the runtime routes replies with it)."""
    fn = _TRANSLATORS[d.api_key]
    try:
        return fn(d, ref)
    except ProtocolError:
        raise
    except (TypeError, AttributeError, ValueError, KeyError) as e:
        # null arrays or strings where Kafka's schema allows none, and the like
        raise ProtocolError(f"malformed api {d.api_key} v{d.api_version} request: {type(e).__name__}: {e}") from None


def _api_versions(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    p = Pending(d, build=lambda p: api_versions_body(d.api_version))
    return p


def _metadata(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    topics = None if d.body.topics is None else tuple(require_name(t.name) for t in d.body.topics)
    p = Pending(d, total=1, build=_build_metadata)
    p.parts.append((0, m.MetadataRequest(ref(0), topics)))
    return p


def _build_metadata(p: Pending) -> Any:
    r: m.MetadataResponse = p.results[0]
    v = p.decoded.api_version
    R = MetadataResponse[v]
    T = R.MetadataResponseTopic
    P = T.MetadataResponsePartition
    brokers = [R.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=None) for b in r.brokers]
    topics = []
    for t in r.topics:
        parts = [
            P(
                error_code=pm.error,
                partition_index=pm.tp.partition,
                leader_id=pm.leader,
                leader_epoch=pm.leader_epoch,
                replica_nodes=list(pm.replicas),
                isr_nodes=list(pm.isr),
                offline_replicas=list(pm.offline_replicas),
            )
            for pm in t.partitions
        ]
        topics.append(
            T(
                error_code=t.error,
                name=t.name,
                topic_id=_ZERO_UUID,
                is_internal=t.name in INTERNAL_TOPICS,
                partitions=parts,
                authorized_operations=None,
            )
        )
    return R(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=CLUSTER_ID,
        controller_id=r.controller_id,
        topics=topics,
        authorized_operations=None,
    )


def _produce(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    body = d.body
    p = Pending(d, build=_build_produce, expects_response=body.acks != 0)
    order: list[tuple[str, int]] = []
    i = 0
    for t in require_array(body.topic_data):
        for pd in require_array(t.partition_data):
            tp = m.TopicPartition(require_name(t.name), pd.index)
            order.append((t.name, pd.index))
            recs = pd.records
            if body.transactional_id is not None:
                p.results[i] = m.ProduceResponse(None, tp, 53)  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED: no transactions
            elif body.acks not in (0, 1, -1):
                p.results[i] = m.ProduceResponse(None, tp, 21)  # INVALID_REQUIRED_ACKS
            else:
                try:
                    batches = split_batches(bytes(recs) if recs is not None else b"")
                except InvalidBatch as e:
                    p.results[i] = m.ProduceResponse(None, tp, e.error)
                else:
                    h0 = batches[0][0]
                    count = sum(h.count for h, _ in batches)
                    payload = batches[0][1] if len(batches) == 1 else b"".join(c for _, c in batches)
                    p.parts.append(
                        (
                            i,
                            m.ProduceRequest(
                                ref(i),
                                tp,
                                body.acks,
                                count,
                                payload,
                                timeout_ms=body.timeout_ms,
                                producer_id=h0.producer_id,
                                producer_epoch=h0.producer_epoch,
                                base_sequence=h0.base_sequence,
                                max_timestamp=max(h.max_timestamp for h, _ in batches),
                            ),
                        )
                    )
            i += 1
    p.total = i
    p.extra["order"] = order
    return p


def _build_produce(p: Pending) -> Any:
    v = p.decoded.api_version
    R = ProduceResponse[v]
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    by_topic: dict[str, list[Any]] = {}
    for i, (topic, part) in enumerate(p.extra["order"]):
        r: m.ProduceResponse = p.results[i]
        kw: dict[str, Any] = dict(
            index=part,
            error_code=r.error,
            base_offset=r.base_offset if r.error == 0 else -1,
            log_append_time_ms=-1,
            log_start_offset=r.log_start_offset,
            record_errors=[],
            error_message=None,
        )
        by_topic.setdefault(topic, []).append(P(**kw))
    return R(
        responses=[T(name=t, partition_responses=ps) for t, ps in by_topic.items()],
        throttle_time_ms=0,
    )


def _fetch(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    body = d.body
    parts = []
    for t in require_array(body.topics):
        for fp in require_array(t.partitions):
            parts.append(
                m.FetchPartitionRequest(
                    m.TopicPartition(require_name(t.topic), fp.partition),
                    fp.fetch_offset,
                    current_leader_epoch=fp.current_leader_epoch,
                    last_fetched_epoch=fp.last_fetched_epoch,
                    log_start_offset=fp.log_start_offset,
                    max_bytes=fp.partition_max_bytes,
                )
            )
    p = Pending(d, total=1, build=_build_fetch)
    if getattr(body, "replica_id", -1) >= 0:
        raise ProtocolError("replica fetches travel over the internal RPC")
    p.parts.append((0, m.ClientFetchRequest(ref(0), tuple(parts), max_wait_ms=body.max_wait_ms, min_bytes=body.min_bytes)))
    return p


def fetch_records(batches: tuple[m.Batch, ...]) -> bytes:
    """Concatenate stored batches for a consumer, each with its own offset and
    leader epoch in the header (consumers take the epoch from there)."""
    if not batches:
        return b""
    return b"".join(rewrite(b.payload, b.base_offset, b.leader_epoch) for b in batches)


def _build_fetch(p: Pending) -> Any:
    r: m.ClientFetchResponse = p.results[0]
    v = p.decoded.api_version
    R = FetchResponse[v]
    T = R.FetchableTopicResponse
    P = T.PartitionData
    by_topic: dict[str, list[Any]] = {}
    for fr in r.partitions:
        kw: dict[str, Any] = dict(
            partition_index=fr.tp.partition,
            error_code=fr.error,
            high_watermark=fr.high_watermark,
            last_stable_offset=fr.last_stable_offset if fr.last_stable_offset >= 0 else fr.high_watermark,
            log_start_offset=fr.log_start_offset,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=fetch_records(fr.batches),
        )
        if v >= 12:
            if fr.diverging_epoch is not None:
                kw["diverging_epoch"] = P.EpochEndOffset(epoch=fr.diverging_epoch[0], end_offset=fr.diverging_epoch[1])
            if fr.current_leader is not None:
                kw["current_leader"] = P.LeaderIdAndEpoch(leader_id=fr.current_leader[0], leader_epoch=fr.current_leader[1])
        by_topic.setdefault(fr.tp.topic, []).append(P(**kw))
    return R(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[T(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def _fan_out(
    d: Decoded,
    ref: Callable[[int], Any],
    build: Callable[[Pending], Any],
    topic_name: Callable[[Any], Any],
    partition_index: Callable[[Any], int],
    make: Callable[[Any, m.TopicPartition, Any], Any],
) -> Pending:
    """One core request per topic-partition of a request, answered in the
    request's partition order (ListOffsets, OffsetForLeaderEpoch)."""
    p = Pending(d, build=build)
    order: list[m.TopicPartition] = []
    for t in require_array(d.body.topics):
        for part in require_array(t.partitions):
            i = len(order)
            tp = m.TopicPartition(require_name(topic_name(t)), partition_index(part))
            p.parts.append((i, make(ref(i), tp, part)))
            order.append(tp)
    p.total = len(order)
    p.extra["order"] = order
    return p


def _group_by_topic(p: Pending, make_part: Callable[[m.TopicPartition, Any], Any]) -> dict[str, list[Any]]:
    """The core's per-partition answers of a :func:`_fan_out`, regrouped per topic."""
    by_topic: dict[str, list[Any]] = {}
    for i, tp in enumerate(p.extra["order"]):
        by_topic.setdefault(tp.topic, []).append(make_part(tp, p.results[i]))
    return by_topic


def _list_offsets(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    return _fan_out(
        d, ref, _build_list_offsets, lambda t: t.name, lambda lp: lp.partition_index,
        lambda r, tp, lp: m.ListOffsetsRequest(r, tp, lp.timestamp, lp.current_leader_epoch),
    )


def _build_list_offsets(p: Pending) -> Any:
    R = ListOffsetsResponse[p.decoded.api_version]
    T = R.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    targets = {i: req.timestamp for i, req in p.parts}
    for i, r in list(p.results.items()):
        if isinstance(r, m.ListOffsetsResponse) and r.batch is not None:
            p.results[i] = _narrow_to_record(r, targets.get(i, -1))
    by_topic = _group_by_topic(p, lambda tp, r: P(
        partition_index=tp.partition, error_code=r.error, timestamp=r.timestamp, offset=r.offset,
        leader_epoch=r.leader_epoch,
    ))
    return R(throttle_time_ms=0, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


def _narrow_to_record(r: m.ListOffsetsResponse, target: int) -> m.ListOffsetsResponse:
    """The core found the batch; the record inside is found here, where the
    records can be read (see :class:`reference_impl.core.messages.ListOffsetsResponse`)."""
    b = r.batch
    assert b is not None
    found = None
    if isinstance(b.payload, (bytes, bytearray)):
        found = find_record(bytes(b.payload), b.base_offset, b.leader_epoch,
                            None if target == m.MAX_TIMESTAMP else target, b.max_timestamp)
    if found is None:
        return m.ListOffsetsResponse(r.ref, r.tp, r.error, r.offset, r.leader_epoch, r.timestamp)
    return m.ListOffsetsResponse(r.ref, r.tp, r.error, found[0], r.leader_epoch, found[1])


def _offset_for_leader_epoch(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    return _fan_out(
        d, ref, _build_ofle, lambda t: t.topic, lambda op: op.partition,
        lambda r, tp, op: m.OffsetForLeaderEpochRequest(r, tp, op.leader_epoch, current_leader_epoch=op.current_leader_epoch),
    )


def _build_ofle(p: Pending) -> Any:
    R = OffsetForLeaderEpochResponse[p.decoded.api_version]
    T = R.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    by_topic = _group_by_topic(p, lambda tp, r: P(
        error_code=r.error, partition=tp.partition, leader_epoch=r.leader_epoch, end_offset=r.end_offset
    ))
    return R(throttle_time_ms=0, topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()])


def _init_producer_id(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    p = Pending(d, total=1, build=_build_init_pid)
    if d.body.transactional_id is not None:
        p.results[0] = m.InitProducerIdResponse(None, 53)  # transactions are not supported
    else:
        p.parts.append((0, m.InitProducerIdRequest(ref(0), None)))
    return p


def _build_init_pid(p: Pending) -> Any:
    r: m.InitProducerIdResponse = p.results[0]
    R = InitProducerIdResponse[p.decoded.api_version]
    return R(throttle_time_ms=0, error_code=r.error, producer_id=r.producer_id, producer_epoch=max(r.producer_epoch, -1))


def _create_topics(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    body = d.body
    topics = []
    for t in require_array(body.topics):
        assignments = None
        if t.assignments:
            assignments = tuple(tuple(require_array(a.broker_ids)) for a in sorted(t.assignments, key=lambda a: a.partition_index))
        configs = tuple((require_name(c.name), c.value) for c in (t.configs or ()) if c.value is not None)
        topics.append(m.NewTopic(require_name(t.name), t.num_partitions, t.replication_factor, configs, assignments))
    p = Pending(d, total=1, build=_build_create_topics)
    p.extra["names"] = [t.name for t in topics]
    if body.validate_only:
        p.results[0] = m.CreateTopicsResponse(None, tuple(_validate_only(t.name) for t in topics))
    else:
        p.parts.append((0, m.CreateTopicsRequest(ref(0), tuple(topics), timeout_ms=body.timeout_ms)))
    return p


def _validate_only(name: str) -> m.CreateTopicResult:
    err = topic_name_error(name)
    return m.CreateTopicResult(name, 0) if err is None else m.CreateTopicResult(name, m.Errors.INVALID_TOPIC_EXCEPTION, err)


def _build_create_topics(p: Pending) -> Any:
    r: m.CreateTopicsResponse = p.results[0]
    R = CreateTopicsResponse[p.decoded.api_version]
    T = R.CreatableTopicResult
    return R(
        throttle_time_ms=0,
        topics=[T(name=x.name, error_code=x.error, error_message=x.message or None) for x in r.results],
    )


def _incremental_alter_configs(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    """One core request for the whole Kafka request, forwarded to the
    active controller by the broker (as CreateTopics)."""
    body = d.body
    resources = tuple(
        m.AlterConfigsResource(r.resource_type, require_name(r.resource_name), tuple(
            m.AlterConfigOp(require_name(c.name), c.config_operation, c.value) for c in require_array(r.configs)))
        for r in require_array(body.resources)
    )
    p = Pending(d, total=1, build=_build_incremental_alter_configs)
    p.parts.append((0, m.IncrementalAlterConfigsRequest(ref(0), resources, bool(body.validate_only))))
    return p


def _build_incremental_alter_configs(p: Pending) -> Any:
    r: m.IncrementalAlterConfigsResponse = p.results[0]
    R = IncrementalAlterConfigsResponse[p.decoded.api_version]
    X = R.AlterConfigsResourceResponse
    return R(throttle_time_ms=0, responses=[
        X(error_code=x.error, error_message=x.message or None, resource_type=x.resource_type, resource_name=x.name)
        for x in r.results
    ])


def _alter_partition_reassignments(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    """One core request for the whole Kafka request, forwarded to the active
    controller (KIP-455); v1's AllowReplicationFactorChange (KIP-860) goes
    with it."""
    body = d.body
    allow_rf = bool(getattr(body, "allow_replication_factor_change", True)) if d.api_version >= 1 else True
    parts = tuple(
        m.ReassignPartition(m.TopicPartition(require_name(t.name), pr.partition_index),
                            None if pr.replicas is None else tuple(int(b) for b in pr.replicas))
        for t in require_array(body.topics) for pr in require_array(t.partitions)
    )
    p = Pending(d, total=1, build=_build_alter_partition_reassignments)
    p.extra["allow_rf"] = allow_rf
    p.parts.append((0, m.AlterPartitionReassignmentsRequest(ref(0), parts, timeout_ms=body.timeout_ms,
                                                            allow_replication_factor_change=allow_rf)))
    return p


def _build_alter_partition_reassignments(p: Pending) -> Any:
    r: m.AlterPartitionReassignmentsResponse = p.results[0]
    v = p.decoded.api_version
    R = AlterPartitionReassignmentsResponse[v]
    T = R.ReassignableTopicResponse
    P = T.ReassignablePartitionResponse
    by_topic: dict[str, list[Any]] = {}
    for x in r.results:
        by_topic.setdefault(x.tp.topic, []).append(
            P(partition_index=x.tp.partition, error_code=x.error, error_message=x.message or None))
    kw: dict[str, Any] = {"allow_replication_factor_change": p.extra["allow_rf"]} if v >= 1 else {}
    return R(throttle_time_ms=0, error_code=0, error_message=None,
             responses=[T(name=name, partitions=ps) for name, ps in by_topic.items()], **kw)


def _list_partition_reassignments(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    body = d.body
    tps = None
    if body.topics is not None:
        tps = tuple(m.TopicPartition(require_name(t.name), int(i)) for t in body.topics for i in require_array(t.partition_indexes))
    p = Pending(d, total=1, build=_build_list_partition_reassignments)
    p.parts.append((0, m.ListPartitionReassignmentsRequest(ref(0), tps, timeout_ms=body.timeout_ms)))
    return p


def _build_list_partition_reassignments(p: Pending) -> Any:
    r: m.ListPartitionReassignmentsResponse = p.results[0]
    R = ListPartitionReassignmentsResponse[p.decoded.api_version]
    T = R.OngoingTopicReassignment
    P = T.OngoingPartitionReassignment
    by_topic: dict[str, list[Any]] = {}
    for o in r.reassignments:
        by_topic.setdefault(o.tp.topic, []).append(P(
            partition_index=o.tp.partition, replicas=list(o.replicas),
            adding_replicas=list(o.adding_replicas), removing_replicas=list(o.removing_replicas)))
    return R(throttle_time_ms=0, error_code=r.error, error_message=None,
             topics=[T(name=name, partitions=ps) for name, ps in by_topic.items()])


# --------------------------------------------------------------------------
# UnregisterBroker (KIP-631, api key 64, v0, flexible): kafka-python 3.0.12
# bundles no schema for it, so its two small bodies are coded here
# --------------------------------------------------------------------------


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_uvarint(b: memoryview, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(b) or shift > 28:
            raise ValueError("truncated or overlong varint")
        x = b[pos]
        pos += 1
        n |= (x & 0x7F) << shift
        if not x & 0x80:
            return n, pos
        shift += 7


def _skip_tagged_fields(b: memoryview, pos: int) -> int:
    count, pos = _read_uvarint(b, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(b, pos)
        size, pos = _read_uvarint(b, pos)
        pos += size
        if pos > len(b):
            raise ValueError("tagged field past the end")
    return pos


@dataclass
class UnregisterBrokerBody:
    broker_id: int


class UnregisterBrokerRequest:
    """Request v0: BrokerId int32, tagged fields."""

    API_KEY = 64

    @classmethod
    def __class_getitem__(cls, version: int) -> type:
        return cls

    @staticmethod
    def flexible_version_q(version: int) -> bool:
        return True

    @staticmethod
    def decode(data: Any, version: int = 0) -> UnregisterBrokerBody:
        b = memoryview(bytes(data))
        if len(b) < 4:
            raise ValueError("short UnregisterBroker request")
        (broker_id,) = struct.unpack_from(">i", b, 0)
        if _skip_tagged_fields(b, 4) != len(b):
            raise ValueError("trailing bytes")
        return UnregisterBrokerBody(broker_id)

    @staticmethod
    def encode_body(broker_id: int) -> bytes:
        return struct.pack(">i", broker_id) + _uvarint(0)


@dataclass
class UnregisterBrokerResponse:
    """Response v0: ThrottleTimeMs int32, ErrorCode int16, ErrorMessage
    compact nullable string, tagged fields."""

    throttle_time_ms: int = 0
    error_code: int = 0
    error_message: str | None = None

    @classmethod
    def __class_getitem__(cls, version: int) -> type:
        return cls

    @staticmethod
    def flexible_version_q(version: int) -> bool:
        return True

    def encode(self, version: int = 0) -> bytes:
        msg = b"" if self.error_message is None else self.error_message.encode()
        text = _uvarint(0) if self.error_message is None else _uvarint(len(msg) + 1) + msg
        return struct.pack(">ih", self.throttle_time_ms, self.error_code) + text + _uvarint(0)

    @classmethod
    def decode(cls, data: Any, version: int = 0) -> "UnregisterBrokerResponse":
        b = memoryview(bytes(data))
        throttle, error = struct.unpack_from(">ih", b, 0)
        n, pos = _read_uvarint(b, 6)
        message = None if n == 0 else bytes(b[pos:pos + n - 1]).decode()
        _skip_tagged_fields(b, pos + max(0, n - 1))
        return cls(throttle, error, message)


APIS[64] = (UnregisterBrokerRequest, UnregisterBrokerResponse, 0, 0)


def _unregister_broker(d: Decoded, ref: Callable[[int], Any]) -> Pending:
    """Forwarded to the active controller by the broker, as Kafka's broker
    forwards it (KIP-631)."""
    p = Pending(d, total=1, build=_build_unregister_broker)
    p.parts.append((0, m.UnregisterBrokerRequest(ref(0), int(d.body.broker_id))))
    return p


def _build_unregister_broker(p: Pending) -> Any:
    r: m.UnregisterBrokerResponse = p.results[0]
    return UnregisterBrokerResponse(0, r.error, r.message or None)


_TRANSLATORS: dict[int, Callable[[Decoded, Callable[[int], Any]], Pending]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    18: _api_versions,
    19: _create_topics,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    44: _incremental_alter_configs,
    45: _alter_partition_reassignments,
    46: _list_partition_reassignments,
    64: _unregister_broker,
}

# the consumer-group APIs live in their own module (both build on wire_base)
APIS.update(wire_groups.APIS)
_TRANSLATORS.update(wire_groups.TRANSLATORS)
