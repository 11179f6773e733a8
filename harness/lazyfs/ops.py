"""pyfuse3 request handlers over :class:`.model.Tree`.

pyfuse3 (libfuse3's low-level API on trio) rather than a high-level binding:
the low-level API hands us inode numbers, so a rename or an unlink of an
open file keeps its identity, and fsync/fsyncdir/fdatasync arrive as what
they are. Handlers never await while they change the tree, so requests apply
one at a time, in arrival order, even from concurrent writers.

Permissions are the kernel's (``default_permissions``, :mod:`.server`): it
checks every access against the modes and owners reported here, as on a
disk. Owners are the requesting user's (the FUSE request's uid and gid),
and the rules that keep a user from making a file more than its owner could
are applied here as well, whatever the kernel sends: only root changes an
owner, only a file's owner (or root) its mode, and a write, or a truncation
on open, by anyone but root clears the set-user-ID bit (and set-group-ID
with group execute), as the kernel does on a disk.

The kernel is told to cache nothing about names or attributes (timeouts of
0): after a crash the tree's inode numbers are new, so every path is looked
up again and finds the durable state; a handle opened before the crash gets
ESTALE, as a file of a rebooted machine's previous boot would be gone.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from typing import Any, Awaitable, Callable

import pyfuse3

from .model import FsError, Inode, Tree


def _errors(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def wrapper(*args: Any) -> Any:
        try:
            return await fn(*args)
        except FsError as e:
            raise pyfuse3.FUSEError(e.errno) from None
        except OSError as e:
            raise pyfuse3.FUSEError(e.errno or errno.EIO) from None
    return wrapper


class LazyOps(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, tree: Tree) -> None:
        super().__init__()
        self.tree = tree
        self.handles: dict[int, int] = {}  # fh -> ino
        self.openers: dict[int, int] = {}  # fh -> uid of the process that opened it
        self.next_fh = 1

    # ------------------------------------------------------------ attributes
    def _attr(self, node: Inode) -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino = node.ino
        a.generation = self.tree.crashes
        a.entry_timeout = 0
        a.attr_timeout = 0
        a.st_mode = node.mode
        a.st_nlink = (2 + sum(1 for i in node.children.values() if self.tree.inodes[i].is_dir)
                      if node.children is not None else (1 if node.parent else 0))
        a.st_uid, a.st_gid = node.uid, node.gid
        a.st_size = node.size
        a.st_blksize = 4096
        a.st_blocks = (node.size + 511) // 512
        a.st_atime_ns, a.st_mtime_ns, a.st_ctime_ns = node.atime_ns, node.mtime_ns, node.ctime_ns
        return a

    @_errors
    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attr(self.tree.lookup(parent_inode, name))

    @_errors
    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attr(self.tree.get(inode))

    @_errors
    async def setattr(self, inode: int, attr: Any, fields: Any, fh: Any, ctx: Any) -> pyfuse3.EntryAttributes:
        node = self.tree.get(inode)
        if ctx.uid != 0:
            if fields.update_uid and attr.st_uid != node.uid:
                raise FsError(errno.EPERM)  # only root gives a file away
            if fields.update_gid and ctx.uid != node.uid:
                raise FsError(errno.EPERM)
            if fields.update_mode and ctx.uid != node.uid and not _only_drops_setid(node.mode, attr.st_mode):
                raise FsError(errno.EPERM)  # the kernel's own clearing, on a write, is the one exception
        if fields.update_size:
            self.tree.truncate(inode, attr.st_size)
            if ctx.uid != 0:
                kill_setid(node)
        if fields.update_mode:
            node.mode = (node.mode & ~0o7777) | (attr.st_mode & 0o7777)
            node.meta = True
        if fields.update_uid or fields.update_gid:
            if fields.update_uid:
                node.uid = attr.st_uid
            if fields.update_gid:
                node.gid = attr.st_gid
            if node.is_file and not fields.update_mode:
                kill_setid(node)  # chown clears them, root's too
            node.meta = True
        if fields.update_atime:
            node.atime_ns = attr.st_atime_ns
        if fields.update_mtime:
            node.mtime_ns = attr.st_mtime_ns
        return self._attr(node)

    @_errors
    async def readlink(self, inode: int, ctx: Any) -> bytes:
        return self.tree.get(inode).target

    @_errors
    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        v = os.statvfs(self.tree.backing)
        s = pyfuse3.StatvfsData()
        for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail"):
            setattr(s, f, getattr(v, f))
        s.f_namemax = 255
        return s

    # ------------------------------------------------------------ directories
    @_errors
    async def opendir(self, inode: int, ctx: Any) -> int:
        self.tree._dir(inode)
        return inode

    @_errors
    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        d = self.tree._dir(fh)
        names = sorted(d.children)  # type: ignore[arg-type]
        for i in range(start_id, len(names)):
            node = self.tree.inodes[d.children[names[i]]]  # type: ignore[index]
            if not pyfuse3.readdir_reply(token, names[i], self._attr(node), i + 1):
                break

    async def releasedir(self, fh: int) -> None:
        return None

    @_errors
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        self.tree.get(fh)
        self.tree.fsync_dir()

    @_errors
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        return self._attr(self.tree.mkdir(parent_inode, name, mode & ~ctx.umask, ctx.uid, ctx.gid))

    @_errors
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.tree.rmdir(parent_inode, name)

    @_errors
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.tree.unlink(parent_inode, name)

    @_errors
    async def rename(self, p_old: int, n_old: bytes, p_new: int, n_new: bytes, flags: int, ctx: Any) -> None:
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise pyfuse3.FUSEError(errno.EINVAL)
        self.tree.rename(p_old, n_old, p_new, n_new, noreplace=bool(flags & pyfuse3.RENAME_NOREPLACE))

    @_errors
    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        return self._attr(self.tree.symlink(parent_inode, name, target, ctx.uid, ctx.gid))

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any) -> Any:
        raise pyfuse3.FUSEError(errno.EPERM)  # hard links are not modelled

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any) -> Any:
        raise pyfuse3.FUSEError(errno.EPERM)  # regular files, directories and symlinks only

    # ------------------------------------------------------------ files
    def _open_handle(self, node: Inode, uid: int) -> pyfuse3.FileInfo:
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = node.ino
        self.openers[fh] = uid
        node.opens += 1
        return pyfuse3.FileInfo(fh=fh)

    def _ino(self, fh: int) -> int:
        ino = self.handles.get(fh)
        if ino is None:
            raise FsError(errno.EBADF)
        return ino

    @_errors
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        node = self.tree.get(inode)
        if node.is_dir:
            raise FsError(errno.EISDIR)
        if flags & os.O_TRUNC and node.size:
            self.tree.truncate(inode, 0)
            if ctx.uid != 0:
                kill_setid(node)
        return self._open_handle(node, ctx.uid)

    @_errors
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any) -> Any:
        node = self.tree.create(parent_inode, name, mode & ~ctx.umask, ctx.uid, ctx.gid)
        return self._open_handle(node, ctx.uid), self._attr(node)

    @_errors
    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.tree.read(self._ino(fh), off, size)

    @_errors
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        n = self.tree.write(self._ino(fh), off, buf)
        if self.openers.get(fh, 0) != 0:
            kill_setid(self.tree.get(self._ino(fh)))
        return n

    async def flush(self, fh: int) -> None:
        return None

    @_errors
    async def fsync(self, fh: int, datasync: bool) -> None:
        self.tree.fsync_file(self._ino(fh))

    async def release(self, fh: int) -> None:
        ino = self.handles.pop(fh, None)
        self.openers.pop(fh, None)
        node = self.tree.inodes.get(ino) if ino is not None else None
        if node is not None:
            node.opens -= 1
            if node.opens == 0:
                self.tree.released(ino)  # type: ignore[arg-type]

    async def forget(self, inode_list: Any) -> None:
        return None


def kill_setid(node: Inode) -> None:
    """What the kernel does to a file written or given away by someone
    without CAP_FSETID: set-user-ID goes, and set-group-ID when group
    execute is set (without it, the bit means mandatory locking)."""
    mode = node.mode & ~stat.S_ISUID
    if mode & stat.S_IXGRP:
        mode &= ~stat.S_ISGID
    if mode != node.mode:
        node.mode = mode
        node.meta = True


def _only_drops_setid(old: int, new: int) -> bool:
    """``new`` is ``old`` less some set-ID bits (what the kernel asks for,
    with the writer's credentials, when someone else writes a set-ID file)."""
    setid = stat.S_ISUID | stat.S_ISGID
    return (old & 0o7777 & ~setid) == (new & 0o7777 & ~setid) and not (new & setid & ~old)
