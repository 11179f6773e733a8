"""Kafka-like storage: segment files, checkpoint formats, recovery of a torn
tail after an unclean shutdown, page-cache vs power-loss semantics."""

from __future__ import annotations

import os

import pytest
from helpers import core_batch

from reference_impl.core.effects import FileDelete, FileWrite, Fsync, LogAppend, LogTruncate, LogTruncateFully
from reference_impl.core.messages import MetadataEntry, NoOpRecord, TopicPartition, TopicRecord
from reference_impl.core.storage import (
    CLEAN_SHUTDOWN,
    HW_CHECKPOINT,
    METADATA_LOG,
    QUORUM_STATE,
    CleanShutdown,
    LeaderEpochCheckpoint,
    OffsetCheckpoint,
    QuorumState,
)
from reference_impl.server.disk import DiskStore
from reference_impl.server.records import parse_header

TP = TopicPartition("orders", 0)


def _store(tmp_path, mode="os", **kw):
    s = DiskStore(str(tmp_path), mode, **kw)
    s.load()
    return s


def _seg(tmp_path, name="orders-0"):
    return tmp_path / name / "00000000000000000000.log"


def test_appends_land_in_kafka_named_segment_with_rewritten_offsets_and_epoch(tmp_path):
    s = _store(tmp_path)
    s.apply(LogAppend("orders-0", (core_batch(0, 3, [b"a", b"b"]), core_batch(2, 4, [b"c"]))))
    raw = _seg(tmp_path).read_bytes()
    h1 = parse_header(raw)
    h2 = parse_header(raw, h1.length)
    assert (h1.base_offset, h1.leader_epoch, h2.base_offset, h2.leader_epoch) == (0, 3, 2, 4)


def test_restart_returns_the_batches_and_log_start(tmp_path):
    s = _store(tmp_path)
    batches = (core_batch(0, 1, [b"a"]), core_batch(1, 1, [b"b", b"c"]))
    s.apply(LogAppend("orders-0", batches))
    s.close()
    st = DiskStore(str(tmp_path)).load()
    got = st.logs["orders-0"]
    assert [(b.base_offset, b.count, b.leader_epoch) for b in got] == [(0, 1, 1), (1, 2, 1)]
    assert st.log_start_offsets["orders-0"] == 0
    # the header's max timestamp comes back with each batch (ListOffsets by timestamp after a restart)
    assert [b.max_timestamp for b in got] == [1_700_000_000_000, 1_700_000_000_000]


def test_checkpoints_use_kafka_text_formats_and_read_back(tmp_path):
    s = _store(tmp_path)
    s.apply(FileWrite("orders-0/leader-epoch-checkpoint", LeaderEpochCheckpoint(((0, 0), (3, 120)))))
    s.apply(FileWrite(HW_CHECKPOINT, OffsetCheckpoint(((TP, 118), (TopicPartition("a-b", 2), 5)))))
    s.apply(FileWrite(CLEAN_SHUTDOWN, CleanShutdown(42)))
    s.apply(FileWrite(QUORUM_STATE, QuorumState(7, 2, 3)))
    assert (tmp_path / "orders-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 120\n"
    assert (tmp_path / HW_CHECKPOINT).read_text() == "0\n2\norders 0 118\na-b 2 5\n"
    st = DiskStore(str(tmp_path)).load()
    assert st.files["orders-0/leader-epoch-checkpoint"] == LeaderEpochCheckpoint(((0, 0), (3, 120)))
    assert st.files[HW_CHECKPOINT].offsets[1] == (TopicPartition("a-b", 2), 5)
    assert st.files[CLEAN_SHUTDOWN] == CleanShutdown(42)
    assert st.files[QUORUM_STATE] == QuorumState(7, 2, 3)


def test_truncate_removes_whole_batch_holding_the_offset(tmp_path):
    s = _store(tmp_path)
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a", b"b"]), core_batch(2, 1, [b"c", b"d"]))))
    s.apply(LogTruncate("orders-0", 3))
    s.close()
    got = DiskStore(str(tmp_path)).load().logs["orders-0"]
    assert [b.base_offset for b in got] == [0]


def test_truncate_fully_restarts_log_at_start_offset(tmp_path):
    s = _store(tmp_path)
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a"]),)))
    s.apply(LogTruncateFully("orders-0", 50))
    s.close()
    assert os.listdir(tmp_path / "orders-0") == ["00000000000000000050.log"]
    st = DiskStore(str(tmp_path)).load()
    assert st.logs["orders-0"] == [] and st.log_start_offsets["orders-0"] == 50


def test_segments_roll_and_truncation_crosses_segments(tmp_path):
    s = _store(tmp_path, segment_bytes=1024)
    for i in range(20):
        s.apply(LogAppend("orders-0", (core_batch(i * 2, 1, [b"x" * 100, b"y" * 100]),)))
    assert len(os.listdir(tmp_path / "orders-0")) > 2
    s.apply(LogTruncate("orders-0", 6))
    s.close()
    got = DiskStore(str(tmp_path)).load().logs["orders-0"]
    assert [b.base_offset for b in got] == [0, 2, 4]


def test_unclean_start_truncates_torn_tail(tmp_path):
    """Recovery scans from the recovery point and cuts a partial batch
    (seed 000: log recovery after an unclean shutdown)."""
    s = _store(tmp_path)
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a"]), core_batch(1, 1, [b"b"]))))
    s.close()
    seg = _seg(tmp_path)
    good = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(core_batch(2, 1, [b"c" * 50]).payload[:30])  # a torn write
    d = DiskStore(str(tmp_path))
    st = d.load()
    assert [b.base_offset for b in st.logs["orders-0"]] == [0, 1]
    assert seg.stat().st_size == good
    assert d.recovery[0].truncated_bytes == 30 and not d.was_clean


def test_unclean_start_drops_batches_with_bad_crc_after_recovery_point(tmp_path):
    s = _store(tmp_path)
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a"]), core_batch(1, 1, [b"bbbb"]), core_batch(2, 1, [b"c"]))))
    s.close()
    seg = _seg(tmp_path)
    raw = bytearray(seg.read_bytes())
    first = parse_header(raw).length
    raw[first + 70] ^= 0xFF  # inside batch 1's records
    seg.write_bytes(bytes(raw))
    st = DiskStore(str(tmp_path)).load()
    assert [b.base_offset for b in st.logs["orders-0"]] == [0]


def test_metadata_log_round_trips_and_recovers_torn_frame(tmp_path):
    s = _store(tmp_path)
    entries = (MetadataEntry(0, 1, TopicRecord("t", (("min.insync.replicas", "2"),))), MetadataEntry(1, 1, NoOpRecord()))
    s.apply(LogAppend(METADATA_LOG, entries))
    s.close()
    with open(_seg(tmp_path, METADATA_LOG), "ab") as f:
        f.write(b"\x00\x00\x00\x50garbage")
    st = DiskStore(str(tmp_path)).load()
    assert tuple(st.logs[METADATA_LOG]) == entries


def test_page_cache_survives_process_crash_without_fsync(tmp_path):
    """A SIGKILL loses nothing the OS already has: writes are os.write'n at once."""
    s = _store(tmp_path)
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a"]),)))
    st = DiskStore(str(tmp_path)).load()  # no close, no fsync
    assert len(st.logs["orders-0"]) == 1


def test_power_loss_drops_unfsynced_appends_and_files(tmp_path):
    s = _store(tmp_path, "memory-cache")
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a"]),)))
    s.apply(FileWrite("orders-0/leader-epoch-checkpoint", LeaderEpochCheckpoint(((1, 0),))))
    s.apply(Fsync(None))
    s.apply(LogAppend("orders-0", (core_batch(1, 1, [b"b"]),)))
    s.apply(FileWrite("orders-0/leader-epoch-checkpoint", LeaderEpochCheckpoint(((1, 0), (2, 1)))))
    s.apply(FileWrite(HW_CHECKPOINT, OffsetCheckpoint(((TP, 2),))))
    s.power_loss()
    st = DiskStore(str(tmp_path)).load()
    assert [b.base_offset for b in st.logs["orders-0"]] == [0]
    assert st.files["orders-0/leader-epoch-checkpoint"] == LeaderEpochCheckpoint(((1, 0),))
    assert HW_CHECKPOINT not in st.files


def test_power_loss_keeps_every_append_made_before_an_fsync(tmp_path):
    s = _store(tmp_path, "memory-cache")
    for i in range(3):
        s.apply(LogAppend("orders-0", (core_batch(i, 1, [b"v%d" % i]),)))
        s.apply(Fsync("orders-0"))
    s.apply(LogAppend("orders-0", (core_batch(3, 1, [b"lost"]),)))
    s.power_loss()
    st = DiskStore(str(tmp_path)).load()
    assert [b.base_offset for b in st.logs["orders-0"]] == [0, 1, 2]


def test_power_loss_restores_an_unfsynced_truncation(tmp_path):
    s = _store(tmp_path, "memory-cache")
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a"]), core_batch(1, 1, [b"b"]), core_batch(2, 1, [b"c"]))))
    s.apply(Fsync("orders-0"))
    s.apply(LogTruncate("orders-0", 2))
    s.apply(LogTruncate("orders-0", 1))
    s.apply(LogAppend("orders-0", (core_batch(1, 2, [b"new"]),)))
    s.power_loss()
    st = DiskStore(str(tmp_path)).load()
    assert [(b.base_offset, b.leader_epoch) for b in st.logs["orders-0"]] == [(0, 1), (1, 1), (2, 1)]


def test_power_loss_restores_segments_deleted_before_fsync(tmp_path):
    s = _store(tmp_path, "memory-cache")
    s.apply(LogAppend("orders-0", (core_batch(0, 1, [b"a"]),)))
    s.apply(Fsync(None))
    s.apply(LogTruncateFully("orders-0", 10))
    s.apply(FileDelete("orders-0/leader-epoch-checkpoint"))
    s.power_loss()
    st = DiskStore(str(tmp_path)).load()
    assert [b.base_offset for b in st.logs["orders-0"]] == [0]


def test_power_loss_refused_in_os_mode(tmp_path):
    s = _store(tmp_path)
    with pytest.raises(RuntimeError):
        s.power_loss()


def test_file_paths_cannot_escape_data_dir(tmp_path):
    s = _store(tmp_path)
    with pytest.raises(ValueError):
        s.apply(FileWrite("../evil", CleanShutdown(1)))
