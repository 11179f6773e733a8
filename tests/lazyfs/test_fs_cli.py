"""``kraftwerk fs``: mount, crash and umount from the command line; bad input
is one line and exit 2; no mount outlives its server or its owner."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from harness.lazyfs import mounts

from tests.nobody import NOBODY, NOBODY_GID, NOBODY_UID

from .conftest import kraftwerk


def one_line_exit_2(r, words):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_mount_crash_umount_from_the_command_line(tmp_path):
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    r = kraftwerk("fs", "mount", str(point), "--backing", str(backing))
    assert r.returncode == 0 and "mounted" in r.stdout, r.stderr
    try:
        (point / "f").write_bytes(b"gone")
        r = kraftwerk("fs", "crash", str(point))
        assert r.returncode == 0 and "1 uncommitted name change" in r.stdout, r.stdout
        assert not (point / "f").exists()
        one_line_exit_2(kraftwerk("fs", "crash", str(point), "--seed", "3"), "needs --torn")
        with open(point / "g", "wb") as f:
            f.write(b"durable")
            f.flush()
            os.fsync(f.fileno())
        fd = os.open(point, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        with open(point / "g", "ab") as f:
            f.write(b"x" * 10_000)
        r = kraftwerk("fs", "crash", str(point), "--torn", "--seed", "3", "--json")
        assert r.returncode == 0, r.stderr
        kept = json.loads(r.stdout)["torn_bytes_kept"]
        assert (point / "g").read_bytes() == b"durable" + b"x" * kept
    finally:
        r = kraftwerk("fs", "umount", str(point))
    assert r.returncode == 0, r.stderr
    assert not mounts.is_mounted(point)


def test_umount_is_clean_it_flushes_everything(tmp_path):
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    mounts.mount(point, backing)
    (point / "d").mkdir()
    (point / "d" / "f").write_bytes(b"kept")
    assert kraftwerk("fs", "umount", str(point)).returncode == 0
    assert (backing / "d" / "f").read_bytes() == b"kept"


def test_umount_leaves_nothing_mounted_after_the_server_was_killed(tmp_path):
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    rec = mounts.mount(point, backing)
    os.kill(rec["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{rec['pid']}") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert mounts.is_mounted(point)  # a dead mount stays until someone removes it
    r = kraftwerk("fs", "umount", str(point))
    assert r.returncode == 0, r.stderr
    assert not mounts.is_mounted(point)
    assert all(x["mountpoint"] != str(point) for x in mounts.records())
    os.listdir(point)  # an ordinary directory again


def test_umount_of_a_paused_server_does_not_hang(tmp_path):
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    rec = mounts.mount(point, backing)
    os.kill(rec["pid"], signal.SIGSTOP)
    t0 = time.monotonic()
    mounts.umount(point, timeout=2)
    assert time.monotonic() - t0 < 15
    assert not mounts.is_mounted(point)
    assert not os.path.exists(f"/proc/{rec['pid']}") or open(f"/proc/{rec['pid']}/stat").read().split()[2] in "ZX"


def test_cleanup_unmounts_a_mount_whose_owner_is_gone_and_whose_server_is_stuck(tmp_path):
    """The server unmounts itself when its owner dies; a paused one cannot,
    so cleanup does."""
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        r = kraftwerk("fs", "mount", str(point), "--backing", str(backing), "--owner-pid", str(owner.pid))
        assert r.returncode == 0, r.stderr
        r = kraftwerk("cleanup", "--out", str(tmp_path / "results"))
        assert mounts.is_mounted(point), r.stdout  # the owner lives: not ours to remove
        os.kill(mounts.find(point)["pid"], signal.SIGSTOP)
    finally:
        owner.kill()
        owner.wait()
    r = kraftwerk("cleanup", "--out", str(tmp_path / "results"))
    assert r.returncode == 0 and f"unmounted kraftwerk fs {point}" in r.stdout, r.stdout
    assert not mounts.is_mounted(point)


def test_bad_input_is_one_line_exit_2(tmp_path):
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir()
    one_line_exit_2(kraftwerk("fs", "mount", str(point), "--backing", str(backing)), "does not exist")
    backing.mkdir()
    one_line_exit_2(kraftwerk("fs", "mount", str(tmp_path / "nope"), "--backing", str(backing)), "does not exist")
    one_line_exit_2(kraftwerk("fs", "crash", str(point)), "not a kraftwerk fs mount")
    one_line_exit_2(kraftwerk("fs", "umount", str(point)), "nothing mounted")
    one_line_exit_2(kraftwerk("fs", "mount", str(point), "--backing", str(point / "x")), "does not exist")
    (point / "x").mkdir()
    one_line_exit_2(kraftwerk("fs", "mount", str(point), "--backing", str(point / "x")), "not empty")


def test_a_busy_mount_point_is_refused(fs):
    other = fs.point.parent / "other"
    other.mkdir()
    one_line_exit_2(kraftwerk("fs", "mount", str(fs.point), "--backing", str(other)), "is busy")


def test_not_root_is_refused(tmp_path):
    os.chmod(tmp_path, 0o755)
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    home = tempfile.mkdtemp(prefix="kraftwerk-nobody-")  # the suite's tmp_path is closed to others
    os.chown(home, NOBODY_UID, NOBODY_GID)
    try:
        r = kraftwerk("fs", "mount", str(point), "--backing", str(backing), prefix=NOBODY, home=home)
    finally:
        shutil.rmtree(home)
    one_line_exit_2(r, "needs root")


def test_no_dev_fuse_is_refused(tmp_path):
    """A private mount namespace whose /dev is an empty tmpfs."""
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    code = ("import os, subprocess, sys; "
            "subprocess.run(['mount', '--make-rprivate', '/'], check=True); "
            "subprocess.run(['mount', '-t', 'tmpfs', 'none', '/dev'], check=True); "
            "from harness.cli import main; main()")
    r = subprocess.run(["unshare", "-m", sys.executable, "-c", code, "fs", "mount", str(point),
                        "--backing", str(backing)], capture_output=True, text=True, timeout=60,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    one_line_exit_2(r, "/dev/fuse is missing")
    assert not mounts.is_mounted(point)


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path):
    yield
    for rec in mounts.records():
        if rec["mountpoint"].startswith(str(tmp_path)):
            mounts.umount(rec["mountpoint"])


def test_storage_lazyfs_on_local_processes_is_refused_before_anything_starts(tmp_path):
    out = tmp_path / "results"
    r = kraftwerk("run", "--out", str(out), "--storage", "lazyfs", "--nemesis", "lose-unfsynced")
    one_line_exit_2(r, "runs on --backend netns, docker or ssh")
    assert not out.exists()


def test_a_mount_unmounts_itself_when_its_owner_dies_even_by_sigkill(tmp_path):
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = mounts.mount(point, backing, owner_pid=owner.pid)
        (point / "f").write_bytes(b"x")
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    def gone() -> bool:
        return not mounts.is_mounted(point) and all(r["mountpoint"] != str(point) for r in mounts.records())

    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not mounts.is_mounted(point)
    assert all(r["mountpoint"] != str(point) for r in mounts.records())
    assert (backing / "f").read_bytes() == b"x"  # it synced on the way out


def test_an_owner_that_does_not_exist_is_refused(tmp_path):
    point, backing = tmp_path / "m", tmp_path / "b"
    point.mkdir(), backing.mkdir()
    p = subprocess.Popen(["true"])
    p.wait()
    one_line_exit_2(kraftwerk("fs", "mount", str(point), "--backing", str(backing), "--owner-pid", str(p.pid)),
                    "no such process")


def test_the_cli_and_cleanup_import_no_fuse_binding():
    """kraftwerk cleanup (and every other command) works where pyfuse3 is
    not installed: only the serving process imports it."""
    code = ("import sys, harness.cli, harness.lazyfs.mounts, harness.lazyfs.nodes, harness.cli.fs; "
            "print(sorted(m for m in ('pyfuse3', 'trio') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr)


def test_owner_ssh_is_the_connections_own_process_never_the_sshd_listener_above_it(tmp_path):
    """``kraftwerk fs mount --owner-ssh`` unmounts once its owner is gone.
    From OpenSSH 9.8 a connection runs in ``sshd-session`` under the
    ``sshd`` listener, which outlives every connection: the owner is the
    nearest connection process, so a dropped connection takes the mount
    with it on old and new OpenSSH alike. (A process chain named as sshd's:
    listener -> session -> command.)"""
    from harness.lazyfs.mounts import SSH_SESSION, ancestor_named

    pids = tmp_path / "pids"
    level = ("import os, subprocess, sys; open('/proc/self/comm', 'w').write(sys.argv[1]); "
             "open(sys.argv[2], 'a').write(f'{sys.argv[1]} {os.getpid()}\\n'); subprocess.run(sys.argv[3:])")
    listener = subprocess.Popen([sys.executable, "-c", level, "sshd", str(pids),
                                 sys.executable, "-c", level, "sshd-session", str(pids),
                                 "sh", "-c", f"echo command $$ >> {pids}; exec sleep 30"])
    got: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            got = {w[0]: int(w[1]) for w in (ln.split() for ln in pids.read_text().splitlines())} \
                if pids.exists() else {}
        assert got["sshd"] == listener.pid
        assert ancestor_named(SSH_SESSION, got["command"]) == got["sshd-session"]
        assert ancestor_named("sshd", got["command"]) == listener.pid  # the listener: it never drops
    finally:
        for name in ("command", "sshd-session"):
            if name in got:
                os.kill(got[name], signal.SIGKILL)
        listener.kill()
        listener.wait()
