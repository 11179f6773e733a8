"""What a history is read from, and the numbers it may hold.

A history is untrusted input (``kraftwerk check`` reads whatever it is
given), so before any reader takes it:

* it is a regular file: a device (``/dev/zero`` never ends), a FIFO (it
  blocks until someone writes) or a directory is refused, whatever symlink
  led to it, and a FIFO is opened without waiting for a writer
  (:func:`open_regular`);
* it is at most :data:`MAX_BYTES` long unless the caller raises the bound
  (``kraftwerk check --max-history-bytes``): the EDN reader and the models
  other than the queue's hold a whole history in memory (:func:`check_size`);
* no JSONL line is longer than :data:`MAX_LINE` (an operation is a few
  hundred bytes; a final read of a big key some hundred kilobytes);
* every number is a number: ``NaN``, ``Infinity`` and a float that
  overflows a double (``1e999``) are refused, in JSONL and EDN alike
  (:func:`finite`), as are operations whose ``time``, ``index`` or
  ``process`` have the wrong type (:mod:`.op`).

Each refusal is a one-line :class:`~checkers.history.op.HistoryError`.
"""

from __future__ import annotations

import math
import io
import os
import stat


from .op import HistoryError

#: the default bound on a history file's size (2 GiB: some ten million operations)
MAX_BYTES = 2 << 30
#: the bound on one JSONL line
MAX_LINE = 16 << 20


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> io.BufferedReader:
    """``path`` opened for binary reading if it is a regular file (symlinks
    followed); else a one-line HistoryError. Never blocks on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise HistoryError(f"{os.fspath(path)}: {_kind(mode)}, not a history file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole of the regular file ``path`` (else the one-line
    HistoryError of :func:`open_regular`), read with plain ``os.read``
    calls: no buffered file object to build and tear down, which is most
    of what reading a short history costs."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HistoryError(f"{os.fspath(path)}: {_kind(st.st_mode)}, not a history file")
        os.set_blocking(fd, True)
        # one read for the size fstat gave, then until end of file (it may grow)
        parts = [os.read(fd, st.st_size + 1)]
        while parts[-1]:
            parts.append(os.read(fd, 1 << 20))
        return b"".join(parts)
    finally:
        os.close(fd)


def check_size(path: str | os.PathLike[str], max_bytes: int = MAX_BYTES) -> int:
    """The size of the regular file ``path``, refused above ``max_bytes``."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
    if size > max_bytes:
        raise HistoryError(f"{os.fspath(path)}: {size} bytes, more than the {max_bytes} a history may have "
                           f"(--max-history-bytes raises the bound)")
    return size


def refuse_constant(name: str) -> float:
    """:mod:`json`'s ``parse_constant``: NaN and the infinities are no history's."""
    raise ValueError(f"{name} is not a number a history may hold")


def finite(text: str) -> float:
    """:mod:`json`'s ``parse_float``: a float that overflows a double is refused."""
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"{text} overflows a double")
    return x
