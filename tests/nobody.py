"""An unprivileged local user for the tests that play one: ``nobody``, as a
security review attacks. As root the suite drops to it with setpriv; the
tests that need a second user are skipped when the suite itself runs
unprivileged (it cannot make files of another uid then).

``public_dir`` is a directory like ``/tmp`` (world-writable, sticky), made
under the system temporary directory so ``nobody`` can reach it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

NOBODY_UID = 65534
NOBODY = ["setpriv", f"--reuid={NOBODY_UID}", f"--regid={NOBODY_UID}", "--clear-groups"]


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the test plays a second, unprivileged user (nobody)")
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv is not installed (util-linux)")


def run_as_nobody(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    """``argv`` run as nobody (cwd ``/``: nobody may not enter the test's own)."""
    kw.setdefault("cwd", "/")
    r = subprocess.run(NOBODY + argv, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A fresh world-writable sticky directory under the system temp dir
    (import this fixture into a test module to use it)."""
    need_root()
    d = Path(tempfile.mkdtemp(prefix="kw-public-", dir="/tmp"))
    os.chmod(d, 0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
