"""A poll's list of ``[offset, value]`` records read as 64-bit ints, compiled.

The operations the queue scan reads one at a time (not into a batch of
columns, :mod:`checkers.queue.opbatch`) are few, but a simulated seed's
final reads are among them: one poll per key returning the whole of the
key's log (~22k records in a 60 s seed). Two folds read every record of
such a poll: the projection (each record a pair of its key's columns,
:meth:`checkers.queue.project.Projector.feed`) and the realtime lag (the
poll's highest offset per key, :func:`checkers.queue.observe.max_offsets`).
Each tested and took them a pass of ``map`` at a time, about ten passes
over records scattered over the heap: ~10 ms of a 60 s seed's ~115 ms of
checkers. Here one compiled loop, called once by each fold, reads them once a fold
(``i64``: unboxed as in :meth:`checkers.queue.opbatch.OpBatches._poll_reads`).

Both answer only for the plain list every history spells (each record a
two-element list of ints in ``[0, 2^63)``); anything else is None and the
caller reads the records as it did, so what a fold makes of them is
unchanged. Compiled (:data:`reference_impl.accel.MODULES`); as Python it is
the same rule, one record at a time.
"""

from __future__ import annotations

from typing import Any, Final

from librt.strings import BytesWriter, write_i64_le

try:  # the accelerator's 64-bit int (reference_impl.accel): as Python, an int
    from mypy_extensions import i64
except ImportError:  # pragma: no cover - mypy is optional (the accel extra)
    i64 = int  # type: ignore[misc, assignment]

#: a list of at least this many records is read here by the folds; a
#: shorter one costs them less as they read it themselves
BULK_RECORDS: Final = 8


def records_i64(prs: list[Any]) -> tuple[bytes, bytes, int] | None:
    """``prs``'s offsets and values as 64-bit little-endian ints and its
    highest offset (-1: no record), or None unless every record is a
    two-element list of ints in ``[0, 2^63)``."""
    w_off = BytesWriter()
    w_val = BytesWriter()
    mx: i64 = -1
    for q_ in prs:
        if type(q_) is not list:
            return None
        q: list[Any] = q_
        if len(q) != 2:
            return None
        o_ = q[0]
        v_ = q[1]
        if type(o_) is not int or type(v_) is not int:
            return None
        try:  # compiled, past 64 bits raises; as Python, i64 is int
            o: i64 = o_
            v: i64 = v_
        except (ValueError, OverflowError):
            return None
        if (o | v) >> 63:  # a negative (or, as Python, past 64 bits)
            return None
        write_i64_le(w_off, o)
        write_i64_le(w_val, v)
        if o > mx:
            mx = o
    return w_off.getvalue(), w_val.getvalue(), mx


def max_offset_i64(prs: list[Any]) -> int | None:
    """``prs``'s highest offset (-1: no record), or None unless every
    record is a two-element list of ints in ``[0, 2^63)``: the same reading
    as :func:`records_i64`, whose columns the lag does not need (a final
    read's few long lists: one rule of what a record is, not two loops)."""
    got = records_i64(prs)
    return None if got is None else got[2]
