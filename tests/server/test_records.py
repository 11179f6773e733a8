"""v2 record batches: header-only handling, CRC validation, offset rewriting
(notes/kafka-wire.md, "Record batches")."""

from __future__ import annotations

import pytest
from helpers import v2_batch
from kafka.record.default_records import DefaultRecordBatch

from reference_impl.server.records import HEADER_SIZE, InvalidBatch, parse_header, rewrite, scan, split_batches


def test_header_carries_producer_fields_for_idempotence():
    h = parse_header(v2_batch([b"a", b"b", b"c"], producer_id=42, producer_epoch=3, base_sequence=17))
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.count) == (42, 3, 17, 3)


def test_rewrite_sets_base_offset_and_leader_epoch_and_keeps_crc_valid():
    raw = v2_batch([b"x" * 10, b"y"])
    out = rewrite(raw, 1234, 7)
    h = parse_header(out)
    assert (h.base_offset, h.leader_epoch) == (1234, 7)
    assert DefaultRecordBatch(out).validate_crc()
    assert out[HEADER_SIZE:] == raw[HEADER_SIZE:]


def test_rewrite_of_concatenated_batches_assigns_consecutive_offsets():
    raw = v2_batch([b"a", b"b"]) + v2_batch([b"c", b"d", b"e"])
    out = rewrite(raw, 100, 2)
    batches = split_batches(out)
    assert [h.base_offset for h, _ in batches] == [100, 102]
    assert all(h.leader_epoch == 2 for h, _ in batches)


def test_rewrite_returns_same_object_when_header_already_right():
    raw = rewrite(v2_batch([b"a"]), 5, 1)
    assert rewrite(raw, 5, 1) is raw


def test_split_rejects_bad_crc_as_corrupt_message():
    raw = bytearray(v2_batch([b"hello"]))
    raw[-1] ^= 0xFF
    with pytest.raises(InvalidBatch) as e:
        split_batches(bytes(raw))
    assert e.value.error == 2


def test_split_rejects_truncated_batch_and_wrong_magic():
    raw = v2_batch([b"hello"])
    with pytest.raises(InvalidBatch):
        split_batches(raw[:-3])
    bad = bytearray(raw)
    bad[16] = 1
    with pytest.raises(InvalidBatch):
        split_batches(bytes(bad))
    with pytest.raises(InvalidBatch):
        split_batches(b"")


def test_scan_stops_at_torn_tail_and_validates_crc_from_recovery_point():
    a, b = rewrite(v2_batch([b"a"]), 0, 0), rewrite(v2_batch([b"b"]), 1, 0)
    headers, valid = scan(a + b + b[:20])
    assert [h.base_offset for h, _ in headers] == [0, 1] and valid == len(a) + len(b)
    corrupt = bytearray(b)
    corrupt[-1] ^= 1
    headers, valid = scan(a + bytes(corrupt), validate_from=0)
    assert valid == len(a)
    # before the recovery point only headers are checked (Kafka's recovery)
    headers, valid = scan(a + bytes(corrupt), validate_from=len(a) + len(b))
    assert valid == len(a) + len(b)
