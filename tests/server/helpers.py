"""Builders shared by the server tests: real v2 batches from kafka-python."""

from __future__ import annotations

from kafka.record import MemoryRecordsBuilder

from reference_impl.core.messages import Batch


def v2_batch(values: list[bytes], producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 24)
    if producer_id >= 0:
        b.set_producer_state(producer_id, producer_epoch, base_sequence, False)
    for v in values:
        b.append(timestamp=1_700_000_000_000, key=None, value=v, headers=[])
    b.close()
    return bytes(b.buffer())


def core_batch(base: int, epoch: int, values: list[bytes]) -> Batch:
    return Batch(base, epoch, len(values), v2_batch(values))
