"""The leader-epoch cache: leader epoch -> start offset of that epoch.

Seed 000, "LeaderEpochFileCache, epoch -> start-offset". Every log keeps an
ascending list of ``(epoch, start_offset)`` entries. The end offset of epoch N
is the start offset of the next cached epoch (or the LEO for the latest
epoch), which is exactly the answer OffsetsForLeaderEpoch gives and the pivot
a returning follower truncates to (KIP-101 / KIP-279).

The cache is pure state; :class:`reference_impl.core.log.PartitionLog` turns
its changes into ``FileWrite`` / ``Fsync`` effects of the
``leader-epoch-checkpoint`` file.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Final

UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1


@dataclass
class LeaderEpochCache:
    """Ascending ``(epoch, start_offset)`` entries, both strictly increasing."""

    epochs: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)

    @classmethod
    def from_entries(cls, entries: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> "LeaderEpochCache":
        cache = cls()
        for epoch, start in entries:
            cache.assign(epoch, start)
        return cache

    # -- queries -----------------------------------------------------------

    def entries(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.epochs, self.starts))

    def is_empty(self) -> bool:
        return not self.epochs

    @property
    def latest_epoch(self) -> int:
        """The latest cached epoch, or ``UNDEFINED_EPOCH`` when empty."""
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def start_offset_of(self, epoch: int) -> int | None:
        i = bisect_left(self.epochs, epoch)
        if i < len(self.epochs) and self.epochs[i] == epoch:
            return self.starts[i]
        return None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which ``offset`` was written (largest start <= offset)."""
        i = bisect_right(self.starts, offset) - 1
        return self.epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for OffsetsForLeaderEpoch (seed 000, endOffsetFor).

        * undefined request -> ``(-1, -1)``;
        * the latest epoch -> ``(epoch, LEO)``;
        * otherwise the largest cached epoch <= request, ending where the next
          higher cached epoch starts; if the request is below every cached
          epoch, the requested epoch itself ending at the first start offset;
        * a request above every cached epoch (or an empty cache) -> ``(-1, -1)``.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.epochs and self.epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        hi = bisect_right(self.epochs, requested_epoch)  # first epoch > requested
        if hi >= len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_start = self.starts[hi]
        if hi == 0:
            return requested_epoch, higher_start
        return self.epochs[hi - 1], higher_start

    # -- updates (each returns True when the cache changed) ------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``.

        Kafka's ``assign``: nothing to do when the latest entry already has this
        epoch and a start offset <= the new one; otherwise entries that would
        break monotonicity (an epoch >= the new one, or a start offset >= the
        new one) are removed first (maybeTruncateNonMonotonicEntries) and the
        entry is appended.
        """
        if epoch < 0 or start_offset < 0:
            return False
        if self.epochs and self.epochs[-1] == epoch and start_offset >= self.starts[-1]:
            return False
        self._truncate_non_monotonic(epoch, start_offset)
        self.epochs.append(epoch)
        self.starts.append(start_offset)
        return True

    def _truncate_non_monotonic(self, epoch: int, start_offset: int) -> None:
        keep = [
            (e, s) for e, s in zip(self.epochs, self.starts) if e < epoch and s < start_offset
        ]
        if len(keep) != len(self.epochs):
            self.epochs = [e for e, _ in keep]
            self.starts = [s for _, s in keep]

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop every entry starting at or after ``end_offset`` (log truncated to it)."""
        if end_offset < 0 or not self.starts or self.starts[-1] < end_offset:
            return False
        i = bisect_left(self.starts, end_offset)
        del self.epochs[i:]
        del self.starts[i:]
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start moved to ``start_offset``: drop entries wholly below it
        and move the entry covering it to start there (Kafka truncateFromStart)."""
        i = bisect_right(self.starts, start_offset) - 1
        if i < 0:
            return False
        if i == 0 and self.starts[0] == start_offset:
            return False
        epoch = self.epochs[i]
        del self.epochs[: i + 1]
        del self.starts[: i + 1]
        self.epochs.insert(0, epoch)
        self.starts.insert(0, start_offset)
        return True

    def clear(self) -> bool:
        changed = bool(self.epochs)
        self.epochs.clear()
        self.starts.clear()
        return changed
