"""The filesystem's state: a tree of inodes over a backing directory, dirty
pages per file and an ordered journal of name changes (the rules are in the
package docstring). No FUSE here: :mod:`.ops` calls these methods, one at a
time (the server is single-threaded).

The backing directory always holds exactly the durable state: names as of
the last committed journal entry, file contents as of each file's last
fsync, each with its inode's owner and mode (the user who made it, as the
kernel would record; :mod:`.backing` reaches it by names below its root only). A file whose data was fsynced before its name was committed is kept
in a staging directory inside the backing directory until its ``create``
commits; a crash empties that directory, as recovery frees orphan inodes.
"""

from __future__ import annotations

import errno
import os
import random
import stat
import time
from dataclasses import dataclass, field

from .backing import Backing, set_owner

PAGE = 4096
#: durable contents whose names are not committed (hidden from the tree)
STAGE = ".kraftwerk-fs-stage"


class FsError(Exception):
    """An operation refused with an errno (turned into FUSEError by ops)."""

    def __init__(self, err: int) -> None:
        super().__init__(os.strerror(err))
        self.errno = err


@dataclass
class Inode:
    ino: int
    mode: int  # st_mode, file type included
    uid: int = 0
    gid: int = 0
    atime_ns: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    parent: int = 0  # 0 once unlinked (no hard links)
    name: bytes = b""
    children: dict[bytes, int] | None = None  # directories
    target: bytes = b""  # symlinks
    size: int = 0
    #: bytes of the durable copy still visible (a truncation since the
    #: last fsync hides the rest; they read as zeros if the file grows again)
    clip: int = 0
    pages: dict[int, bytearray] = field(default_factory=dict)
    #: data changes since the last fsync, in order: (offset, bytes) or (size,)
    wlog: list[tuple] = field(default_factory=list)
    opens: int = 0
    #: owner or mode changed since the backing copy last got them
    meta: bool = False

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def dirty(self) -> bool:
        return bool(self.pages or self.wlog) or self.clip != self.size


def _now() -> int:
    return time.time_ns()


class Tree:
    """The cached view of one mount."""

    def __init__(self, backing: str, seed: int = 0) -> None:
        self.backing = os.path.abspath(backing)
        self.disk = Backing(self.backing)
        self.rng = random.Random(seed)
        self.next_ino = 2
        self.crashes = 0
        self.load()

    # ------------------------------------------------------------ loading
    def load(self) -> None:
        """(Re)build the tree from the backing directory: the durable state."""
        st = self.disk.lstat(STAGE)
        if st is None:
            self.disk.mkdir(STAGE, 0, 0, 0o700)
        for name, _, _ in self.disk.listing(STAGE):
            self.disk.unlink(f"{STAGE}/{name}")
        self.inodes: dict[int, Inode] = {}
        #: ino -> backing path (relative) of its durable contents
        self.durable: dict[int, str] = {}
        self.journal: list[tuple] = []
        root = self._from_stat(1, os.fstat(self.disk.fd), 0, b"")
        self._load_dir(root, "")

    def _from_stat(self, ino: int, st: os.stat_result, parent: int, name: bytes) -> Inode:
        node = Inode(ino, st.st_mode, st.st_uid, st.st_gid, st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns,
                     parent, name)
        self.inodes[ino] = node
        return node

    def _load_dir(self, node: Inode, rel: str) -> None:
        node.children = {}
        for name, st, target in self.disk.listing(rel):
            if not rel and name == STAGE:
                continue
            if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue
            child = self._from_stat(self._new_ino(), st, node.ino, os.fsencode(name))
            node.children[child.name] = child.ino
            crel = f"{rel}/{name}" if rel else name
            if child.is_dir:
                self._load_dir(child, crel)
            elif child.is_file:
                child.size = child.clip = st.st_size
                self.durable[child.ino] = crel
            else:
                child.target = target

    def _new_ino(self) -> int:
        self.next_ino += 1
        return self.next_ino

    # ------------------------------------------------------------ lookups
    def get(self, ino: int) -> Inode:
        node = self.inodes.get(ino)
        if node is None:
            raise FsError(errno.ESTALE)  # an inode from before a crash
        return node

    def _dir(self, ino: int) -> Inode:
        node = self.get(ino)
        if node.children is None:
            raise FsError(errno.ENOTDIR)
        return node

    def lookup(self, parent: int, name: bytes) -> Inode:
        d = self._dir(parent)
        if name == b".":
            return d
        if name == b"..":
            return self.get(d.parent or 1)
        ino = d.children.get(name)  # type: ignore[union-attr]
        if ino is None:
            raise FsError(errno.ENOENT)
        return self.inodes[ino]

    def path(self, node: Inode) -> str:
        parts: list[bytes] = []
        while node.ino != 1:
            parts.append(node.name)
            node = self.inodes[node.parent]
        return os.fsdecode(b"/".join(reversed(parts)))

    def _child_path(self, d: Inode, name: bytes) -> str:
        base = self.path(d)
        n = os.fsdecode(name)
        return f"{base}/{n}" if base else n

    # ------------------------------------------------------------ names
    def _link(self, d: Inode, name: bytes, mode: int, uid: int, gid: int) -> Inode:
        if name in d.children:  # type: ignore[operator]
            raise FsError(errno.EEXIST)
        if len(name) > 255:
            raise FsError(errno.ENAMETOOLONG)
        if d.ino == 1 and name == STAGE.encode():
            raise FsError(errno.EACCES)  # the staging directory's name is the filesystem's own
        t = _now()
        node = Inode(self._new_ino(), mode, uid, gid, t, t, t, d.ino, name)
        self.inodes[node.ino] = node
        d.children[name] = node.ino  # type: ignore[index]
        d.mtime_ns = d.ctime_ns = t
        return node

    def create(self, parent: int, name: bytes, mode: int, uid: int = 0, gid: int = 0) -> Inode:
        d = self._dir(parent)
        node = self._link(d, name, stat.S_IFREG | (mode & 0o7777), uid, gid)
        self.journal.append(("create", self.path(node), node.ino, node.mode, uid, gid))
        return node

    def mkdir(self, parent: int, name: bytes, mode: int, uid: int = 0, gid: int = 0) -> Inode:
        d = self._dir(parent)
        node = self._link(d, name, stat.S_IFDIR | (mode & 0o7777), uid, gid)
        node.children = {}
        self.journal.append(("mkdir", self.path(node), mode & 0o7777, uid, gid))
        return node

    def symlink(self, parent: int, name: bytes, target: bytes, uid: int = 0, gid: int = 0) -> Inode:
        d = self._dir(parent)
        node = self._link(d, name, stat.S_IFLNK | 0o777, uid, gid)
        node.target = target
        node.size = len(target)
        self.journal.append(("symlink", self.path(node), target, uid, gid))
        return node

    def unlink(self, parent: int, name: bytes) -> None:
        d = self._dir(parent)
        node = self.lookup(parent, name)
        if node.is_dir:
            raise FsError(errno.EISDIR)
        self.journal.append(("unlink", self.path(node), node.ino))
        self._unhook(d, node)

    def rmdir(self, parent: int, name: bytes) -> None:
        d = self._dir(parent)
        node = self.lookup(parent, name)
        if not node.is_dir:
            raise FsError(errno.ENOTDIR)
        if node.children:
            raise FsError(errno.ENOTEMPTY)
        self.journal.append(("rmdir", self.path(node)))
        self._unhook(d, node)
        del self.inodes[node.ino]

    def _unhook(self, d: Inode, node: Inode) -> None:
        del d.children[node.name]  # type: ignore[union-attr]
        node.parent = 0
        d.mtime_ns = d.ctime_ns = node.ctime_ns = _now()

    def rename(self, p_old: int, n_old: bytes, p_new: int, n_new: bytes, noreplace: bool = False) -> None:
        d_old, d_new = self._dir(p_old), self._dir(p_new)
        node = self.lookup(p_old, n_old)
        victim_ino = d_new.children.get(n_new)  # type: ignore[union-attr]
        if victim_ino == node.ino:
            return
        if d_new.ino == 1 and n_new == STAGE.encode():
            raise FsError(errno.EACCES)
        anc = d_new
        while node.is_dir:  # a directory cannot move below itself
            if anc.ino == node.ino:
                raise FsError(errno.EINVAL)
            if anc.ino == 1:
                break
            anc = self.inodes[anc.parent]
        victim = self.inodes[victim_ino] if victim_ino is not None else None
        if victim is not None:
            if noreplace:
                raise FsError(errno.EEXIST)
            if victim.is_dir and not node.is_dir:
                raise FsError(errno.EISDIR)
            if node.is_dir and not victim.is_dir:
                raise FsError(errno.ENOTDIR)
            if victim.is_dir and victim.children:
                raise FsError(errno.ENOTEMPTY)
        old_path = self.path(node)
        new_path = self._child_path(d_new, n_new)
        self.journal.append(("rename", old_path, new_path, victim_ino))
        if victim is not None:
            self._unhook(d_new, victim)
            if victim.is_dir:
                del self.inodes[victim.ino]
        del d_old.children[n_old]  # type: ignore[union-attr]
        d_new.children[n_new] = node.ino  # type: ignore[index]
        node.parent, node.name = d_new.ino, n_new
        d_old.mtime_ns = d_new.mtime_ns = node.ctime_ns = _now()

    # ------------------------------------------------------------ data
    def _backing_read(self, node: Inode, off: int, n: int) -> bytes:
        """The durable copy's bytes [off, off+n) below the clip, zero-padded."""
        end = min(off + n, node.clip)
        data = b""
        if off < end:
            fd = self.disk.open(self.durable[node.ino], os.O_RDONLY)
            try:
                data = os.pread(fd, end - off, off)
            finally:
                os.close(fd)
        return data + bytes(n - len(data))

    def _page(self, node: Inode, pno: int) -> bytearray:
        page = node.pages.get(pno)
        if page is None:
            page = bytearray(self._backing_read(node, pno * PAGE, PAGE))
            node.pages[pno] = page
        return page

    def read(self, ino: int, off: int, n: int) -> bytes:
        node = self.get(ino)
        if node.is_dir:
            raise FsError(errno.EISDIR)
        n = max(0, min(n, node.size - off))
        out = bytearray()
        pos = off
        while pos < off + n:
            pno, po = divmod(pos, PAGE)
            take = min(PAGE - po, off + n - pos)
            page = node.pages.get(pno)
            out += page[po:po + take] if page is not None else self._backing_read(node, pos, take)
            pos += take
        return bytes(out)

    def write(self, ino: int, off: int, data: bytes) -> int:
        node = self.get(ino)
        if not node.is_file:
            raise FsError(errno.EISDIR)
        if off > node.size:  # a hole: the gap reads as zeros, durable or not
            self._hide_beyond(node, node.size)
        pos, i = off, 0
        while i < len(data):
            pno, po = divmod(pos, PAGE)
            take = min(PAGE - po, len(data) - i)
            self._page(node, pno)[po:po + take] = data[i:i + take]
            pos += take
            i += take
        node.size = max(node.size, off + len(data))
        node.wlog.append((off, bytes(data)))
        node.mtime_ns = node.ctime_ns = _now()
        return len(data)

    def _hide_beyond(self, node: Inode, size: int) -> None:
        """Bytes from ``size`` on read as zeros from now on."""
        for pno in [p for p in node.pages if p * PAGE >= size]:
            del node.pages[pno]
        pno, po = divmod(size, PAGE)
        if po:
            page = self._page(node, pno)
            page[po:] = bytes(PAGE - po)
        node.clip = min(node.clip, size)

    def truncate(self, ino: int, size: int) -> None:
        node = self.get(ino)
        if not node.is_file:
            raise FsError(errno.EISDIR)
        if size != node.size:
            self._hide_beyond(node, min(size, node.size))
            node.size = size
            node.wlog.append((size,))
        node.mtime_ns = node.ctime_ns = _now()

    # ------------------------------------------------------------ durability
    def _stage_path(self, ino: int) -> str:
        return f"{STAGE}/{ino}"

    def fsync_file(self, ino: int) -> None:
        """Make the file's data and size durable (fsync and fdatasync alike),
        and its owner and mode."""
        node = self.get(ino)
        if not node.is_file or (not node.dirty and not node.meta and ino in self.durable):
            return
        rel = self.durable.setdefault(ino, self._stage_path(ino))
        fd = self.disk.make_file(rel, node.uid, node.gid, node.mode, truncate=False)
        try:
            if os.fstat(fd).st_size > node.clip:
                os.ftruncate(fd, node.clip)
            for pno in sorted(node.pages):
                start = pno * PAGE
                if start < node.size:
                    os.pwrite(fd, node.pages[pno][: node.size - start], start)
            os.ftruncate(fd, node.size)
            os.fsync(fd)
        finally:
            os.close(fd)
        node.clip = node.size
        node.pages.clear()
        node.wlog.clear()
        node.meta = False

    def fsync_dir(self) -> int:
        """Commit the name journal, in order, and the owners and modes of
        directories and symlinks changed since. Returns how many entries."""
        n = len(self.journal)
        for entry in self.journal:
            getattr(self, f"_commit_{entry[0]}")(*entry[1:])
        self.journal.clear()
        for node in self.inodes.values():
            if node.meta and not node.is_file and (node.parent or node.ino == 1):
                if node.ino == 1:
                    set_owner(self.disk.fd, node.uid, node.gid, node.mode)
                else:
                    self.disk.set_owner(self.path(node), node.uid, node.gid, node.mode)
                node.meta = False
        if n:
            os.fsync(self.disk.fd)
        return n

    def sync(self) -> None:
        """Everything durable (a clean unmount)."""
        self.fsync_dir()
        for ino, node in list(self.inodes.items()):
            if node.is_file and node.parent:
                self.fsync_file(ino)

    def _commit_create(self, path: str, ino: int, mode: int, uid: int, gid: int) -> None:
        staged = self.durable.get(ino)
        if staged is not None and staged.startswith(STAGE + "/"):
            self.disk.rename(staged, path)
        else:
            os.close(self.disk.make_file(path, uid, gid, mode))
            node = self.inodes.get(ino)
            if node is not None:
                node.clip = 0  # the durable copy is empty: nothing of it is visible
        self.durable[ino] = path

    def _commit_mkdir(self, path: str, mode: int, uid: int, gid: int) -> None:
        self.disk.mkdir(path, uid, gid, mode)

    def _commit_symlink(self, path: str, target: bytes, uid: int, gid: int) -> None:
        self.disk.symlink(target, path, uid, gid)

    def _commit_rmdir(self, path: str) -> None:
        self.disk.rmdir(path)

    def _commit_unlink(self, path: str, ino: int) -> None:
        self._drop_durable(ino, path)

    def _drop_durable(self, ino: int, path: str) -> None:
        """A committed unlink: keep the contents staged while the file is open."""
        node = self.inodes.get(ino)
        if node is not None and node.is_file and node.opens > 0:
            self.disk.rename(path, self._stage_path(ino))
            self.durable[ino] = self._stage_path(ino)
        else:
            self.disk.unlink(path)
            self.durable.pop(ino, None)

    def _commit_rename(self, old: str, new: str, victim: int | None) -> None:
        st = self.disk.lstat(new)
        if victim is not None and st is not None and not stat.S_ISDIR(st.st_mode):
            vnode = self.inodes.get(victim)
            if vnode is not None and vnode.is_file and vnode.opens > 0:
                self._drop_durable(victim, new)
            else:
                self.durable.pop(victim, None)
        self.disk.rename(old, new)
        for ino, rel in list(self.durable.items()):
            if rel == old or rel.startswith(old + "/"):
                self.durable[ino] = new + rel[len(old):]

    def released(self, ino: int) -> None:
        """The last handle of an unlinked file went: free its contents."""
        node = self.inodes.get(ino)
        if node is None or node.opens > 0 or node.parent or not node.is_file:
            return
        rel = self.durable.get(ino)
        if rel is not None and rel.startswith(STAGE + "/") and not self._journal_mentions(ino):
            self.disk.unlink(rel)
            del self.durable[ino]
        if not self._journal_mentions(ino):
            del self.inodes[ino]

    def _journal_mentions(self, ino: int) -> bool:
        return any(e[0] == "create" and e[2] == ino for e in self.journal)

    # ------------------------------------------------------------ faults
    def crash(self, torn: bool = False, seed: int | None = None) -> dict[str, int]:
        """Drop everything not durable; ``torn``: each file with a committed
        name first keeps a random prefix of its un-fsynced changes, drawn
        from ``seed`` if given (the same writes and seed: the same prefixes),
        else from the mount's seeded stream."""
        lost_files = sum(1 for n in self.inodes.values() if n.is_file and n.dirty)
        kept = 0
        if torn:
            rng = random.Random(seed) if seed is not None else self.rng
            for ino, node in self.inodes.items():
                rel = self.durable.get(ino)
                if node.is_file and node.wlog and rel is not None and not rel.startswith(STAGE + "/"):
                    kept += self._keep_prefix(rel, node.wlog, rng)
        out = {"journal_dropped": len(self.journal), "dirty_files": lost_files, "torn_bytes_kept": kept}
        self.crashes += 1
        self.load()
        return out

    def _keep_prefix(self, rel: str, wlog: list[tuple], rng: random.Random) -> int:
        total = sum(len(e[1]) for e in wlog if len(e) == 2)
        budget = rng.randint(0, total)
        kept = 0
        fd = self.disk.open(rel, os.O_WRONLY)
        try:
            for e in wlog:
                if budget <= 0:  # the cut: nothing after it reached the disk
                    break
                if len(e) == 1:
                    os.ftruncate(fd, e[0])
                    continue
                chunk = e[1][:budget]
                os.pwrite(fd, chunk, e[0])
                budget -= len(chunk)
                kept += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        return kept

    def status(self) -> dict[str, int]:
        files = [n for n in self.inodes.values() if n.is_file]
        return {
            "inodes": len(self.inodes),
            "dirty_files": sum(1 for n in files if n.dirty),
            "dirty_bytes": sum(len(e[1]) for n in files for e in n.wlog if len(e) == 2),
            "journal": len(self.journal),
            "crashes": self.crashes,
        }
