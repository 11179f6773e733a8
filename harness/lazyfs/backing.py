"""The backing directory's files, reached only by names below its root.

The server runs as root and writes the durable state into the backing
directory, so what a user of the mount can do there must never become more
than the disk below would let them do:

* every path is walked from a descriptor of the backing root, one name at a
  time, each directory opened with ``O_NOFOLLOW``: a symlink (or anything
  not a directory) put in the backing tree by its user, where the tree says a
  directory is, fails the call (ELOOP/ENOTDIR, answered as an I/O error)
  rather than leading root outside the tree;
* the last name is opened, made, renamed or removed relative to its
  parent's descriptor, never following a symlink;
* whatever is made gets the owner and mode the mount's inode has (the
  creating user's uid and gid, from the FUSE request), owner first and mode
  after, so a set-user-ID bit is only ever set on a file its user owns, as
  the kernel would leave it.

Paths here are the tree's relative paths (``a/b/c``, no ``.`` or ``..``).
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import Iterator

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Backing:
    """Operations on the backing directory of one mount."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.fd = os.open(self.root, _DIR)

    def close(self) -> None:
        os.close(self.fd)

    @contextmanager
    def parent(self, rel: str) -> Iterator[tuple[int, str]]:
        """(descriptor of ``rel``'s directory, ``rel``'s last name); the
        descriptor is closed after the block."""
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise OSError(f"not a path below the backing directory: {rel!r}")
        fd = os.dup(self.fd)
        try:
            for name in parts[:-1]:
                nxt = os.open(name, _DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def open(self, rel: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor of the regular file ``rel`` (never through a symlink)."""
        with self.parent(rel) as (d, name):
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=d)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{rel}: not a regular file")
        return fd

    def open_dir(self, rel: str) -> int:
        if not rel:
            return os.dup(self.fd)
        with self.parent(rel) as (d, name):
            return os.open(name, _DIR, dir_fd=d)

    def lstat(self, rel: str) -> os.stat_result | None:
        try:
            with self.parent(rel) as (d, name):
                return os.stat(name, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------ names
    def make_file(self, rel: str, uid: int, gid: int, mode: int, truncate: bool = True) -> int:
        """Create (or open) ``rel`` with its inode's owner and mode; returns
        the open descriptor."""
        fd = self.open(rel, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0), 0o600)
        try:
            set_owner(fd, uid, gid, mode)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def mkdir(self, rel: str, uid: int, gid: int, mode: int) -> None:
        with self.parent(rel) as (d, name):
            os.mkdir(name, 0o700, dir_fd=d)
            fd = os.open(name, _DIR, dir_fd=d)
        try:
            set_owner(fd, uid, gid, mode)
        finally:
            os.close(fd)

    def symlink(self, target: bytes, rel: str, uid: int, gid: int) -> None:
        with self.parent(rel) as (d, name):
            os.symlink(target, name, dir_fd=d)
            os.chown(name, uid, gid, dir_fd=d, follow_symlinks=False)

    def rmdir(self, rel: str) -> None:
        with self.parent(rel) as (d, name):
            os.rmdir(name, dir_fd=d)

    def unlink(self, rel: str) -> None:
        with self.parent(rel) as (d, name):
            os.unlink(name, dir_fd=d)

    def rename(self, old: str, new: str) -> None:
        with self.parent(old) as (d_old, n_old), self.parent(new) as (d_new, n_new):
            os.rename(n_old, n_new, src_dir_fd=d_old, dst_dir_fd=d_new)

    def set_owner(self, rel: str, uid: int, gid: int, mode: int) -> None:
        """Owner and mode of an existing file or directory (a symlink's
        owner only: its mode means nothing)."""
        with self.parent(rel) as (d, name):
            st = os.stat(name, dir_fd=d, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                os.chown(name, uid, gid, dir_fd=d, follow_symlinks=False)
                return
            fd = os.open(name, (_DIR if stat.S_ISDIR(st.st_mode) else os.O_RDONLY | os.O_NOFOLLOW), dir_fd=d)
        try:
            set_owner(fd, uid, gid, mode)
        finally:
            os.close(fd)

    def listing(self, rel: str) -> list[tuple[str, os.stat_result, bytes]]:
        """(name, lstat, symlink target or b"") of every entry of directory
        ``rel``, sorted by name."""
        fd = self.open_dir(rel)
        try:
            out = []
            for name in sorted(os.listdir(fd)):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                target = os.fsencode(os.readlink(name, dir_fd=fd)) if stat.S_ISLNK(st.st_mode) else b""
                out.append((name, st, target))
            return out
        finally:
            os.close(fd)


def set_owner(fd: int, uid: int, gid: int, mode: int) -> None:
    """Owner first, then mode: chown clears set-ID bits, and a set-ID bit
    is never on a file while root still owns it."""
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.fchown(fd, uid, gid)
    os.fchmod(fd, mode & 0o7777)
