"""An unprivileged local user for the tests that play one, as a security
review attacks: a throwaway account this test process creates (``kwatk`` and
its pid: no home, no shell, a group of its own, so it can do nothing root
did not grant it) and removes when it exits; an account a killed test run
left behind is removed by the next. As root the suite drops to it with
setpriv; the tests that need a second user are skipped when the suite itself
runs unprivileged (it cannot make files of another uid then). The names
below still say "nobody", the user a review attacks as.

``public_dir`` is a directory like ``/tmp`` (world-writable, sticky), made
under the system temporary directory so the attacker can reach it."""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

PREFIX = "kwatk"


def _remove(name: str) -> None:
    """The account and its group (userdel leaves the group when it is some
    other account's supplementary group; ours never is, but say so loudly)."""
    subprocess.run(["userdel", name], capture_output=True, timeout=30)
    if subprocess.run(["getent", "group", name], capture_output=True).returncode == 0:
        subprocess.run(["groupdel", name], capture_output=True, timeout=30)


def _remove_stale() -> None:
    """Accounts of test processes that died without running atexit."""
    for pw in pwd.getpwall():
        pid = pw.pw_name[len(PREFIX):]
        if pw.pw_name.startswith(PREFIX) and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _remove(pw.pw_name)


def _make_attacker() -> tuple[str, int, int]:
    """The attacker's account (made once per test process, as root)."""
    if os.geteuid() != 0:
        return "nobody", 65534, 65534  # never attacked as: unprivileged suites skip these tests (need_root)
    _remove_stale()
    name = f"{PREFIX}{os.getpid()}"
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True, timeout=30)
        atexit.register(_remove, name)
    pw = pwd.getpwnam(name)
    return name, pw.pw_uid, pw.pw_gid


ATTACKER, NOBODY_UID, NOBODY_GID = _make_attacker()
NOBODY = ["setpriv", f"--reuid={NOBODY_UID}", f"--regid={NOBODY_GID}", "--clear-groups"]


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the test plays a second, unprivileged user")
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv is not installed (util-linux)")


def run_as_nobody(argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    """``argv`` run as the attacker (cwd ``/``: it may not enter the test's own)."""
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
