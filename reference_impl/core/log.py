"""One partition's log: batches, LEO, HW, log start offset, epoch cache.

Seed 000 ("Log Storage Engine" role of UnifiedLog) and seed 001 §2.2.2:

* the LEO is the offset of the next record to be written;
* the HW never exceeds the LEO and, on a leader, only moves up
  (``maybe_increment_hw``); a follower copies ``min(leader HW, own LEO)``;
  truncation below the HW pulls it down with the log;
* every batch carries the leader epoch it was written in, and the leader-epoch
  cache records where each epoch began.

This class is sans-IO: each mutator returns the effects that persist it
(``LogAppend``, ``LogTruncate``, ``LogTruncateFully``, ``FileWrite`` of the
``leader-epoch-checkpoint``, ``Fsync``). Trace events are the partition's job
because only it knows the role and the reason.

Offsets are looked up by bisecting the batch base offsets so fetches stay
O(log n) however long the log grows (the simulator runs hours of traffic).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from .effects import Effect, FileWrite, Fsync, LogAppend, LogTruncate, LogTruncateFully
from .epoch_cache import LeaderEpochCache
from .messages import Batch, TopicPartition
from .storage import LeaderEpochCheckpoint, epoch_checkpoint, partition_log


def epoch_runs_if_several(batches: tuple[Batch, ...]) -> list[list[int]] | None:
    """:func:`epoch_runs` when ``batches`` span more than one leader epoch,
    else None (``effects.AppendTrace``'s one run, not built): nearly every
    follower's fetch is of one epoch."""
    last = batches[0].leader_epoch
    for b in batches:
        if b.leader_epoch != last:
            return epoch_runs(batches)
    return None


def epoch_runs(batches: tuple[Batch, ...]) -> list[list[int]]:
    """``[[epoch, start], ...]``: where each leader epoch starts among
    ``batches`` (consecutive batches of one epoch are one run). A follower's
    fetch may carry batches of several epochs; the ``append`` trace event
    names them all so the Log Matching check (seed 000, "Leader epochs &
    epoch-based truncation") compares logs batch by batch on every runtime.
    A tuple, and the last run's epoch kept as a native int: compiled, an
    iterable is walked by the generic iterator and ``runs[-1][0]`` compared
    as an object, on every batch a follower appends."""
    runs: list[list[int]] = []
    last = 0
    for b in batches:
        ep = b.leader_epoch
        if not runs or last != ep:
            runs.append([ep, b.base_offset])
            last = ep
    return runs


def last_at_or_before(bases: list[int], x: int) -> int:
    """``bisect_right(bases, x) - 1`` over ascending ``bases``: the last
    index whose value is at or before ``x`` (-1: none). Looked for from the
    tail first: a follower reads a batch or a few behind the LEO and a
    consumer up to the HW, a batch or a few behind it (a bisection over a
    long log, by generic comparisons, was ~2% of a busy seed); further back,
    a bisection over the ints natively (``bisect_right`` is a generic call
    comparing boxed ints).

    First, one guess checked: a log of one-record batches (a producer's
    send a batch, as the simulated workloads send) holds batch ``k`` at
    ``bases[0] + k``, so index ``x - bases[0]`` is the answer when its base
    is at or before ``x`` and the next one's past it, which is the answer's
    definition for any ascending ``bases``: a consumer reading far behind
    the tail finds its batch in two reads, not in the walk and a bisection."""
    i = len(bases) - 1
    if i > 0:
        g = x - bases[0]
        if 0 <= g < i and bases[g] <= x < bases[g + 1]:
            return g
    stop = i - 8
    while i >= 0 and bases[i] > x:
        i -= 1
        if i == stop:
            # bases[i + 1:] are all past x: bisect [0, i + 1)
            lo = 0
            hi = i + 1
            while lo < hi:
                mid = (lo + hi) // 2
                if x < bases[mid]:
                    hi = mid
                else:
                    lo = mid + 1
            return lo - 1
    return i


@dataclass
class PartitionLog:
    tp: TopicPartition
    log_start_offset: int = 0
    hw: int = 0
    #: offsets below this are known to be fsynced (Kafka's recovery point)
    recovery_point: int = 0
    #: fsync after this many appended records; 0 = never on append (Kafka's default)
    flush_interval_messages: int = 0
    batches: list[Batch] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    epochs: LeaderEpochCache = field(default_factory=LeaderEpochCache)
    leo: int = 0
    unflushed_messages: int = 0

    def __post_init__(self) -> None:
        self.name = partition_log(self.tp)
        self.epoch_file = epoch_checkpoint(self.tp)
        if self.leo < self.log_start_offset:
            self.leo = self.log_start_offset

    # -- loading -----------------------------------------------------------

    @classmethod
    def load(
        cls,
        tp: TopicPartition,
        entries: list[Any],
        log_start_offset: int | None,
        epoch_checkpoint_data: LeaderEpochCheckpoint | None,
        hw_checkpoint: int | None,
        recovery_point: int | None = None,
        flush_interval_messages: int = 0,
    ) -> tuple["PartitionLog", list[Effect]]:
        """Open a log from what survived on disk.

        The epoch cache is rebuilt like Kafka's recovery does: start from the
        checkpoint, drop entries past the recovered LEO, then re-assign the
        epoch of every recovered batch (which also repairs non-monotonic
        entries a lost checkpoint write left behind). The HW comes from the
        periodic checkpoint, so it is a lower bound of the live value (seed
        000, "HW checkpoint is periodic, not synchronous"), capped at the LEO.
        """
        batches = [b for b in entries if isinstance(b, Batch)]
        start = log_start_offset if log_start_offset is not None else (batches[0].base_offset if batches else 0)
        log = cls(tp=tp, log_start_offset=start, flush_interval_messages=flush_interval_messages)
        log.leo = start
        for b in batches:
            if b.next_offset <= log.leo:
                continue
            if b.base_offset != log.leo:
                if log.batches:
                    break  # a hole: keep the contiguous prefix only (a torn tail)
                log.log_start_offset = log.leo = b.base_offset
            log.batches.append(b)
            log.bases.append(b.base_offset)
            log.leo = b.next_offset
        if epoch_checkpoint_data is not None:
            for epoch, s in epoch_checkpoint_data.entries:
                log.epochs.assign(epoch, s)
        original = log.epochs.entries()
        if log.epochs.starts and log.epochs.starts[-1] > log.leo:
            log.epochs.truncate_from_end(log.leo + 1)
        for b in log.batches:
            log.epochs.assign(b.leader_epoch, b.base_offset)
        log.epochs.truncate_from_start(log.log_start_offset)
        effects: list[Effect] = []
        if log.epochs.entries() != original:
            effects.append(log._checkpoint_epochs())
        hw = hw_checkpoint if hw_checkpoint is not None else 0
        log.hw = max(log.log_start_offset, min(hw, log.leo))
        log.recovery_point = log.leo
        return log, effects

    # -- queries -----------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.leo)

    def batch_index(self, offset: int) -> int:
        """Index of the first batch holding an offset >= ``offset``."""
        i = last_at_or_before(self.bases, offset)
        if i < 0:
            return 0
        b = self.batches[i]
        if b.base_offset + b.count <= offset:
            return i + 1
        return i

    def read(self, offset: int, upto: int, max_batches: int = 1000) -> tuple[Batch, ...]:
        """Whole batches from the one holding ``offset``, each ending at or
        before ``upto`` (the LEO for followers, the HW for consumers)."""
        if offset >= upto or not self.batches:
            return ()
        i = self.batch_index(offset)
        if upto >= self.leo:
            j = len(self.batches)  # the common case: read to the end
        else:
            k = last_at_or_before(self.bases, upto - 1)
            if k < 0:
                return ()
            bk = self.batches[k]
            j = k + 1 if bk.base_offset + bk.count <= upto else k
        j = min(j, i + max_batches)
        if j <= i:
            return ()
        if j == i + 1:
            # one batch (a follower a produce behind): no slice list made and freed
            return (self.batches[i],)
        return tuple(self.batches[i:j])

    def first_batch_at_or_after_timestamp(self, target: int, upto: int) -> Batch | None:
        """The first batch below ``upto`` whose max timestamp is at least
        ``target`` (UnifiedLog.fetchOffsetByTimestamp, batch by batch: the
        record inside is the runtime's to find). A linear scan: the core keeps
        no time index, and ListOffsets by timestamp is rare."""
        for b in self.batches:
            if b.base_offset >= upto:
                return None
            if b.max_timestamp >= target:
                return b
        return None

    def batch_of_max_timestamp(self, upto: int) -> Batch | None:
        """The first batch below ``upto`` holding the log's largest timestamp
        (ListOffsets MAX_TIMESTAMP), or None when no batch has a timestamp."""
        best: Batch | None = None
        for b in self.batches:
            if b.base_offset >= upto:
                break
            if b.max_timestamp >= 0 and (best is None or b.max_timestamp > best.max_timestamp):
                best = b
        return best

    def batch_at(self, offset: int) -> Batch | None:
        i = bisect_right(self.bases, offset) - 1
        if i >= 0 and self.batches[i].next_offset > offset:
            return self.batches[i]
        return None

    # -- appends -----------------------------------------------------------

    def append_as_leader(
        self,
        leader_epoch: int,
        count: int,
        payload: Any,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        max_timestamp: int = -1,
    ) -> tuple[Batch, list[Effect]]:
        """Assign offsets and the leader epoch to a produced batch and append it."""
        batch = Batch(self.leo, leader_epoch, count, payload, producer_id, producer_epoch, base_sequence, max_timestamp)
        return batch, self._append((batch,))

    def append_as_follower(self, batches: tuple[Batch, ...]) -> list[Effect]:
        """Append batches fetched from the leader, keeping their offsets and
        epochs. Batches the log already holds are skipped; a batch starting
        past the LEO (the leader's log start moved beyond us) restarts the log
        there (Kafka's truncateFullyAndStartAt)."""
        effects: list[Effect] = []
        self.append_as_follower_into(batches, effects)
        return effects

    def append_as_follower_into(self, batches: tuple[Batch, ...], effects: list[Effect]) -> None:
        """:meth:`append_as_follower`, its effects appended to ``effects``
        (the follower's, for the whole fetch answer: no list made and
        concatenated per append on every follower)."""
        leo = self.leo
        fresh = batches if batches and batches[0].base_offset == leo else tuple(
            b for b in batches if b.base_offset + b.count > leo
        )
        if not fresh:
            return
        if fresh[0].base_offset > leo:
            effects += self.truncate_fully(fresh[0].base_offset)
        elif fresh[0].base_offset < leo:
            # a batch straddling our LEO: our tail diverged mid-batch; drop it
            effects += self.truncate_to(fresh[0].base_offset)
        self._append_into(fresh, effects)

    def _append(self, batches: tuple[Batch, ...]) -> list[Effect]:
        effects: list[Effect] = []
        self._append_into(batches, effects)
        return effects

    def _append_into(self, batches: tuple[Batch, ...], effects: list[Effect]) -> None:
        effects.append(LogAppend(self.name, batches))
        epochs_changed = False
        latest = self.epochs.latest_epoch
        for b in batches:
            self.batches.append(b)
            self.bases.append(b.base_offset)
            self.leo = b.base_offset + b.count
            self.unflushed_messages += b.count
            if b.leader_epoch != latest and self.epochs.assign(b.leader_epoch, b.base_offset):
                epochs_changed = True
                latest = self.epochs.latest_epoch
        if epochs_changed:
            # Kafka's assign() flushes the checkpoint synchronously
            effects.append(self._checkpoint_epochs())
            effects.append(Fsync(self.epoch_file))
        if self.flush_interval_messages and self.unflushed_messages >= self.flush_interval_messages:
            effects += self.flush()

    def assign_epoch_start(self, leader_epoch: int, start_offset: int) -> list[Effect]:
        """A new leader records where its epoch starts (makeLeader)."""
        if self.epochs.assign(leader_epoch, start_offset):
            return [self._checkpoint_epochs(), Fsync(self.epoch_file)]
        return []

    def flush(self) -> list[Effect]:
        self.unflushed_messages = 0
        self.recovery_point = self.leo
        return [Fsync(self.name)]

    # -- truncation ----------------------------------------------------------

    def truncate_to(self, offset: int) -> list[Effect]:
        """Remove every record at or after ``offset``. A batch straddling the
        offset goes too (Kafka truncates a segment at a batch boundary), so the
        new LEO may be a little lower than asked."""
        if offset >= self.leo:
            # Kafka (UnifiedLog.truncateTo) still truncates the epoch cache: a
            # broker that led an epoch without appending to it holds an entry
            # at its LEO, and keeping it makes every fetch it sends as a
            # follower diverge again (lastFetchedEpoch names that epoch).
            if self.epochs.truncate_from_end(self.leo):
                return [self._checkpoint_epochs()]
            return []
        offset = max(offset, self.log_start_offset)
        i = bisect_right(self.bases, offset) - 1
        if i >= 0 and self.bases[i] < offset:
            # batch i straddles or ends at offset
            if self.batches[i].next_offset <= offset:
                i += 1
            else:
                offset = self.bases[i]
        else:
            i = max(i, 0)
        del self.batches[i:]
        del self.bases[i:]
        self.leo = offset
        self.hw = min(self.hw, self.leo)
        self.recovery_point = min(self.recovery_point, self.leo)
        effects: list[Effect] = [LogTruncate(self.name, offset)]
        if self.epochs.truncate_from_end(offset):
            # Kafka flushes the checkpoint asynchronously after truncation
            effects.append(self._checkpoint_epochs())
        return effects

    def truncate_fully(self, start_offset: int) -> list[Effect]:
        """Drop the whole log and restart it empty at ``start_offset``."""
        self.batches.clear()
        self.bases.clear()
        self.log_start_offset = start_offset
        self.leo = start_offset
        self.hw = start_offset
        self.recovery_point = start_offset
        self.unflushed_messages = 0
        self.epochs.clear()
        return [LogTruncateFully(self.name, start_offset), self._checkpoint_epochs()]

    # -- high watermark ------------------------------------------------------

    def maybe_increment_hw(self, new_hw: int) -> bool:
        """Leader rule: the HW only moves up and never past the LEO."""
        new_hw = min(new_hw, self.leo)
        if new_hw > self.hw:
            self.hw = new_hw
            return True
        return False

    def set_follower_hw(self, leader_hw: int) -> bool:
        """Follower rule: HW = min(leader HW, own LEO) (seed 003, fetch loop)."""
        new_hw = max(self.log_start_offset, min(leader_hw, self.leo))
        if new_hw != self.hw:
            self.hw = new_hw
            return True
        return False

    # -- helpers -------------------------------------------------------------

    def _checkpoint_epochs(self) -> FileWrite:
        return FileWrite(self.epoch_file, LeaderEpochCheckpoint(self.epochs.entries()))
