"""Kafka-like storage for one node: segment files, checkpoints, recovery.

Layout under ``--data-dir`` (names fixed by ``core/storage.py``):

* ``<topic>-<partition>/00000000000000000000.log`` — segment files of v2
  record batches exactly as clients sent them, with baseOffset and
  PartitionLeaderEpoch rewritten; a segment is named by its first offset.
* ``__cluster_metadata-0/*.log`` — the metadata log: frames of
  ``[length u32][crc32c u32][msgpack MetadataEntry]``.
* small files (checkpoints, ``clean-shutdown``, ``quorum-state``) in Kafka's
  text formats (:mod:`.files`), replaced atomically.

Page-cache semantics: writes go to the OS with ``os.write`` and only an
``Fsync`` effect calls ``os.fsync``. A SIGKILL therefore loses nothing the OS
already has (like a process crash on Kafka).

``memory-cache`` mode additionally remembers, in process memory, what each
file looked like at its last fsync. :meth:`DiskStore.power_loss` puts every
file back to that state (un-fsynced appends cut off, truncated tails restored,
un-fsynced small files reverted) — the harness's *lose-unfsynced* fault asks
for it through the control endpoint and then SIGKILLs the process.

Recovery (Kafka's LogManager/LogLoader): on start every segment is scanned;
after an unclean shutdown (no ``clean-shutdown`` marker) batches from the
recovery point on also get their CRC checked. The scan stops at the first
short or corrupt batch and the torn tail is truncated away.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import crc32c as _crc32c

from reference_impl.core.effects import FileDelete, FileWrite, Fsync, LogAppend, LogTruncate, LogTruncateFully
from reference_impl.core.messages import Batch, MetadataEntry
from reference_impl.core.storage import (
    CLEAN_SHUTDOWN,
    METADATA_LOG,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpoint,
    StoredState,
)

from . import files as fileformats
from .codec import REGISTRY
from .records import rewrite, scan

log = logging.getLogger("kraftwerk.disk")

SEGMENT_SUFFIX = ".log"
#: files of the runtime itself that are not node state
RUNTIME_FILES = {"trace.jsonl", "node.log", "node.pid", "control.json"}
_META_HDR = struct.Struct(">II")


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


@dataclass
class _Track:
    """What a file looked like at its last fsync (memory-cache mode)."""

    existed: bool
    durable_len: int
    #: bytes [saved_at, durable_len) that a truncation removed before an fsync
    saved_at: int = -1
    saved: bytes = b""


@dataclass
class _Entry:
    first: int  # first offset
    next: int  # next offset after the entry
    pos: int  # byte position in its segment


@dataclass
class _Segment:
    base: int
    path: str
    size: int = 0
    entries: list[_Entry] = field(default_factory=list)


@dataclass
class RecoveryReport:
    log: str
    clean: bool
    entries: int
    truncated_bytes: int = 0
    dropped_segments: int = 0


class SegmentLog:
    """One append-only log in a directory of segment files."""

    def __init__(self, store: "DiskStore", name: str) -> None:
        self.store = store
        self.name = name
        self.dir = store._log_dir(name)
        self.metadata = name == METADATA_LOG
        self.segments: list[_Segment] = []
        self._fd: int | None = None

    # -- encoding -----------------------------------------------------------

    def _encode(self, entry: Any) -> tuple[bytes, int, int]:
        if self.metadata:
            body = REGISTRY.dumps(entry)
            return _META_HDR.pack(len(body), _crc32c.crc32c(body)) + body, entry.offset, entry.offset + 1
        payload = rewrite(entry.payload, entry.base_offset, entry.leader_epoch)
        return payload, entry.base_offset, entry.base_offset + entry.count

    def _decode_segment(self, buf: bytes, validate_from_offset: int | None) -> tuple[list[Any], list[_Entry], int]:
        """Entries, index and valid length of one segment's bytes."""
        objs: list[Any] = []
        idx: list[_Entry] = []
        if self.metadata:
            pos, n = 0, len(buf)
            while pos + 8 <= n:
                ln, crc = _META_HDR.unpack_from(buf, pos)
                end = pos + 8 + ln
                if end > n or _crc32c.crc32c(buf[pos + 8 : end]) != crc:
                    break
                try:
                    e = REGISTRY.loads(buf[pos + 8 : end])
                except ValueError:
                    break
                if not isinstance(e, MetadataEntry):
                    break
                objs.append(e)
                idx.append(_Entry(e.offset, e.offset + 1, pos))
                pos = end
            return objs, idx, pos
        validate_pos = 0 if validate_from_offset is None else None
        if validate_from_offset is not None:
            # CRC-check batches from the recovery point on: find its byte position
            headers, _ = scan(buf, validate_from=len(buf) + 1)
            validate_pos = len(buf) + 1
            for h, p in headers:
                if h.base_offset + h.count > validate_from_offset:
                    validate_pos = p
                    break
        headers, valid = scan(buf, validate_from=validate_pos)
        for h, p in headers:
            payload = bytes(buf[p : p + h.length])
            objs.append(
                Batch(
                    base_offset=h.base_offset,
                    leader_epoch=h.leader_epoch,
                    count=h.count,
                    payload=payload,
                    producer_id=h.producer_id,
                    producer_epoch=h.producer_epoch,
                    base_sequence=h.base_sequence,
                    max_timestamp=h.max_timestamp,
                )
            )
            idx.append(_Entry(h.base_offset, h.base_offset + h.count, p))
        return objs, idx, valid

    # -- loading --------------------------------------------------------------

    def load(self, clean: bool, recovery_point: int) -> tuple[list[Any], int, RecoveryReport]:
        os.makedirs(self.dir, exist_ok=True)
        names = sorted(n for n in os.listdir(self.dir) if n.endswith(SEGMENT_SUFFIX))
        for n in os.listdir(self.dir):
            if n.endswith(".deleted") or n.endswith(".tmp"):
                os.unlink(os.path.join(self.dir, n))
        entries: list[Any] = []
        report = RecoveryReport(self.name, clean, 0)
        torn = False
        for n in names:
            path = os.path.join(self.dir, n)
            try:
                base = int(n[: -len(SEGMENT_SUFFIX)])
            except ValueError:
                continue
            if torn:  # everything after a torn segment is unreachable
                report.dropped_segments += 1
                os.unlink(path)
                continue
            with open(path, "rb") as f:
                buf = f.read()
            objs, idx, valid = self._decode_segment(buf, None if clean else recovery_point)
            if valid < len(buf):
                report.truncated_bytes += len(buf) - valid
                os.truncate(path, valid)
                torn = True
            seg = _Segment(base, path, valid, idx)
            self.segments.append(seg)
            entries.extend(objs)
            self.store._track_existing(path, valid)
        if not self.segments:
            self._new_segment(0)
        start = self.segments[0].base
        if self.segments[0].entries:
            start = min(start, self.segments[0].entries[0].first)
        report.entries = len(entries)
        return entries, start, report

    # -- writing --------------------------------------------------------------

    def _new_segment(self, base: int) -> _Segment:
        path = os.path.join(self.dir, segment_name(base))
        self.store._track_new(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        seg = _Segment(base, path, 0, [])
        self.segments.append(seg)
        self._close_fd()
        return seg

    def _active_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.segments[-1].path, os.O_WRONLY | os.O_APPEND)
        return self._fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, entries: tuple[Any, ...]) -> None:
        if not entries:
            return
        seg = self.segments[-1]
        if seg.size >= self.store.segment_bytes and seg.entries:
            seg = self._new_segment(self._encode(entries[0])[1])
        chunks = []
        pos = seg.size
        for e in entries:
            data, first, nxt = self._encode(e)
            seg.entries.append(_Entry(first, nxt, pos))
            pos += len(data)
            chunks.append(data)
        blob = b"".join(chunks)
        try:
            fileformats.write_all(self._active_fd(), blob)
        except OSError:
            # what reached the file is a torn tail: recovery truncates it; the
            # index must not claim these entries
            del seg.entries[len(seg.entries) - len(entries):]
            self.store._dirty.add(seg.path)
            raise
        seg.size = pos
        self.store._dirty.add(seg.path)

    def truncate(self, offset: int) -> None:
        """Remove every entry that reaches ``offset`` or beyond (Kafka truncates
        whole batches: the batch holding ``offset`` goes too)."""
        while self.segments:
            seg = self.segments[-1]
            keep = len(seg.entries)
            while keep > 0 and seg.entries[keep - 1].next > offset:
                keep -= 1
            if keep == 0 and len(self.segments) > 1 and (not seg.entries or seg.entries[0].next > offset):
                self._close_fd()
                self.store._remove(seg.path)
                self.segments.pop()
                continue
            if keep < len(seg.entries):
                new_size = seg.entries[keep].pos
                self._close_fd()
                self.store._truncate(seg.path, new_size)
                del seg.entries[keep:]
                seg.size = new_size
            break

    def truncate_fully(self, start_offset: int) -> None:
        self._close_fd()
        for seg in self.segments:
            self.store._remove(seg.path)
        self.segments = []
        self._new_segment(start_offset)

    def fsync(self) -> None:
        self._close_fd()
        for seg in self.segments:
            if seg.path in self.store._dirty:
                fd = os.open(seg.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self.store._made_durable(seg.path)
        self.store._fsync_dir(self.dir)

    def close(self) -> None:
        self._close_fd()


class DiskStore:
    """Carries out a node's log and file effects on a data directory."""

    def __init__(self, root: str, mode: str = "os", segment_bytes: int = 64 * 1024 * 1024) -> None:
        if mode not in ("os", "memory-cache"):
            raise ValueError(f"unknown storage mode {mode!r} (os, memory-cache)")
        self.root = os.path.abspath(root)
        self.mode = mode
        self.segment_bytes = segment_bytes
        self.logs: dict[str, SegmentLog] = {}
        self.fsyncs = 0
        #: memory-cache mode: per path, its state at the last fsync
        self._tracks: dict[str, _Track] = {}
        #: paths written since their last fsync
        self._dirty: set[str] = set()
        self._deleted: dict[str, str] = {}  # original path -> parked path (memory-cache)
        self.recovery: list[RecoveryReport] = []
        self.was_clean = False
        os.makedirs(self.root, exist_ok=True)

    # -- memory-cache bookkeeping ------------------------------------------

    def _track_existing(self, path: str, size: int) -> None:
        if self.mode == "memory-cache":
            self._tracks[path] = _Track(True, size)

    def _track_new(self, path: str) -> None:
        self._dirty.add(path)
        if self.mode == "memory-cache" and path not in self._tracks:
            self._tracks[path] = _Track(os.path.exists(path), os.path.getsize(path) if os.path.exists(path) else 0)

    def _truncate(self, path: str, size: int) -> None:
        self._dirty.add(path)
        t = self._tracks.get(path)
        if t is not None and t.existed and size < t.durable_len:
            lo = size
            hi = t.durable_len if t.saved_at < 0 else t.saved_at
            if lo < hi:
                with open(path, "rb") as f:
                    f.seek(lo)
                    head = f.read(hi - lo)
                t.saved = head + t.saved
                t.saved_at = lo
        os.truncate(path, size)

    def _remove(self, path: str) -> None:
        if self.mode == "memory-cache" and self._tracks.get(path, _Track(False, 0)).existed:
            parked = path + ".deleted"
            os.replace(path, parked)
            self._deleted[path] = parked
        else:
            os.unlink(path)
            self._tracks.pop(path, None)
        self._dirty.discard(path)

    def _made_durable(self, path: str) -> None:
        self._dirty.discard(path)
        self.fsyncs += 1
        if self.mode == "memory-cache":
            self._tracks[path] = _Track(os.path.exists(path), os.path.getsize(path) if os.path.exists(path) else 0)

    def _fsync_dir(self, d: str) -> None:
        if self.mode == "memory-cache":
            for orig, parked in list(self._deleted.items()):
                if os.path.dirname(orig) == d:
                    os.unlink(parked)
                    del self._deleted[orig]
                    self._tracks.pop(orig, None)
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- loading -------------------------------------------------------------

    def load(self) -> StoredState:
        """Read what survived, recovering logs, and return it for the node."""
        st = StoredState()
        # small files first: the clean-shutdown marker and recovery points steer log recovery
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root)
            for n in filenames:
                if n.endswith((SEGMENT_SUFFIX, ".tmp", ".deleted")) or (rel_dir == "." and n in RUNTIME_FILES):
                    continue
                full = os.path.join(dirpath, n)
                rel = n if rel_dir == "." else f"{rel_dir}/{n}"
                with open(full, "rb") as f:
                    raw = f.read()
                try:
                    st.files[rel] = fileformats.decode(n, raw)
                except fileformats.FileFormatError as e:
                    log.warning("ignoring unreadable file %s: %s", rel, e)
                    continue
                self._track_existing_file(full, raw)
        self.was_clean = CLEAN_SHUTDOWN in st.files
        recovery_points: dict[str, int] = {}
        rp = st.files.get(RECOVERY_POINT_CHECKPOINT)
        if isinstance(rp, OffsetCheckpoint):
            recovery_points = {str(tp): off for tp, off in rp.offsets}
        for name in sorted(os.listdir(self.root)):
            d = os.path.join(self.root, name)
            if not os.path.isdir(d) or not any(n.endswith(SEGMENT_SUFFIX) for n in os.listdir(d)):
                continue
            lg = SegmentLog(self, name)
            entries, start, report = lg.load(self.was_clean, recovery_points.get(name, 0))
            self.logs[name] = lg
            st.logs[name] = entries
            st.log_start_offsets[name] = start
            self.recovery.append(report)
            if report.truncated_bytes or report.dropped_segments:
                log.warning(
                    "recovered %s: truncated %d torn bytes, dropped %d segments",
                    name,
                    report.truncated_bytes,
                    report.dropped_segments,
                )
        return st

    def _track_existing_file(self, full: str, raw: bytes) -> None:
        if self.mode == "memory-cache":
            self._tracks[full] = _Track(True, len(raw), saved_at=0, saved=raw)

    # -- effects ------------------------------------------------------------

    def log(self, name: str) -> SegmentLog:
        lg = self.logs.get(name)
        if lg is None:
            lg = SegmentLog(self, name)
            os.makedirs(lg.dir, exist_ok=True)
            lg._new_segment(0)
            self.logs[name] = lg
        return lg

    def apply(self, eff: Any) -> None:
        if isinstance(eff, LogAppend):
            self.log(eff.log).append(eff.entries)
        elif isinstance(eff, LogTruncate):
            self.log(eff.log).truncate(eff.offset)
        elif isinstance(eff, LogTruncateFully):
            self.log(eff.log).truncate_fully(eff.start_offset)
        elif isinstance(eff, FileWrite):
            self.write_file(eff.path, eff.data)
        elif isinstance(eff, FileDelete):
            self.delete_file(eff.path)
        elif isinstance(eff, Fsync):
            self.fsync(eff.target)
        else:
            raise TypeError(f"not a storage effect: {eff!r}")

    def _path(self, rel: str) -> str:
        """Every path the store touches goes through here or :meth:`_log_dir`:
        inside the data directory, whatever a name from the wire says."""
        if not isinstance(rel, str) or not rel or "\0" in rel or os.path.isabs(rel):
            raise ValueError(f"file path {rel!r} escapes the data directory")
        p = os.path.normpath(os.path.join(self.root, rel))
        if not p.startswith(self.root + os.sep):
            raise ValueError(f"file path {rel!r} escapes the data directory")
        return p

    def _log_dir(self, name: str) -> str:
        """A log's directory: exactly one level below the data directory (a
        ``/`` would nest it where a restart never looks)."""
        if not isinstance(name, str) or name in ("", ".", "..") or os.sep in name or (os.altsep or os.sep) in name:
            raise ValueError(f"log name {name!r} is not a single directory name")
        return self._path(name)

    def write_file(self, rel: str, data: Any) -> None:
        p = self._path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if self.mode == "memory-cache" and p not in self._tracks:
            self._tracks[p] = _Track(False, 0)
        fileformats.write_atomic(p, fileformats.encode(data))
        self._dirty.add(p)

    def delete_file(self, rel: str) -> None:
        p = self._path(rel)
        if os.path.exists(p):
            os.unlink(p)
            self._dirty.add(p)

    def fsync(self, target: str | None = None) -> None:
        if target is None:
            for lg in self.logs.values():
                lg.fsync()
            for p in list(self._dirty):
                self._fsync_file(p)
            return
        if target in self.logs:
            self.logs[target].fsync()
            return
        self._fsync_file(self._path(target))

    def _fsync_file(self, p: str) -> None:
        if os.path.exists(p):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._fsync_dir(os.path.dirname(p))
        if self.mode == "memory-cache":
            raw = open(p, "rb").read() if os.path.exists(p) else b""
            self._tracks[p] = _Track(os.path.exists(p), len(raw), saved_at=0, saved=raw)
        self._dirty.discard(p)
        self.fsyncs += 1

    # -- faults ---------------------------------------------------------------

    def power_loss(self) -> int:
        """Put every file back to its state at its last fsync (memory-cache
        mode only). Returns how many files were changed. The caller must exit
        immediately afterwards without writing anything else."""
        if self.mode != "memory-cache":
            raise RuntimeError("power loss needs --storage-mode=memory-cache")
        for lg in self.logs.values():
            lg.close()
        changed = 0
        for orig, parked in list(self._deleted.items()):
            os.replace(parked, orig)
            changed += 1
        for p, t in self._tracks.items():
            is_log = p.endswith(SEGMENT_SUFFIX)
            exists = os.path.exists(p)
            if not t.existed:
                if exists:
                    os.unlink(p)
                    changed += 1
                continue
            if not is_log:  # small file: restore the durable content
                cur = open(p, "rb").read() if exists else None
                if cur != t.saved:
                    fileformats.write_atomic(p, t.saved)
                    changed += 1
                continue
            size = os.path.getsize(p) if exists else 0
            if t.saved_at >= 0:
                with open(p, "r+b" if exists else "wb") as f:
                    f.truncate(t.saved_at)
                    f.seek(t.saved_at)
                    f.write(t.saved)
                changed += 1
            elif size != t.durable_len:
                os.truncate(p, min(size, t.durable_len))
                changed += 1
        # files written but never tracked (created after start, not fsynced)
        return changed

    def close(self) -> None:
        for lg in self.logs.values():
            lg.close()
