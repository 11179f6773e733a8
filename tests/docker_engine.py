"""The suite's Docker engine, shared by the test files that need one.

A file that finds no engine starts the project's own dockerd, and the
suite stops it when its last user is done, never while another test
process still uses it: the default suite runs on several pytest-xdist
workers, and a file that stopped the engine it had started cut off a
file running beside it. Users are counted under a lock, one token file
per user naming its pid (a token whose process died counts no more).
"""

from __future__ import annotations

import fcntl
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from harness.runtimes import docker as kwdocker

HOME = Path("/tmp/kraftwerk-test-docker")
#: present while the engine running is one the suite started
STARTED = HOME / "started-by-the-suite"


@contextmanager
def _locked() -> Iterator[None]:
    HOME.mkdir(mode=0o700, exist_ok=True)
    with open(HOME / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _alive(token: Path) -> bool:
    try:
        os.kill(int(token.name.split("-", 1)[0]), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def shared_engine() -> Iterator[Any]:
    """A Docker client for as long as the ``with`` lasts (module docstring)."""
    with _locked():
        client = kwdocker.engine(start=False)
        if client is None:
            client = kwdocker.engine()
            STARTED.touch()
        token = HOME / f"{os.getpid()}-{uuid.uuid4().hex}.user"
        token.touch()
    try:
        yield client
    finally:
        with _locked():
            token.unlink(missing_ok=True)
            users = [t for t in HOME.glob("*.user") if _alive(t)]
            if not users and STARTED.exists():
                STARTED.unlink()
                assert kwdocker.stop_own_dockerd()
            if not users:
                for t in HOME.glob("*.user"):
                    t.unlink(missing_ok=True)


def remove_home() -> bool:
    """Remove the suite's bookkeeping directory once no test process uses
    the engine (called when the whole suite is done: a run leaves nothing
    behind in /tmp). Returns whether it was removed. A directory with a live
    user, or an engine the suite started and has not stopped, is left."""
    if not HOME.is_dir():
        return False
    with _locked():
        if STARTED.exists() or any(_alive(t) for t in HOME.glob("*.user")):
            return False
        for p in HOME.iterdir():
            p.unlink(missing_ok=True)
        # the lock file goes last, while it is still held: a process that
        # comes later makes the directory and its lock again
        HOME.rmdir()
    return True
