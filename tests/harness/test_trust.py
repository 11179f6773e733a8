"""Directories a command writes into because a user named them
(harness/rundir/trust.py): another local user's directory, or one they can
write, is refused before anything is written; symlinks only root or we made
are followed; files are replaced, never written through a symlink."""

from __future__ import annotations

import os
import sys

import pytest

from harness.errors import UsageError
from harness.rundir.trust import Untrusted, append_line, check_dir, trusted_dir, write_file
from tests.nobody import ATTACKER, NOBODY_UID, need_root, public_dir, run_as_nobody  # noqa: F401 (fixture)


def test_a_directory_another_user_made_first_is_refused(public_dir):
    """The hosts-up attack: nobody makes the path a README names first."""
    run_as_nobody(["mkdir", str(public_dir / "kw-hosts")])
    with pytest.raises(Untrusted, match=rf"kw-hosts: owned by {ATTACKER} \(uid {NOBODY_UID}\)"):
        trusted_dir(public_dir / "kw-hosts", "kraftwerk hosts up --dir")


def test_a_directory_below_one_another_user_owns_is_refused(public_dir):
    run_as_nobody(["mkdir", "-p", str(public_dir / "theirs")])
    with pytest.raises(Untrusted, match=f"theirs: owned by {ATTACKER}"):
        trusted_dir(public_dir / "theirs" / "ours", "--out")
    assert not (public_dir / "theirs" / "ours").exists()


def test_a_symlink_another_user_made_is_not_followed(public_dir, tmp_path):
    run_as_nobody(["ln", "-s", str(tmp_path), str(public_dir / "link")])
    with pytest.raises(Untrusted, match=f"is a symlink owned by {ATTACKER}"):
        trusted_dir(public_dir / "link" / "out", "--out")
    assert not (tmp_path / "out").exists()


def test_our_own_symlink_is_followed_and_the_real_path_returned(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert trusted_dir(tmp_path / "link" / "d", "--out") == tmp_path / "real" / "d"
    assert (tmp_path / "real" / "d").is_dir()


def test_a_directory_others_can_write_is_refused_even_if_ours(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o777)
    with pytest.raises(Untrusted, match=r"others can write it \(mode drwxrwxrwx\)"):
        trusted_dir(d, "--dir")
    os.chmod(d, 0o775)
    with pytest.raises(Untrusted, match="its group can write it"):
        trusted_dir(d, "--dir")


def test_below_a_writable_directory_that_is_not_sticky_is_refused(tmp_path):
    """Anyone who can write a non-sticky parent can rename ours away and put theirs in its place."""
    parent = tmp_path / "open"
    parent.mkdir()
    os.chmod(parent, 0o777)
    with pytest.raises(Untrusted, match="open: others can write it"):
        trusted_dir(parent / "mine", "--out")


def test_below_a_sticky_directory_ours_is_accepted_and_made_with_the_mode_asked(public_dir):
    d = trusted_dir(public_dir / "a" / "b", "--dir", mode=0o700)
    assert d == public_dir / "a" / "b"
    assert d.stat().st_uid == os.geteuid() and d.stat().st_mode & 0o777 == 0o700
    assert (public_dir / "a").stat().st_mode & 0o777 == 0o700
    with pytest.raises(Untrusted, match="sshd refuses keys below it"):
        trusted_dir(public_dir / "a", "--dir", sticky_ok=False)


def test_dot_dot_goes_up_from_the_real_directory(tmp_path):
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "l").symlink_to(tmp_path / "x" / "y")
    # lexically l/.. is tmp_path; the kernel (and the check) go to x
    assert trusted_dir(tmp_path / "l" / ".." / "z", "--out") == tmp_path / "x" / "z"


def test_a_missing_directory_is_not_made_when_not_asked(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        trusted_dir(tmp_path / "nope", "--dir", create=False)
    assert not (tmp_path / "nope").exists()


def test_a_file_is_not_a_directory(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(Untrusted, match="not a directory"):
        trusted_dir(tmp_path / "f", "--out")


def test_write_file_replaces_a_symlink_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's")
    (tmp_path / "known_hosts").symlink_to(victim)
    write_file(tmp_path / "known_hosts", "keys\n", mode=0o600)
    assert victim.read_text() == "root's"
    assert not (tmp_path / "known_hosts").is_symlink()
    assert (tmp_path / "known_hosts").read_text() == "keys\n"
    assert (tmp_path / "known_hosts").stat().st_mode & 0o777 == 0o600


def test_append_line_never_follows_a_symlink_nor_writes_a_fifo(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's")
    (tmp_path / "kh").symlink_to(victim)
    with pytest.raises(OSError):
        append_line(tmp_path / "kh", "x\n")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError):
        append_line(tmp_path / "fifo", "x\n")
    append_line(tmp_path / "new", "a\n")
    append_line(tmp_path / "new", "b\n")
    assert (tmp_path / "new").read_text() == "a\nb\n" and victim.read_text() == "root's"


def test_check_dir_makes_nothing_and_refuses_what_trusted_dir_refuses(public_dir, tmp_path):
    check_dir(tmp_path / "a" / "b", "--out")
    assert not (tmp_path / "a").exists()
    run_as_nobody(["mkdir", str(public_dir / "theirs")])
    with pytest.raises(Untrusted, match=f"owned by {ATTACKER}"):
        check_dir(public_dir / "theirs", "--out")
    with pytest.raises(Untrusted, match=f"owned by {ATTACKER}"):
        check_dir(public_dir / "theirs" / "below", "--out")


def test_a_directory_this_user_cannot_reach_is_one_line_not_a_crash(tmp_path):
    """An unprivileged user naming a path below a directory it may not search
    (the suite's own tmp_path, 0700 root) gets the usage error, not EACCES."""
    need_root()
    code = ("import sys\nfrom harness.errors import UsageError\nfrom harness.rundir.trust import check_dir\n"
            "try:\n    check_dir(sys.argv[1], '--out')\nexcept UsageError as e:\n    print(type(e).__name__, e)")
    r = run_as_nobody([sys.executable, "-c", code, str(tmp_path / "a" / "out")])
    assert r.stdout.startswith("Untrusted --out: refusing ") and "cannot reach" in r.stdout, (r.stdout, r.stderr)
    assert "Permission denied" in r.stdout and r.stdout.count("\n") == 1
