"""Kafka's on-disk text formats for the small files of ``core/storage.py``.

* ``leader-epoch-checkpoint``: version line ``0``, entry count, then
  ``epoch start_offset`` lines (Kafka's LeaderEpochCheckpointFile).
* ``replication-offset-checkpoint`` / ``recovery-point-offset-checkpoint``:
  version ``0``, count, ``topic partition offset`` lines (OffsetCheckpointFile).
* ``clean-shutdown``: ``{"version":0,"brokerEpoch":N}`` (Kafka's
  CleanShutdownFileHandler, KIP-966).
* ``quorum-state``: Kafka's JSON (leaderId, leaderEpoch, votedId, data_version).

Any other dataclass a node writes is stored as a msgpack document through the
RPC registry, so the runtime never loses a file it does not know.
"""

from __future__ import annotations

import json
import os
from typing import Any

from reference_impl.core.messages import TopicPartition
from reference_impl.core.storage import CleanShutdown, LeaderEpochCheckpoint, OffsetCheckpoint, QuorumState

from .codec import REGISTRY


class FileFormatError(ValueError):
    pass


def encode(data: Any) -> bytes:
    if isinstance(data, LeaderEpochCheckpoint):
        lines = ["0", str(len(data.entries))] + [f"{e} {o}" for e, o in data.entries]
        return ("\n".join(lines) + "\n").encode()
    if isinstance(data, OffsetCheckpoint):
        lines = ["0", str(len(data.offsets))] + [f"{tp.topic} {tp.partition} {o}" for tp, o in data.offsets]
        return ("\n".join(lines) + "\n").encode()
    if isinstance(data, CleanShutdown):
        return json.dumps({"version": 0, "brokerEpoch": data.broker_epoch}).encode()
    if isinstance(data, QuorumState):
        return json.dumps(
            {"leaderId": data.leader_id, "leaderEpoch": data.epoch, "votedId": data.voted_for, "data_version": 0}
        ).encode()
    if isinstance(data, (bytes, bytearray)):
        return b"RAW\n" + bytes(data)
    return b"MSGPACK\n" + REGISTRY.dumps(data)


def decode(name: str, raw: bytes) -> Any:
    """Parse a file written by :func:`encode`; ``name`` is its base name."""
    try:
        if raw.startswith(b"MSGPACK\n"):
            return REGISTRY.loads(raw[8:])
        if raw.startswith(b"RAW\n"):
            return raw[4:]
        if name == "leader-epoch-checkpoint":
            lines = _checkpoint_lines(raw)
            return LeaderEpochCheckpoint(tuple((int(a), int(b)) for a, b in (ln.split() for ln in lines)))
        if name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
            lines = _checkpoint_lines(raw)
            out = []
            for ln in lines:
                topic, part, off = ln.rsplit(" ", 2)
                out.append((TopicPartition(topic, int(part)), int(off)))
            return OffsetCheckpoint(tuple(out))
        if name == "clean-shutdown":
            return CleanShutdown(int(json.loads(raw)["brokerEpoch"]))
        if name == "quorum-state":
            d = json.loads(raw)
            return QuorumState(epoch=int(d["leaderEpoch"]), voted_for=int(d["votedId"]), leader_id=int(d["leaderId"]))
    except (ValueError, KeyError, TypeError) as e:
        raise FileFormatError(f"{name}: {e}") from None
    raise FileFormatError(f"{name}: unknown file format")


def _checkpoint_lines(raw: bytes) -> list[str]:
    lines = raw.decode().splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError("bad version line")
    n = int(lines[1])
    body = [ln for ln in lines[2:] if ln.strip()]
    if len(body) != n:
        raise ValueError(f"expected {n} entries, found {len(body)}")
    return body


def write_atomic(path: str, data: bytes, fsync: bool = False) -> None:
    """Replace ``path`` by writing a temporary file and renaming it."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if fsync:
            os.fsync(fd)
    except OSError:
        os.close(fd)
        os.unlink(tmp)  # never let a short file replace a whole one (disk full)
        raise
    os.close(fd)
    os.replace(tmp, path)


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written: a full disk makes a write
    short first and fail (ENOSPC) only on the next call, so one unchecked
    ``os.write`` could leave half a batch behind a state that believes in it."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(28, "No space left on device (short write)")
        view = view[n:]
