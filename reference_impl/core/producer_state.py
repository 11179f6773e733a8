"""Idempotent-producer state of one partition.

Kafka keeps, per producer id, the producer epoch and the metadata of the last
five appended batches (ProducerStateManager / ProducerAppendInfo). A retried
batch that matches one of them is a duplicate: it is not appended again and
the producer gets the original offset back (notes/kafka-wire.md,
"Idempotence"). A batch whose first sequence does not follow the last one is
out of order. The state is derived from the log, so it is rebuilt from the
batches after a truncation or a restart.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final, Iterable

from .messages import Batch, Errors

MAX_CACHED_BATCHES: Final = 5
NO_SEQUENCE: Final = -1
INT32_MAX: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


@dataclass(frozen=True, slots=True, init=False)
class SequenceCheck:
    """Outcome of validating a produced batch: ``error`` NONE with
    ``duplicate`` set means "already in the log at that offset"."""

    error: int = Errors.NONE
    duplicate: BatchMeta | None = None

    def __init__(self, error: int = Errors.NONE, duplicate: BatchMeta | None = None) -> None:
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "duplicate", duplicate)


def _last_seq(first_seq: int, count: int) -> int:
    # sequences wrap at int32 max like Kafka's DefaultRecordBatch.incrementSequence
    last = first_seq + count - 1
    return last - INT32_MAX - 1 if last > INT32_MAX else last


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


@dataclass
class ProducerStateManager:
    producers: dict[int, ProducerEntry] = field(default_factory=dict)

    def check(self, producer_id: int, producer_epoch: int, base_sequence: int, count: int) -> SequenceCheck:
        """Validate a leader append (ProducerAppendInfo.checkSequence).

        A producer this partition has no state for is accepted at any
        sequence, as Kafka has since KIP-360 (2.5): its state may have gone
        with a truncated or expired log prefix, and refusing it would wedge
        a producer whose earlier batches are simply no longer here. (Before
        KIP-360 this was UNKNOWN_PRODUCER_ID.)"""
        if producer_id < 0 or base_sequence < 0:
            return SequenceCheck()
        entry = self.producers.get(producer_id)
        last_seq = _last_seq(base_sequence, count)
        if entry is None:
            return SequenceCheck()
        if producer_epoch < entry.epoch:
            return SequenceCheck(Errors.INVALID_PRODUCER_EPOCH)
        if producer_epoch > entry.epoch:
            # a bumped epoch starts its sequences again at 0
            if base_sequence != 0:
                return SequenceCheck(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return SequenceCheck()
        for meta in entry.batches:
            if meta.first_seq == base_sequence and meta.last_seq == last_seq:
                return SequenceCheck(duplicate=meta)
        if entry.last_seq == NO_SEQUENCE:
            ok = base_sequence == 0
        else:
            ok = base_sequence == _next_seq(entry.last_seq)
        if not ok:
            return SequenceCheck(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return SequenceCheck()

    def record(self, batch: Batch) -> None:
        """Remember an appended batch (leader or follower append)."""
        if batch.producer_id < 0 or batch.base_sequence < 0:
            return
        entry = self.producers.get(batch.producer_id)
        if entry is None or batch.producer_epoch > entry.epoch:
            entry = ProducerEntry(epoch=batch.producer_epoch)
            self.producers[batch.producer_id] = entry
        elif batch.producer_epoch < entry.epoch:
            return
        entry.batches.append(
            BatchMeta(batch.base_sequence, _last_seq(batch.base_sequence, batch.count), batch.base_offset, batch.last_offset)
        )

    def rebuild(self, batches: Iterable[Batch]) -> None:
        """Recompute from the log (after truncation or on load)."""
        self.producers.clear()
        for b in batches:
            self.record(b)
