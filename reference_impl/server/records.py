"""Kafka v2 record batches, touched only at the header.

The broker decodes individual records only to answer ListOffsets by
timestamp, in the one batch the core found (:func:`find_record`); on the
write and read paths (librdkafka packs thousands of records per batch, so
per-record work would dominate) it reads the 61-byte
batch header, validates the CRC32C with kafka-python's
``DefaultRecordBatch.validate_crc()`` (fast with the ``crc32c`` package), and
rewrites ``baseOffset`` (bytes 0-7) and ``PartitionLeaderEpoch`` (bytes 12-15)
on append. Both lie outside the CRC, so the client's CRC stays valid
(notes/kafka-wire.md, "Record batches").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch

#: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
#: crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
#: maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence int32,
#: recordsCount int32
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
#: bytes before batchLength's payload starts (baseOffset + batchLength)
LOG_OVERHEAD = 12
_BASE_AND_LEN = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")


class InvalidBatch(ValueError):
    """A batch that is not a well-formed v2 batch; ``error`` is Kafka's code."""

    def __init__(self, message: str, error: int = 2) -> None:
        super().__init__(message)
        self.error = error  # 2 CORRUPT_MESSAGE, 87 INVALID_RECORD


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The parts of a v2 batch header the broker cares about."""

    base_offset: int
    length: int  # total size in bytes including the 12-byte log overhead
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def count(self) -> int:
        """Offsets the batch occupies (lastOffsetDelta + 1)."""
        return self.last_offset_delta + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidBatch("record batch shorter than its header")
    (base, blen, epoch, magic, crc, attrs, lod, _bt, mt, pid, pepoch, bseq, n) = HEADER.unpack_from(buf, pos)
    if magic != 2:
        raise InvalidBatch(f"unsupported record batch magic {magic}", 2)
    if blen < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatch(f"record batch length {blen} shorter than a header")
    if lod < 0 or n < 0:
        raise InvalidBatch("negative record count", 87)
    return BatchHeader(base, blen + LOG_OVERHEAD, epoch, magic, crc, attrs, lod, mt, pid, pepoch, bseq, n)


def split_batches(buf: bytes, validate_crc: bool = True) -> list[tuple[BatchHeader, bytes]]:
    """Split a produce request's records into v2 batches, validating each.

    Raises :class:`InvalidBatch` for a truncated, oversized or corrupt batch —
    the whole request is rejected (Kafka: CORRUPT_MESSAGE / INVALID_RECORD).
    """
    out: list[tuple[BatchHeader, bytes]] = []
    pos, n = 0, len(buf)
    if n == 0:
        raise InvalidBatch("empty record set", 87)
    while pos < n:
        h = parse_header(buf, pos)
        end = pos + h.length
        if end > n:
            raise InvalidBatch("record batch truncated")
        chunk = bytes(buf[pos:end]) if (pos or end != n) else bytes(buf)
        if validate_crc and not DefaultRecordBatch(chunk).validate_crc():
            raise InvalidBatch("record batch CRC mismatch", 2)
        out.append((h, chunk))
        pos = end
    return out


def rewrite(payload: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """Return ``payload`` (one or more concatenated v2 batches) with each
    batch's baseOffset and PartitionLeaderEpoch set for its place in the log.

    A payload that already carries the right values is returned as is, so
    re-serving a stored batch costs nothing.
    """
    first_base, first_len = _BASE_AND_LEN.unpack_from(payload, 0)
    if first_len + LOG_OVERHEAD == len(payload):
        if first_base == base_offset and _EPOCH.unpack_from(payload, 12)[0] == leader_epoch:
            return payload
        b = bytearray(payload)
        _OFFSET.pack_into(b, 0, base_offset)
        _EPOCH.pack_into(b, 12, leader_epoch)
        return bytes(b)
    b = bytearray(payload)
    pos, off = 0, base_offset
    while pos < len(b):
        _, blen = _BASE_AND_LEN.unpack_from(b, pos)
        lod = struct.unpack_from(">i", b, pos + 23)[0]
        _OFFSET.pack_into(b, pos, off)
        _EPOCH.pack_into(b, pos + 12, leader_epoch)
        off += lod + 1
        pos += blen + LOG_OVERHEAD
    return bytes(b)


def scan(buf: bytes | memoryview, validate_from: int = 0) -> tuple[list[tuple[BatchHeader, int]], int]:
    """Walk a segment's bytes: return ``[(header, position)]`` of whole, valid
    batches and the byte length of that valid prefix.

    Batches at byte positions >= ``validate_from`` also have their CRC checked
    (Kafka's recovery validates from the recovery point on). The scan stops at
    the first short, malformed or corrupt batch: that is the torn tail.
    """
    out: list[tuple[BatchHeader, int]] = []
    pos, n = 0, len(buf)
    while pos < n:
        try:
            h = parse_header(buf, pos)
        except InvalidBatch:
            break
        end = pos + h.length
        if end > n:
            break
        if pos >= validate_from and not DefaultRecordBatch(bytes(buf[pos:end])).validate_crc():
            break
        out.append((h, pos))
        pos = end
    return out, pos


def find_record(payload: bytes, base_offset: int, leader_epoch: int, target: int | None,
                max_timestamp: int) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the record ListOffsets answers inside the
    core batch at ``base_offset`` (one or more v2 batches): the first record
    whose timestamp is at least ``target`` (LogSegment.findOffsetByTimestamp),
    or with ``target`` None the first holding ``max_timestamp``
    (RecordBatch.offsetOfMaxTimestamp). None when no record qualifies."""
    data = rewrite(payload, base_offset, leader_epoch)
    pos = 0
    while pos < len(data):
        h = parse_header(data, pos)
        for rec in DefaultRecordBatch(data[pos:pos + h.length]):
            ts = rec.timestamp
            if (ts >= target) if target is not None else (ts == max_timestamp):
                return rec.offset, ts
        pos += h.length
    return None
