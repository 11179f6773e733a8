"""A run directory as a zip, streamed and bounded.

The zip is written as it is sent: no temporary file (nothing to fill the
disk, nothing left behind by a client that goes away) and no whole archive
in memory (each file is read in pieces, each piece deflated and sent before
the next is read). What one request may cost is bounded before the first
byte goes out: the run's servable files are counted and sized first, and a
run over :class:`ZipLimits` is refused (413) in one line; a file that grows
while it is zipped (a running run's log) is cut at the size counted. At most
``concurrent`` zips are made at once; another request is answered 503 with
``Retry-After``, not queued behind them.
"""

from __future__ import annotations

import os
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .paths import servable

CHUNK = 256 * 1024
MiB = 1024 * 1024


@dataclass(frozen=True)
class ZipLimits:
    """What one zip may hold, and how many are made at once
    (``kraftwerk serve --zip-max-mib``)."""

    max_bytes: int = 2048 * MiB
    max_files: int = 20_000
    concurrent: int = 2


class TooLarge(Exception):
    """A run directory over the limits: the one-line reason."""


@dataclass(frozen=True)
class Entry:
    real: Path
    arcname: str
    size: int


def manifest(root: Path, d: Path, limits: ZipLimits) -> list[Entry]:
    """The files of ``d`` a reader may have (:func:`servable`, real path
    under ``root``: a symlink pointing out is left out, a symlinked directory
    not walked), with their sizes now; :class:`TooLarge` as soon as the count
    or the total passes a limit (the walk stops there)."""
    top = f"{d.parent.name}-{d.name}"
    out: list[Entry] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(d):
        dirnames[:] = sorted(n for n in dirnames if not os.path.islink(os.path.join(dirpath, n)))
        for n in sorted(filenames):
            p = Path(dirpath) / n
            real = p.resolve()
            if not real.is_relative_to(root) or not servable(real):
                continue
            try:
                size = real.stat().st_size
            except OSError:
                continue  # gone since the walk saw it
            total += size
            out.append(Entry(real, f"{top}/{p.relative_to(d).as_posix()}", size))
            if len(out) > limits.max_files:
                raise TooLarge(f"{d.name} holds more than {limits.max_files} files to zip; fetch them one by one")
            if total > limits.max_bytes:
                raise TooLarge(f"{d.name} holds more than {_amount(limits.max_bytes)} to zip; fetch its files "
                               f"one by one, or raise kraftwerk serve --zip-max-mib")
    return out


def _amount(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"


class _Sink:
    """Where the zip writer writes: kept until taken (an unseekable stream,
    so zipfile writes each file's sizes after its data)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def write(self, b: bytes) -> int:
        self.buf += b
        return len(b)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        out, self.buf = bytes(self.buf), bytearray()
        return out


def zip_chunks(entries: list[Entry]) -> Iterator[bytes]:
    """The zip of ``entries``, piece by piece; each file at most the size
    counted (a file gone since is left out)."""
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED, compresslevel=5) as z:  # type: ignore[call-overload]
        for e in entries:
            try:
                f = open(e.real, "rb")
            except OSError:
                continue
            with f:
                zi = zipfile.ZipInfo.from_file(e.real, e.arcname, strict_timestamps=False)  # before 1980: as of 1980
                zi.compress_type, zi.file_size = zipfile.ZIP_DEFLATED, e.size  # the size picks ZIP64 up front
                left = e.size
                with z.open(zi, "w") as w:
                    while left > 0 and (data := f.read(min(CHUNK, left))):
                        left -= len(data)
                        w.write(data)
                        if len(sink.buf) >= CHUNK // 4:
                            yield sink.take()
            if sink.buf:
                yield sink.take()
    yield sink.take()


class ZipGate:
    """The slots of the zips being made (a non-blocking semaphore)."""

    def __init__(self, limits: ZipLimits) -> None:
        self.limits = limits
        self._slots = threading.BoundedSemaphore(limits.concurrent)

    def enter(self) -> bool:
        return self._slots.acquire(blocking=False)

    def leave(self) -> None:
        self._slots.release()


class ZipResponse(StreamingResponse):
    """The streamed zip; its slot is given back and its files closed however
    the response ends (sent, client gone, cancelled)."""

    def __init__(self, chunks: Iterator[bytes], name: str, headers: dict[str, str], done: Callable[[], None]) -> None:
        disposition = f"attachment; filename*=utf-8''{quote(name)}"
        super().__init__(chunks, media_type="application/zip", headers={**headers, "Content-Disposition": disposition})
        self._chunks, self._done, self._ended = chunks, done, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.end()

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        close: Any = getattr(self._chunks, "close", None)
        try:
            if close is not None:
                close()  # the open file and the zip writer, now
        except ValueError:
            pass  # still running in its thread (cancelled mid-piece): it ends when that piece is done
        finally:
            self._done()
