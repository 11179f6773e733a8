"""Internal RPC framing: msgpack of the core's dataclasses through a registry."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_impl.core import messages as m
from reference_impl.server.codec import REGISTRY, CodecError


def _source_hints() -> dict[str, dict[str, str]]:
    """class -> field -> annotation, as written in messages.py. Read from the
    source, not from ``dataclasses.fields``: a mypyc-compiled class (see
    reference_impl.accel) keeps only the erased runtime type (``tuple``)."""
    tree = ast.parse(_MESSAGES_PY.read_text())
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = {st.target.id: ast.unparse(st.annotation) for st in node.body
                              if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
    return out


_MESSAGES_PY = Path(__file__).resolve().parents[2] / "reference_impl" / "core" / "messages.py"
_HINTS = _source_hints()


def _sample(cls):
    """An instance of ``cls`` with every field filled from its type hint."""
    vals = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        t = _HINTS[cls.__name__][f.name]
        if "TopicPartition" in t and "tuple" not in t:
            v = m.TopicPartition("topic-a", 3)
        elif t.startswith("tuple[FetchPartitionRequest"):
            v = (m.FetchPartitionRequest(m.TopicPartition("t", 0), 5),)
        elif t.startswith("tuple[FetchPartitionResponse"):
            v = (m.FetchPartitionResponse(m.TopicPartition("t", 0), 0, batches=(m.Batch(0, 1, 2, b"\x00\xffraw"),)),)
        elif t.startswith("tuple[MetadataEntry"):
            v = (m.MetadataEntry(4, 2, m.PartitionRecord(m.TopicPartition("t", 1), (1, 2), (1,), 1)),)
        elif t.startswith("tuple[AlterPartitionItem"):
            v = (m.AlterPartitionItem(m.TopicPartition("t", 0), 1, 2, ((1, 10), (2, 11))),)
        elif "BrokerEndpoint" in t:
            v = m.BrokerEndpoint(7, "127.0.0.1", 9092)
        elif t == "int" or t.startswith("NodeId"):
            v = 17
        elif t == "bool":
            v = True
        elif t == "str":
            v = "s"
        elif "tuple[int, int] | None" in t:
            v = (3, 4)
        elif "tuple[NodeId, ...]" in t:
            v = (1, 2, 3)
        elif t.startswith("tuple[") and f.default is dataclasses.MISSING:
            v = ()
        else:
            v = f.default if f.default is not dataclasses.MISSING else None
        vals.append(v)
    return cls(*vals)


INTERNAL = [
    m.ReplicaFetchRequest, m.ReplicaFetchResponse, m.OffsetForLeaderEpochRequest, m.OffsetForLeaderEpochResponse,
    m.BrokerRegistrationRequest, m.BrokerRegistrationResponse, m.BrokerHeartbeatRequest, m.BrokerHeartbeatResponse,
    m.AlterPartitionRequest, m.AlterPartitionResponse, m.VoteRequest, m.VoteResponse, m.BeginQuorumEpochRequest,
    m.BeginQuorumEpochResponse, m.EndQuorumEpochRequest, m.RaftFetchRequest, m.RaftFetchResponse,
    m.CreateTopicsRequest, m.CreateTopicsResponse, m.AllocateProducerIdsRequest, m.AllocateProducerIdsResponse,
]


@pytest.mark.parametrize("cls", INTERNAL, ids=lambda c: c.__name__)
def test_every_internal_message_round_trips_equal(cls):
    msg = _sample(cls)
    assert REGISTRY.loads(REGISTRY.dumps((1, msg))) == (1, msg)


def test_batch_payload_bytes_and_nested_tuples_survive():
    resp = m.ReplicaFetchResponse(
        1, 9, 0,
        (m.FetchPartitionResponse(m.TopicPartition("t", 0), 0, 5, 5, 0, (m.Batch(3, 2, 1, b"\x00\x01", 77, 1, 9),),
                                  diverging_epoch=(1, 3)),),
    )
    back = REGISTRY.loads(REGISTRY.dumps(resp))
    assert back == resp
    assert isinstance(back.partitions, tuple) and isinstance(back.partitions[0].batches[0].payload, bytes)


def test_a_partition_travels_as_its_fields_and_rehashes_on_arrival():
    """TopicPartition caches its hash in a field the constructor fills: the
    frame carries topic and partition only, and the receiver's copy hashes
    and compares as the sender's (a hash sent along could differ between
    processes, whose string hashes are salted differently)."""
    tp = m.TopicPartition("topic-a", 3)
    frame = REGISTRY.dumps(tp)
    assert REGISTRY.fields[m.TopicPartition] == ("topic", "partition")
    back = REGISTRY.loads(frame)
    assert back == tp and hash(back) == hash(tp) and {tp: 1}[back] == 1


def test_unknown_type_name_is_rejected():
    import msgpack

    forged = msgpack.packb(msgpack.ExtType(1, msgpack.packb(["NoSuchMessage", 1])))
    with pytest.raises(CodecError):
        REGISTRY.loads(forged)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_frames_raise_codec_error_only(data):
    try:
        REGISTRY.loads(data)
    except CodecError:
        pass
