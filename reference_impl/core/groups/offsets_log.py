"""Committed offsets as records of ``__consumer_offsets``.

Kafka keeps a group's committed offsets as records of its internal topic
``__consumer_offsets``, keyed by (group, topic, partition), so they are
replicated, elected and truncated exactly as any partition's records are,
and a new coordinator rebuilds them by reading the partition it now leads.
The record formats are Kafka's ``OffsetCommitKey`` (version 1: group, topic,
partition) and ``OffsetCommitValue`` (version 3: offset, leader epoch,
metadata, commit timestamp) from ``group-coordinator/src/main/resources/
common/message``; the batch is a v2 record batch built with kafka-python's
record codec, so the partition holds what any consumer of it can read.
Encoding and decoding are pure functions of bytes.
"""

from __future__ import annotations

import struct
from typing import Any, Final, Iterable, Iterator


from ..messages import TopicPartition
from .messages import CommittedOffset

OFFSETS_TOPIC: Final = "__consumer_offsets"
KEY_VERSION: Final = 1
VALUE_VERSION: Final = 3
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


def commit_batch(group_id: str, offsets: Iterable[CommittedOffset], timestamp: int) -> tuple[int, bytes]:
    """One v2 batch of a commit's records: (record count, bytes)."""
    # imported here: kafka-python's package imports its whole client, half a
    # second every simulator and CLI process would pay without a group
    from kafka.record import MemoryRecordsBuilder

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
    """Every offset commit in a partition's batches, in log order. A payload
    that is not a v2 batch (a simulated one) is skipped."""
    from kafka.record import MemoryRecords  # deferred: see commit_batch

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
                found = decode_record(bytes(rec.key), None if rec.value is None else bytes(rec.value))
                if found is not None:
                    yield found
