"""A node's disk: logs and small files behind a page cache.

Log and file effects update the cache; ``Fsync`` makes the named log/file (or
everything) durable. A process crash (SIGKILL) keeps the page cache — the
kernel still holds it — so a restart sees everything written; a power loss
drops whatever was not fsynced (seed 002, "unclean shutdown ... lose some of its
logs"). ``stored_state`` builds the :class:`StoredState` a fresh node starts
from.

Each log keeps a durable copy and the length of the prefix the cache shares
with it, so an fsync copies only what changed since the last one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from reference_impl.core.effects import FileDelete, FileWrite, Fsync, LogAppend, LogTruncate, LogTruncateFully
from reference_impl.core.storage import StoredState


def entry_offset(entry: Any) -> int:
    """A log entry's offset: ``Batch.base_offset`` or ``MetadataEntry.offset``."""
    off = getattr(entry, "base_offset", None)
    if off is None:
        off = getattr(entry, "offset")
    return off


@dataclass
class _Log:
    cache: list[Any] = field(default_factory=list)
    cache_start: int = 0
    durable: list[Any] = field(default_factory=list)
    durable_start: int = 0
    synced: int = 0  # cache[:synced] == durable[:synced] and nothing else differs below it

    def fsync(self) -> None:
        del self.durable[self.synced :]
        self.durable.extend(self.cache[self.synced :])
        self.durable_start = self.cache_start
        self.synced = len(self.cache)

    @property
    def dirty(self) -> bool:
        return self.synced != len(self.cache) or len(self.durable) != len(self.cache) or self.durable_start != self.cache_start


_DELETED: Final = object()


class Disk:
    def __init__(self) -> None:
        self.logs: dict[str, _Log] = {}
        self.files_cache: dict[str, Any] = {}
        self.files_durable: dict[str, Any] = {}
        self.fsyncs = 0

    # -- effects -------------------------------------------------------------
    def apply(self, eff: Any) -> None:
        # isinstance, not type(eff) is ...: it narrows the type, so the
        # compiled code reads the effect's fields natively, not by name (an
        # append, the common case, on every replica for every batch)
        if isinstance(eff, LogAppend):
            lg = self.logs.get(eff.log)
            if lg is None:
                lg = self.logs[eff.log] = _Log()
            entries = eff.entries
            if len(entries) == 1:
                # one batch (nearly every append): an append, where extend
                # by a tuple took the general path of list_extend
                lg.cache.append(entries[0])
            else:
                lg.cache.extend(entries)
        elif isinstance(eff, Fsync):
            self.fsync(eff.target)
        elif isinstance(eff, LogTruncate):
            lg = self.logs.get(eff.log)
            if lg is None:
                return
            cache = lg.cache
            n = len(cache)
            while n and entry_offset(cache[n - 1]) >= eff.offset:
                n -= 1
            del cache[n:]
            if lg.synced > n:
                lg.synced = n
        elif isinstance(eff, LogTruncateFully):
            lg = self.logs.get(eff.log)
            if lg is None:
                lg = self.logs[eff.log] = _Log()
            lg.cache = []
            lg.cache_start = eff.start_offset
            lg.synced = 0
        elif isinstance(eff, FileWrite):
            self.files_cache[eff.path] = eff.data
        elif isinstance(eff, FileDelete):
            self.files_cache[eff.path] = _DELETED
        else:
            raise TypeError(f"not a disk effect: {eff!r}")

    def fsync(self, target: str | None = None) -> None:
        self.fsyncs += 1
        if target is None:
            for lg in self.logs.values():
                lg.fsync()
            for path in list(self.files_cache):
                self._sync_file(path)
            return
        one = self.logs.get(target)
        if one is not None:
            one.fsync()
        if target in self.files_cache:
            self._sync_file(target)

    def _sync_file(self, path: str) -> None:
        v = self.files_cache[path]
        if v is _DELETED:
            self.files_durable.pop(path, None)
        else:
            self.files_durable[path] = v

    # -- crashes -------------------------------------------------------------
    def lose_unfsynced(self) -> dict[str, int]:
        """Power loss: the page cache is gone. Returns, per log, how many
        cached entries were lost (for the nemesis op's value)."""
        lost: dict[str, int] = {}
        for name, lg in self.logs.items():
            if lg.dirty:
                lost[name] = max(0, len(lg.cache) - lg.synced)
            lg.cache = list(lg.durable)
            lg.cache_start = lg.durable_start
            lg.synced = len(lg.cache)
        self.files_cache = dict(self.files_durable)
        return lost

    def stored_state(self) -> StoredState:
        """What a restarting process reads: the page cache (after a power loss
        that is the durable state, see :meth:`lose_unfsynced`)."""
        st = StoredState()
        for name, lg in self.logs.items():
            st.logs[name] = list(lg.cache)
            st.log_start_offsets[name] = lg.cache_start
        for path, v in self.files_cache.items():
            if v is not _DELETED:
                st.files[path] = v
        return st
