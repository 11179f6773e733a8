"""JSONL histories: one operation per line, streamed and flushed by writers so
that a crash of the writer loses at most the line it was writing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Iterable, Iterator

from .op import HistoryError, Op


def _dumps(op: Op) -> str:
    return json.dumps(op.to_dict(), separators=(",", ":"), sort_keys=False)


class JsonlWriter:
    """Append operations to a JSONL file, flushing each line and fsyncing every
    ``fsync_every`` operations (and on close)."""

    def __init__(self, path: str | os.PathLike[str], fsync_every: int = 200) -> None:
        self.path = Path(path)
        self._f: IO[str] = open(self.path, "a", encoding="utf-8")
        self._fsync_every = max(1, fsync_every)
        self._pending = 0

    def write(self, op: Op) -> None:
        self._f.write(_dumps(op) + "\n")
        self._f.flush()
        self._pending += 1
        if self._pending >= self._fsync_every:
            os.fsync(self._f.fileno())
            self._pending = 0

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl(path: str | os.PathLike[str], ops: Iterable[Op]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for op in ops:
            f.write(_dumps(op) + "\n")


def iter_jsonl(path: str | os.PathLike[str], warnings: list[str] | None = None) -> Iterator[Op]:
    """Yield operations. A truncated *last* line (a crashed writer) is skipped
    and reported in ``warnings``; a malformed line elsewhere raises
    :class:`HistoryError` naming ``file:line``."""
    p = Path(path)
    with open(p, "r", encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    n = len(lines)
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            if i == n and not line.endswith("\n"):
                if warnings is not None:
                    warnings.append(f"{p}:{i}: truncated last line ignored (writer crashed?)")
                return
            raise HistoryError(f"{p}:{i}: not valid JSON ({e.msg})") from None
        if not isinstance(d, dict):
            raise HistoryError(f"{p}:{i}: expected a JSON object")
        op = Op.from_dict(d, where=f"{p}:{i}")
        yield op


def read_jsonl(path: str | os.PathLike[str], warnings: list[str] | None = None) -> list[Op]:
    ops = list(iter_jsonl(path, warnings))
    for i, op in enumerate(ops):
        if op.index < 0:
            op.index = i
    return ops
