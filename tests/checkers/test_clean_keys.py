"""A clean key checked from its columns (:mod:`checkers.queue.keyfast`)
gives :func:`checkers.queue.keycheck.check_key`'s result, and any key that
is not clean is left to it.

Every key of many histories — generated valid ones (acks all or unknown,
with and without final reads, polls of several records), every anomaly
builder's clean and bad twins, messy histories with indefinite and
unfinished operations, histories with assigns that drop and take back a
key — is checked both ways; where the columnar check answers, the answers
are equal, and on each anomaly builder's bad twin it stands aside for the
key the anomaly is in.
"""

from __future__ import annotations

import numpy as np
import pytest

from checkers.history.op import Op
from checkers.pipeline import _compact
from checkers.queue.keycheck import check_key
from checkers.queue.keyfast import _sessions, check_clean_key
from checkers.queue.project import project
from checkers.queue.synth import HistoryBuilder, valid_history
from tests.checkers.test_acyclic_proof import _messy
from tests.checkers.test_queue_anomalies import CASES


def _compare(ops: list[Op]) -> tuple[int, int]:
    """(keys the columnar check answered, keys in all)."""
    proj = project(ops)
    answered = 0
    for k in proj.keys:
        for rw in (True, False):
            quick = check_clean_key(k, proj.keys.columns[k], rw, proj.keys.assigns)
            if quick is None:
                continue
            full = _compact(check_key(k, proj.keys[k], rw))
            assert quick == full, (k, rw)
            answered += rw
    return answered, len(proj.keys)


@pytest.mark.parametrize("acks,final,seed", [("all", True, 1), ("all", False, 2), (None, True, 3),
                                             ("all", True, 4)])
def test_clean_keys_of_valid_histories_get_check_keys_result(acks, final, seed):
    ops = valid_history(3000, 5, 6, seed=seed, acks=acks, final_reads=final, max_poll=1 + seed)
    if acks is None:
        for op in ops:
            op.extra.pop("acks", None)
    answered, keys = _compare(ops)
    # without final reads the last records of a key may be unseen: not clean
    assert answered == keys if final else answered >= 1


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_anomaly_builders_keys_get_check_keys_result_or_are_left_to_it(name, build, expected):
    _compare(build(False).ops)
    bad = build(True).ops
    _compare(bad)
    proj = project(bad)
    per_key = {k: check_key(k, proj.keys[k]) for k in proj.keys}
    for k, r in per_key.items():
        if r["counts"]:
            assert check_clean_key(k, proj.keys.columns[k]) is None, k


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_messy_histories_keys_get_check_keys_result_or_are_left_to_it(seed):
    _compare(_messy(seed))


def _rewind(drop: bool, f: str = "assign") -> list[Op]:
    """Process 1 reads t-0 and sends to it, is assigned away from t-0
    (``drop``) or not, then back, and reads and sends from the start
    again; process 2 reads and sends straight through."""
    b = HistoryBuilder()
    b.assign(1, ["t-0", "t-1"], f=f)
    for i in range(4):
        b.send(2, "t-0", i, i)
    b.poll(1, {"t-0": [(0, 0), (1, 1), (2, 2)]})
    b.send(1, "t-0", 10, 4)
    b.assign(1, ["t-1"] if drop else ["t-0", "t-1"], f=f)
    b.assign(1, ["t-0", "t-1"], f=f)
    b.poll(1, {"t-0": [(0, 0), (1, 1)]})
    b.send(2, "t-0", 11, 5)
    b.send(1, "t-0", 12, 6)
    b.poll(2, {"t-0": [(i, v) for i, v in enumerate((0, 1, 2, 3, 10, 11, 12))]})
    b.poll(3, {"t-0": [(i, v) for i, v in enumerate((0, 1, 2, 3, 10, 11, 12))]}, final=True)
    return b.ops


@pytest.mark.parametrize("f", ["assign", "subscribe"])
def test_an_assign_that_drops_a_key_starts_its_process_afresh_in_the_clean_check(f):
    ops = _rewind(drop=True, f=f)
    proj = project(ops)
    assert proj.keys.assigns
    quick = check_clean_key("t-0", proj.keys.columns["t-0"], True, proj.keys.assigns)
    assert quick is not None and quick == _compact(check_key("t-0", proj.keys["t-0"], True))
    assert _compare(ops) == (1, 1)


def test_without_the_dropping_assign_a_rewind_is_left_to_check_key():
    ops = _rewind(drop=False)
    proj = project(ops)
    full = check_key("t-0", proj.keys["t-0"], True)
    assert full["counts"] == {"nonmonotonic-poll": 1}
    assert check_clean_key("t-0", proj.keys.columns["t-0"], True, proj.keys.assigns) is None


def test_events_out_of_op_order_with_assigns_are_left_to_check_key():
    """merge_assigns sorts a key's events by op index: events added in
    another order are not the clean check's to number."""
    op = np.array([5, 3, 9], np.int64)
    proc = np.array([1, 1, 1], np.int64)
    drop = [(4, 1, "ok", frozenset(["t-1"]))]
    assert _sessions(op, proc, "t-0", drop) is None
    s = _sessions(np.sort(op), proc, "t-0", drop).tolist()
    assert s[0] != s[1] == s[2]  # the drop at op 4 parts op 3 from ops 5 and 9
    assert _sessions(op, proc, "t-0", ()).tolist() == [1, 1, 1]  # no assigns: the order is the columns'


def test_a_dropping_assign_numbers_its_process_afresh_from_the_next_op():
    """An event at the assign's own index comes before it (merge_assigns
    puts events first); other processes keep their number."""
    op = np.array([1, 4, 5, 6, 7], np.int64)
    proc = np.array([1, 1, 2, 1, 1], np.int64)
    drop = [(4, 1, "ok", frozenset()), (6, 1, "info", frozenset(["t-1"])), (5, 2, "ok", frozenset(["t-0"]))]
    s = _sessions(op, proc, "t-0", drop).tolist()
    assert s[0] == s[1] and len({s[0], s[3], s[4], s[2]}) == 4


@pytest.mark.parametrize("seed", range(4))
def test_sessions_numbered_by_process_and_epoch_part_the_events_as_numbering_the_pairs_in_order(seed):
    """Only which events share a session matters (``_steps_up`` groups by
    it): the one product of process and epoch used when every process is
    a number from 0 parts the events exactly as the numbering of the
    distinct (process, epoch) pairs in order that any other process
    numbers get (here: the same processes shifted below 0)."""
    rng = np.random.default_rng(seed)
    n = 400
    op = np.sort(rng.choice(10_000, n, replace=False)).astype(np.int64)
    proc = rng.integers(0, 12, n).astype(np.int64)
    drop = [(int(i), int(p), "ok", frozenset()) for i, p in zip(rng.integers(0, 10_000, 30), rng.integers(0, 12, 30))]

    def parts(s: np.ndarray) -> set[frozenset[int]]:
        return {frozenset(np.flatnonzero(s == x).tolist()) for x in np.unique(s)}

    by_product = _sessions(op, proc, "t-0", drop)
    by_pairs = _sessions(op, proc - 100, "t-0", [(i, p - 100, t, ks) for i, p, t, ks in drop])
    assert len(parts(by_product)) > 12  # the drops part some processes' events
    assert parts(by_product) == parts(by_pairs)


@pytest.mark.parametrize("seed", range(6))
def test_the_first_read_of_each_value_found_by_log_place_is_np_uniques(seed):
    """``_first_reads`` finds each polled value and its first read from the
    reads' places in a dense log (checkers/queue/keyfast.py; one value per
    offset and one offset per value) as ``np.unique(r_val,
    return_index=True)`` does from the values: same values, same first
    reads, for logs whose values are out of offset order, with gaps in
    what was read, a place read once, and no reads at all."""
    from checkers.queue.keyfast import _first_reads

    rng = np.random.default_rng(seed)
    n_log = [0, 1, 7, 300, 70_000, 2_000][seed]
    log_val = rng.permutation(n_log * 3)[:n_log].astype(np.int64)  # distinct, not in offset order
    n_reads = [0, 3, 50, 5_000, 100_000, 1][seed]
    places = rng.integers(0, max(1, n_log // 2 if seed == 3 else n_log), n_reads) if n_log else np.zeros(0, np.int64)
    r_val = log_val[places]
    want = np.unique(r_val, return_index=True)
    got = _first_reads(places.astype(np.int64), log_val)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("shape", ["dense", "two-values", "sparse", "one", "value-zero", "negative"])
def test_the_distinct_pairs_read_through_a_table_by_offset_are_the_sorted_distinct_pairs(shape):
    """``_distinct_pairs`` (checkers/queue/keyfast.py) gives the distinct
    (offset, value) pairs by offset then value, whether it reads them
    through a table by offset (one value per offset, offsets spanning not
    far past their number: a clean key's ~240k reads of its ~7k records)
    or sorts them: an offset read with two values keeps both, a sparse or
    a negative one is sorted, a value 0 is a value like any other."""
    from checkers.queue.keyfast import _distinct_pairs

    rng = np.random.default_rng(7)
    log_val = rng.permutation(3000)[:1000].astype(np.int64)
    off = rng.integers(0, 1000, 20_000).astype(np.int64)
    val = log_val[off]
    if shape == "two-values":
        val[rng.integers(0, len(val), 3)] += 5000
    elif shape == "sparse":
        off = off * 1_000_003
    elif shape == "one":
        off, val = off[:1], val[:1]
    elif shape == "value-zero":
        val = np.where(off == off[0], 0, val)
    elif shape == "negative":
        off = off - 10
    want = sorted(set(zip(off.tolist(), val.tolist())))
    got = _distinct_pairs(off, val)
    if shape == "negative":
        assert got is None  # the caller sorts them as pairs (a lexsort)
        return
    assert got is not None
    assert list(zip(got[0].tolist(), got[1].tolist())) == want
    assert got[0].dtype == got[1].dtype == np.int64


def _dense_log_joined(r_off, r_val, s_off, s_val):
    """The version order found from the reads and sends joined (what
    ``_dense_log`` does when the reads alone do not answer): a sort."""
    off, val = np.concatenate([r_off, s_off]), np.concatenate([r_val, s_val])
    pairs = sorted(set(zip(off.tolist(), val.tolist())))
    offs = [o for o, _ in pairs]
    vals = [v for _, v in pairs]
    if len(set(offs)) != len(offs) or len(set(vals)) != len(vals):
        return None
    return offs, vals


@pytest.mark.parametrize("case", ["all-read", "one-unread", "other-value", "negative-unread", "below", "above",
                                  "value-twice", "no-sends", "sparse"])
def test_the_log_from_the_reads_alone_is_the_log_of_reads_and_sends_joined(case):
    """A clean key's log is found from its reads when every send's pair
    is among them (no copy of the reads joined to the sends); any other
    key's as before: the same answer either way, down to a send at an
    offset no read holds with the table's own blank (-1) as its value."""
    from checkers.queue.keyfast import _dense_log

    rng = np.random.default_rng(7)
    n = 300
    vals = rng.permutation(10 * n)[:n].astype(np.int64)
    idx = rng.integers(0, n, 4000)
    r_off, r_val = idx.astype(np.int64) + 5, vals[idx]
    s = rng.choice(n, 60, replace=False)
    s_off, s_val = s.astype(np.int64) + 5, vals[s]
    if case == "one-unread":
        s_off, s_val = np.r_[s_off, 5 + n], np.r_[s_val, 99_999]
    elif case == "other-value":
        s_val = s_val.copy()
        s_val[3] = 77_777
    elif case == "negative-unread":  # inside the reads' span, at an offset none of them holds
        keep = r_off != 15
        r_off, r_val = r_off[keep], r_val[keep]
        s_off, s_val = np.r_[s_off[s_off != 15], 15], np.r_[s_val[s_off != 15], -1]
    elif case == "below":
        s_off, s_val = np.r_[s_off, 0], np.r_[s_val, 88_888]
    elif case == "above":
        s_off, s_val = np.r_[s_off, 10_000], np.r_[s_val, 88_888]
    elif case == "value-twice":
        s_off, s_val = np.r_[s_off, 5 + n + 2], np.r_[s_val, s_val[0]]
    elif case == "no-sends":
        s_off, s_val = s_off[:0], s_val[:0]
    elif case == "sparse":
        r_off = r_off * 1000
        s_off = s_off * 1000
    got = _dense_log(r_off, r_val, s_off, s_val)
    want = _dense_log_joined(r_off, r_val, s_off, s_val)
    if want is None:
        assert got is None
    else:
        assert got is not None and [x.tolist() for x in got] == list(want)
