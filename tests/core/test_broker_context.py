"""The broker context's deadline bookkeeping (reference_impl.core.broker_context):
what ``Node._arm`` reads after every message to decide whether to re-arm."""

from __future__ import annotations

from reference_impl.core.broker_context import NO_DEADLINE, BrokerContext


def test_no_deadline_is_a_compiled_short_int_beyond_any_run() -> None:
    """The sentinel fits mypyc's unboxed int range (63-bit signed): ``1 << 62``
    did not, so every comparison of a deadline with it took the slow path."""
    assert -(1 << 62) <= NO_DEADLINE < (1 << 62)
    assert NO_DEADLINE > 10 ** 18  # later than any run's clock (ms): ~31 million years


def test_take_soonest_returns_the_earliest_noted_deadline_once() -> None:
    ctx = BrokerContext(1)
    assert ctx.take_soonest() == NO_DEADLINE
    for at in (500, 300, 900):
        ctx.note_deadline(at)
    assert ctx.take_soonest() == 300
    assert ctx.take_soonest() == NO_DEADLINE
