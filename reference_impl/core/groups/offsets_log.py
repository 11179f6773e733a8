"""Committed offsets as records of ``__consumer_offsets``.

Kafka keeps a group's committed offsets as records of its internal topic
``__consumer_offsets``, keyed by (group, topic, partition), so they are
replicated, elected and truncated exactly as any partition's records are,
and a new coordinator rebuilds them by reading the partition it now leads.
The record formats are Kafka's ``OffsetCommitKey`` (version 1: group, topic,
partition) and ``OffsetCommitValue`` (version 3: offset, leader epoch,
metadata, commit timestamp) from ``group-coordinator/src/main/resources/
common/message``. A group's membership is one more record kind in the same
partition: Kafka's ``GroupMetadataKey`` (version 2: group) and
``GroupMetadataValue`` (version 3, what Kafka 4 writes: protocol type,
generation, protocol, leader, state timestamp, and each member's id,
instance id, client id and host, timeouts, subscription and assignment),
written when a rebalance completes and when a group becomes Empty; the
last one of a group in the log is the group, and a tombstone (no value)
means no group. The batch is a v2 record batch built with kafka-python's
record codec, so the partition holds what any consumer of it can read.
Encoding and decoding are pure functions of bytes.
"""

from __future__ import annotations

import struct
from typing import Any, Final, Iterable, Iterator


from ..messages import TopicPartition
from .messages import CommittedOffset, StoredGroup, StoredMember

OFFSETS_TOPIC: Final = "__consumer_offsets"
KEY_VERSION: Final = 1
VALUE_VERSION: Final = 3
#: the key version of a group-metadata record (GroupMetadataKey's record type)
GROUP_KEY_VERSION: Final = 2
#: the GroupMetadataValue version Kafka 4 writes (4 is flexible, reserved)
GROUP_VALUE_VERSION: Final = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE = struct.Struct(">hqi")  # version, offset, leader epoch
_I64 = struct.Struct(">q")


class BadOffsetRecord(ValueError):
    pass


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: the group id's Java
    ``String.hashCode`` made non-negative (Kafka's ``Utils.abs``, a mask),
    modulo the partition count. Every broker computes the same."""
    h = 0
    for unit in _utf16_units(group_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def _utf16_units(s: str) -> Iterator[int]:
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        yield (data[i] << 8) | data[i + 1]


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def encode_key(group_id: str, tp: TopicPartition) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(group_id) + _string(tp.topic) + _I32.pack(tp.partition)


def encode_value(c: CommittedOffset, timestamp: int) -> bytes:
    return _VALUE.pack(VALUE_VERSION, c.offset, c.leader_epoch) + _string(c.metadata or "") + _I64.pack(timestamp)


def _nullable(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _string(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def encode_group_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _string(group_id)


def encode_group_value(sg: StoredGroup) -> bytes:
    out = [_I16.pack(GROUP_VALUE_VERSION), _string(sg.protocol_type), _I32.pack(sg.generation),
           _nullable(sg.protocol), _nullable(sg.leader), _I64.pack(sg.state_timestamp), _I32.pack(len(sg.members))]
    for m in sg.members:
        out += [_string(m.member_id), _nullable(m.group_instance_id), _string(m.client_id), _string(m.client_host),
                _I32.pack(m.rebalance_timeout_ms), _I32.pack(m.session_timeout_ms), _bytes(m.subscription),
                _bytes(m.assignment)]
    return b"".join(out)


def group_batch(group_id: str, sg: StoredGroup | None, timestamp: int) -> tuple[int, bytes]:
    """One v2 batch holding a group's metadata record (``None``: its tombstone)."""
    from kafka.record import MemoryRecordsBuilder  # late: kafka-python's codecs, see commit_batch

    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24)
    b.append(timestamp=timestamp, key=encode_group_key(group_id),
             value=None if sg is None else encode_group_value(sg), headers=[])
    b.close()
    return 1, bytes(b.buffer())


def commit_batch(group_id: str, offsets: Iterable[CommittedOffset], timestamp: int) -> tuple[int, bytes]:
    """One v2 batch of a commit's records: (record count, bytes)."""
    # imported here: kafka-python's package imports its whole client, half a
    # second every simulator and CLI process would pay without a group
    from kafka.record import MemoryRecordsBuilder  # late: kafka-python's codecs, see commit_batch

    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24)
    n = 0
    for c in offsets:
        b.append(timestamp=timestamp, key=encode_key(group_id, c.tp), value=encode_value(c, timestamp), headers=[])
        n += 1
    b.close()
    return n, bytes(b.buffer())


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, st: struct.Struct) -> Any:
        if self.pos + st.size > len(self.data):
            raise BadOffsetRecord("record shorter than its schema")
        v = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v

    def string(self) -> str:
        (n,) = self.take(_I16)
        if n < 0 or self.pos + n > len(self.data):
            raise BadOffsetRecord("bad string length")
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def nullable(self) -> str | None:
        (n,) = _I16.unpack_from(self.data, self.pos) if self.pos + 2 <= len(self.data) else (0,)
        if n == -1:
            self.pos += 2
            return None
        return self.string()

    def bytes_(self) -> bytes:
        (n,) = self.take(_I32)
        if n < 0:
            return b""
        if self.pos + n > len(self.data):
            raise BadOffsetRecord("bad bytes length")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


def decode_group_value(value: bytes) -> StoredGroup | None:
    """A GroupMetadataValue of versions 0-3, or None for a version this
    does not read (4, the flexible one, which Kafka 4 does not write)."""
    r = _Reader(value)
    (v,) = r.take(_I16)
    if not 0 <= v <= 3:
        return None
    protocol_type = r.string()
    (generation,) = r.take(_I32)
    protocol, leader = r.nullable(), r.nullable()
    ts = r.take(_I64)[0] if v >= 2 else -1
    (count,) = r.take(_I32)
    members = []
    for _ in range(max(count, 0)):
        mid = r.string()
        inst = r.nullable() if v >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance = r.take(_I32)[0] if v >= 1 else -1
        (session,) = r.take(_I32)
        members.append(StoredMember(mid, inst, client_id, client_host, rebalance, session, r.bytes_(), r.bytes_()))
    return StoredGroup(protocol_type, generation, protocol, leader, ts, tuple(members))


def decode_record(key: bytes, value: bytes | None) -> tuple[str, TopicPartition, CommittedOffset | None] | None:
    """(group, partition, committed offset or None for a tombstone), or None
    for a record that is not an offset commit (group metadata, version 2)."""
    r = _Reader(key)
    (version,) = r.take(_I16)
    if version not in (0, 1):
        return None
    group, topic = r.string(), r.string()
    tp = TopicPartition(topic, r.take(_I32)[0])
    if value is None:
        return group, tp, None
    v = _Reader(value)
    (vv,) = v.take(_I16)
    (offset,) = v.take(_I64)
    epoch = v.take(_I32)[0] if vv >= 3 else -1
    return group, tp, CommittedOffset(tp, offset, epoch, v.string())


def decode_batches(payloads: Iterable[Any]) -> Iterator[tuple[str, TopicPartition, CommittedOffset | None]]:
    """Every offset commit in a partition's batches, in log order."""
    for group, tp, value in decode_log(payloads):
        if tp is not None:
            yield group, tp, value  # type: ignore[misc]


Entry = tuple[str, TopicPartition | None, Any]


def decode_log(payloads: Iterable[Any]) -> Iterator[Entry]:
    """Every record of a partition's batches, in log order: an offset commit
    as (group, partition, committed offset or None for a tombstone), group
    metadata as (group, None, stored group or None for a tombstone). A
    payload that is not a v2 batch (a simulated one) is skipped, and so is a
    record of a kind or version this does not read."""
    from kafka.record import MemoryRecords  # late: kafka-python's codecs, see commit_batch

    for payload in payloads:
        if not isinstance(payload, (bytes, bytearray)):
            continue
        records = MemoryRecords(bytes(payload))
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            for rec in batch:
                if rec.key is None:
                    continue
                key = bytes(rec.key)
                value = None if rec.value is None else bytes(rec.value)
                if key[:2] == _I16.pack(GROUP_KEY_VERSION):
                    group = _Reader(key[2:]).string()
                    if value is None:
                        yield group, None, None
                    elif (sg := decode_group_value(value)) is not None:
                        yield group, None, sg
                    continue
                found = decode_record(key, value)
                if found is not None:
                    yield found
