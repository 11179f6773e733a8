"""A list of operations scanned in batches folds as fed one at a time.

``check_history`` given a list (a simulated seed's checkers) reads the
common operations into batches of flat columns
(:func:`checkers.queue.scan.scan_ops`, :mod:`checkers.queue.opbatch`)
rather than feeding every fold each operation
(:meth:`checkers.queue.scan.QueueScan.of`). These tests hold the batches
to the operation-at-a-time fold: every fold's state (key order, each key's
events, the op table, the lag, consume counts, statistics) and the whole
results.json (timings aside) the same, whatever the batch size, on
histories with every unusual operation spliced between common ones, every
anomaly builder's, messy ones, and the fields a simulated seed's sends
carry (``idempotent``, the acks spellings).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from checkers.check import check_history
from checkers.history import op as op_module
from checkers.history.op import Op
from checkers.queue.lines import Batch, Slow
from checkers.queue.opbatch import OpBatches
from checkers.queue.scan import MalformedOp, QueueScan, event_pairs, scan_ops
from checkers.queue.synth import HistoryBuilder, valid_history
from tests.checkers.test_acyclic_proof import _messy
from tests.checkers.test_columnar_reading import _folds, _spliced_history, _untimed, every_field
from tests.checkers.test_queue_anomalies import CASES

SIZES = [(1 << 16, 256), (5, 0), (64, 1 << 30), (997, 0)]


def _with_send_fields(ops: list[Op], seed: int) -> list[Op]:
    """``ops`` with the fields a simulated seed's sends carry, varied:
    ``idempotent`` true, false or absent on the invocation and sometimes on
    the completion, acks spelt all, -1, 1, 0 or not at all."""
    out = []
    spellings = ("all", "-1", "1", "0", None)
    for i, op in enumerate(ops):
        extra = dict(op.extra)
        if op.f == "send" and op.type == "invoke":
            j = (op.process * 7 + seed) % 5
            if spellings[j] is None:
                extra.pop("acks", None)
            else:
                extra["acks"] = spellings[j]
            if (op.process + seed) % 3:
                extra["idempotent"] = bool((op.process + seed) % 2)
        elif op.f == "send" and op.type == "ok" and (i + seed) % 4 == 0:
            extra["idempotent"] = bool(i % 3)
        out.append(Op(op.type, op.f, op.value, op.process, op.time, op.index, op.error, extra))
    return out


def _same(ops: list[Op]) -> None:
    reference = _folds(QueueScan.of(ops))
    for batch, small in SIZES:
        got = _folds(scan_ops(ops, batch, small))
        for part in reference:  # repr: True is not 1 there, nor 2.0 2
            assert repr(got[part]) == repr(reference[part]), (part, batch, small)
    for kw in ({}, {"test": {"sub_via": ["subscribe"]}}):
        by_ops = json.dumps(_untimed(check_history(ops, **kw)))
        by_one = json.dumps(_untimed(check_history(QueueScan.of(ops), **kw)))
        assert by_ops == by_one


def test_a_history_with_every_unusual_operation_spliced_in_folds_the_same_in_batches():
    _same(_spliced_history())


def test_every_field_the_projection_reads_folds_the_same_in_batches():
    _same(every_field())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_fields_of_a_simulated_seeds_sends_fold_the_same_in_batches(seed):
    ops = _with_send_fields(valid_history(2000, 3, 8, seed=seed, max_poll=20), seed)
    _same(ops)
    assert any(op.extra.get("idempotent") is False for op in ops)
    assert any(op.extra.get("idempotent") is True for op in ops)


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_anomaly_builders_fold_the_same_in_batches(name, build, expected):
    _same(build(False).ops)
    _same(build(True).ops)


@pytest.mark.parametrize("seed", [1, 2])
def test_messy_histories_fold_the_same_in_batches(seed):
    _same(_messy(seed))


def _odd(case: str) -> list[Op] | None:
    """Common-looking operations but for one value the batches must not
    take (``case``), after a few common ones."""
    b = HistoryBuilder()
    for i in range(4):
        b.send(0, "t-0", i, i)
    b.poll(1, {"t-0": [[0, 0], [1, 1]]})
    polls: dict[str, Any] = {"bool-value": {"t-0": [[2, True]]}, "bool-offset": {"t-0": [[False, 2]]},
                             "float": {"t-0": [[2, 2.0]]}, "past-64-bits": {"t-0": [[2, 1 << 64]]},
                             "three-elements": {"t-0": [[2, 2, 0]]}, "tuple-record": {"t-0": [(2, 2)]},
                             "no-records": {"t-0": None}, "int-key": {0: [[2, 2]]},
                             "negative": {"t-0": [[2, -2]]},
                             # refused after a record or a key written: what was
                             # written of the poll is cut back (checkers.queue.opbatch._polled)
                             "2^63-after-a-record": {"t-0": [[2, 2], [3, 1 << 63]]},
                             "negative-in-a-second-key": {"t-0": [[2, 2]], "t-1": [[0, -1]]},
                             "2^64-in-a-second-key": {"t-0": [[2, 2], [3, 3]], "t-1": [[0, 1 << 64]]},
                             # the largest value the batch holds, taken
                             "2^63-1": {"t-0": [[2, (1 << 63) - 1]]}}
    if case in polls:
        b.invoke(1, "poll", [["poll"]])
        b.complete(1, "ok", [["poll", polls[case]]])
    elif case == "unhashable-idempotent":
        b.invoke(2, "send", [["send", "t-0", 7]], acks="all", idempotent=[1])
        b.complete(2, "ok", [["send", "t-0", [4, 7]]])
    elif case == "idempotent-on-a-poll":
        b.invoke(1, "poll", [["poll"]], idempotent=True)
        b.complete(1, "ok", [["poll", {"t-0": [[2, 2]]}]])
    elif case == "acks-as-a-number":
        b.invoke(2, "send", [["send", "t-0", 8]], acks=-1)
        b.complete(2, "ok", [["send", "t-0", [4, 8]]])
    elif case == "unknown-acks":
        b.invoke(2, "send", [["send", "t-0", 11]])
        b.complete(2, "ok", [["send", "t-0", [4, 11]]], acks="2")
    elif case in ("float-time", "float-index"):
        # an int field of another type (Op declares time and index int): read
        # one at a time, where the compiled reading of the declared int
        # raised. The compiled Op checks its declared types itself, so there
        # no such operation exists (None); the Python one takes it
        b.invoke(1, "poll", [["poll"]])
        op = Op("ok", "poll", [["poll", {"t-0": [[2, 2]]}]], 1, b.t + 1, len(b.ops))
        try:
            if case == "float-time":
                op.time = float(op.time)  # type: ignore[assignment]
            else:
                op.index = float(op.index)  # type: ignore[assignment]
        except TypeError:
            return None
        b.ops.append(op)
    elif case == "error":
        b.invoke(3, "poll", [["poll"]])
        b.ops.append(Op("ok", "poll", [["poll", {"t-0": [[0, 0]]}]], 3, b.t + 1, len(b.ops), error="odd"))
    else:
        raise AssertionError(case)
    b.send(0, "t-0", 9, 5)
    b.poll(1, {"t-0": [[3, 3], [4, 9]]})
    return b.ops


ODD = ["bool-value", "bool-offset", "float", "past-64-bits", "three-elements", "tuple-record", "no-records",
       "int-key", "negative", "2^63-after-a-record", "negative-in-a-second-key", "2^64-in-a-second-key",
       "2^63-1", "unhashable-idempotent", "idempotent-on-a-poll", "acks-as-a-number",
       "unknown-acks", "error", "float-time", "float-index"]


@pytest.mark.parametrize("case", ODD)
def test_values_the_batches_cannot_hold_are_folded_one_at_a_time_the_same(case):
    ops = _odd(case)
    if ops is None:  # the compiled Op refused the field: no scan can meet such an operation
        assert case in ("float-time", "float-index") and op_module.__file__.endswith(".so")
        return
    try:
        reference: Any = repr(_folds(QueueScan.of(ops)))
    except MalformedOp as e:
        reference = str(e)
    for batch, small in SIZES:
        try:
            got: Any = repr(_folds(scan_ops(ops, batch, small)))
        except MalformedOp as e:
            got = str(e)
        assert got == reference


def test_a_malformed_operation_is_the_same_one_line_error_in_batches():
    b = HistoryBuilder()
    b.send(0, "t-0", 1, 0)
    b.invoke(1, "poll", [["poll"]])
    b.complete(1, "ok", [["poll", {"t-0": [[True, 1]]}]])
    with pytest.raises(MalformedOp) as one:
        QueueScan.of(b.ops)
    with pytest.raises(MalformedOp) as batched:
        scan_ops(b.ops)
    assert str(one.value) == str(batched.value)


def test_a_batch_holds_its_pairs_by_key_and_a_refused_poll_leaves_neither_pairs_nor_key():
    """A list's batches hold each key's pairs apart, with each event's
    highest offset (checkers/queue/opbatch.py, ``Batch.key_off``,
    ``key_val``, ``emax``): put back in event order
    (:func:`checkers.queue.scan.event_pairs`) they are the operations'
    records in history order. A poll refused after writing a key new to
    the reading (a negative value in its second key) is read one at a
    time, and neither its pairs nor that key stay in the next batch."""
    b = HistoryBuilder()
    b.send(0, "t-0", 7, 0)
    b.poll(1, {"t-0": [[0, 7]]})
    b.invoke(1, "poll", [["poll"]])
    b.complete(1, "ok", [["poll", {"t-0": [[0, 7]], "t-9": [[0, -1]]}]])
    b.send(0, "t-1", 8, 0)
    b.poll(1, {"t-1": [[0, 8]], "t-0": [[0, 7], [1, 9]]})
    b.poll(1, {"t-0": []})
    items: list[Any] = []
    OpBatches(items.append).run(b.ops)
    batches = [x for x in items if type(x) is Batch]
    assert [type(x) for x in items] == [Batch, Slow, Batch]
    first, last = batches
    assert first.keys == ["t-0"] and last.keys == ["t-0", "t-1"]
    assert [a.tolist() for a in last.key_off] == [[0, 1], [0, 0]]
    assert [a.tolist() for a in last.key_val] == [[7, 9], [8, 8]]
    assert last.off is None and last.emax.tolist() == [0, 0, 1, -1]
    off, val = event_pairs(last)
    assert off.tolist() == [0, 0, 0, 1] and val.tolist() == [8, 8, 7, 9]
    assert last.ev_key.tolist() == [1, 1, 0, 0] and last.ev_n.tolist() == [1, 1, 2, 0]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("batch", [1 << 16, 5])
def test_the_scan_hands_over_the_nemesis_operations_in_history_order(seed, batch):
    """``scan_ops(..., nemesis=[])`` fills the list with the history's
    nemesis operations, in order (a simulated seed's schedule is made of
    them, :meth:`harness.runtimes.sim.SimRun.results`), and folds as
    without it."""
    ops = _spliced_history()
    t = ops[-1].time
    for k in range(4):  # a partition pair, then a kill pair (a nemesis's value is any JSON)
        f = ("start-partition", "stop-partition", "kill", "kill")[k]
        ops.append(Op("invoke" if k % 2 == 0 else "info", f, {"fault": f, "n": k}, "nemesis", t + k, len(ops)))
    ops += [Op(o.type, o.f, o.value, o.process, t + 10 + j, len(ops) + j, o.error, o.extra)
            for j, o in enumerate(_messy(seed)[:50])]
    nemesis: list[Op] = []
    got = _folds(scan_ops(ops, batch, 0, nemesis=nemesis))
    assert nemesis == [o for o in ops if o.process == "nemesis"] and len(nemesis) >= 4
    assert repr(got) == repr(_folds(scan_ops(ops, batch, 0)))
