"""``kraftwerk fs`` grants no user more than the disk below would: files keep
the owner who made them, on the mount and in the backing directory; the
kernel checks permissions (``default_permissions``); set-ID bits clear when
someone else writes, and mean nothing on the mount (``nosuid``); a symlink a
user plants in the backing tree never leads the root server outside it; and
only root may mount or unmount (harness/lazyfs/backing.py, ops.py,
server.py, mounts.py). Attacks made as a throwaway unprivileged user (tests/nobody.py), as a security review made
them."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from harness.lazyfs import mounts
from tests.nobody import ATTACKER, NOBODY, NOBODY_GID, NOBODY_UID, need_root, public_dir, run_as_nobody  # noqa: F401 (fixture)

from .conftest import kraftwerk

FSYNC = "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)"


@pytest.fixture
def shared_fs():
    """A mount others can reach (the suite's tmp_path is closed to them),
    with a world-writable directory ``pub`` in its tree, as the review's."""
    need_root()
    base = Path(tempfile.mkdtemp(prefix="kw-fs-", dir="/tmp"))
    os.chmod(base, 0o755)
    point, backing = base / "m", base / "b"
    point.mkdir(mode=0o755)
    backing.mkdir(mode=0o755)
    mounts.mount(point, backing, seed=1)
    try:
        (point / "pub").mkdir()
        os.chmod(point / "pub", 0o777)
        mounts.control(point, "sync")
        yield point, backing
    finally:
        mounts.umount(point)
        shutil.rmtree(base)


def test_a_setuid_copy_made_by_nobody_is_nobodys_on_the_mount_and_in_the_backing_directory(shared_fs):
    point, backing = shared_fs
    run_as_nobody(["sh", "-c", f"cp /usr/bin/id {point}/pub/id && chmod 4755 {point}/pub/id"])
    run_as_nobody(["/usr/bin/python3", "-c", FSYNC, str(point / "pub" / "id")])
    mounts.control(point, "sync")
    for copy in (point / "pub" / "id", backing / "pub" / "id"):
        st = copy.stat()
        assert (st.st_uid, st.st_gid) == (NOBODY_UID, NOBODY_GID), copy
    for copy in (point / "pub" / "id", backing / "pub" / "id"):
        out = run_as_nobody([str(copy)]).stdout
        assert "euid=0" not in out and out.startswith(f"uid={NOBODY_UID}"), out


def test_nobody_can_neither_chmod_nor_write_roots_files_on_the_mount(shared_fs):
    point, _ = shared_fs
    f = point / "pub" / "roots"
    f.write_text("root's\n")
    os.chmod(f, 0o644)
    assert run_as_nobody(["chmod", "4777", str(f)], check=False).returncode != 0
    assert run_as_nobody(["sh", "-c", f"echo x >> {f}"], check=False).returncode != 0
    assert run_as_nobody(["chown", f"{NOBODY_UID}", str(f)], check=False).returncode != 0
    assert f.read_text() == "root's\n" and stat.S_IMODE(f.stat().st_mode) == 0o644 and f.stat().st_uid == 0


def test_a_write_by_another_user_clears_the_set_user_id_bit(shared_fs):
    point, backing = shared_fs
    f = point / "pub" / "tool"
    shutil.copyfile("/usr/bin/id", f)
    os.chmod(f, 0o4777)  # root's own mistake: setuid and world-writable
    run_as_nobody(["sh", "-c", f"printf x >> {f}"])
    assert not f.stat().st_mode & stat.S_ISUID
    mounts.control(point, "sync")
    assert not (backing / "pub" / "tool").stat().st_mode & stat.S_ISUID


def test_a_symlink_planted_in_the_backing_tree_is_never_followed_by_the_server(shared_fs, tmp_path):
    point, backing = shared_fs
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    run_as_nobody(["sh", "-c", f"echo a > {point}/pub/f"])
    run_as_nobody(["/usr/bin/python3", "-c", FSYNC, str(point / "pub" / "f")])
    mounts.control(point, "sync")
    assert (backing / "pub" / "f").stat().st_uid == NOBODY_UID
    run_as_nobody(["sh", "-c", f"rm {backing}/pub/f && ln -s {victim} {backing}/pub/f"])
    for redirect in (">>", ">"):  # appended (read through the link) or replaced (written through it)
        run_as_nobody(["sh", "-c", f"echo evil {redirect} {point}/pub/f"], check=False)
        run_as_nobody(["/usr/bin/python3", "-c", FSYNC, str(point / "pub" / "f")], check=False)
        try:
            mounts.control(point, "sync")
        except Exception as e:  # noqa: BLE001 - refused, one way or another
            assert "Too many levels of symbolic links" in str(e) or "ELOOP" in str(e), e
        assert victim.read_text() == "root's file\n"
    assert (backing / "pub" / "f").is_symlink()


def test_a_backing_directory_another_user_owns_is_refused(public_dir):
    run_as_nobody(["mkdir", str(public_dir / "b"), str(public_dir / "m")])
    r = kraftwerk("fs", "mount", str(public_dir / "m"), "--backing", str(public_dir / "b"))
    assert r.returncode == 2 and "--backing: refusing" in r.stderr and f"owned by {ATTACKER}" in r.stderr, r.stderr
    os.mkdir(public_dir / "b2")
    r = kraftwerk("fs", "mount", str(public_dir / "m"), "--backing", str(public_dir / "b2"))
    assert r.returncode == 2 and "MOUNTPOINT: refusing" in r.stderr, r.stderr
    assert not mounts.is_mounted(public_dir / "m")


def test_umount_by_a_user_who_may_not_fails_in_one_line_and_the_mount_stays(shared_fs):
    point, _ = shared_fs
    home = tempfile.mkdtemp(prefix="kraftwerk-nobody-")
    os.chown(home, NOBODY_UID, NOBODY_GID)
    try:
        r = kraftwerk("fs", "umount", str(point), prefix=NOBODY, home=home)
    finally:
        shutil.rmtree(home)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "unmounted" not in r.stdout and len(r.stderr.strip().splitlines()) == 1 and "root" in r.stderr
    assert mounts.is_mounted(point)
