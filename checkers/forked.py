"""Part of a check run in a forked copy of this process.

A big history is checked on one machine faster with both of its cores: a
forked process starts in a few milliseconds with everything this one has
read (no pickling of the history to hand it over), does its part and
writes what it found to an unlinked temporary file, so it never waits for
this process to read it and leaves nothing behind, whatever happens to
either. This process reads the file when it needs the part, and does the
part itself if the fork failed.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
from typing import IO, Any, Callable

#: below this many operations (or events) a history is checked in one process:
#: a second costs more than it saves
MIN_OPS = 200_000


def can_fork() -> bool:
    """A second process helps only with a second core, and a fork is safe
    only with no other thread (it copies none of them, but could copy a
    lock one of them holds)."""
    return threading.active_count() == 1 and len(os.sched_getaffinity(0)) >= 2


class Forked:
    """``fn(out, *args)`` run in a forked process, ``out`` a binary file it
    writes its part to; :meth:`output` waits for it and gives the file to
    read (None if the process failed), or the part is read from ``file``
    by position as it grows while :meth:`running`; :meth:`close` ends it
    and removes the file. A context manager."""

    def __init__(self, fn: Callable[..., None], *args: Any) -> None:
        self.file = tempfile.TemporaryFile(prefix="kraftwerk-part-")
        ctx = multiprocessing.get_context("fork")  # it flushes this process's output before forking
        self.proc = ctx.Process(target=_run, args=(fn, args, self.file.fileno()), daemon=True)
        self.proc.start()

    def running(self) -> bool:
        """Whether the process has not ended yet (its output may still grow)."""
        return self.proc.exitcode is None and self.proc.is_alive()

    def output(self) -> IO[bytes] | None:
        self.proc.join()
        if self.proc.exitcode != 0:
            return None
        self.file.seek(0)
        return self.file

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.proc.close()
        self.file.close()

    def __enter__(self) -> "Forked":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _run(fn: Callable[..., None], args: tuple, fd: int) -> None:
    """In the forked process: a failure is an exit status (this process
    does the part itself), never a traceback on the shared terminal."""
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            fn(out, *args)
    except BaseException:
        os._exit(1)
