"""The search's look-ahead (checkers/linearizable/lookahead.py) only drops
configurations that have no linearization: with it WGL gives the same
verdict as without it, on kv histories where it prunes (appends, puts, gets
of the whole value, crashes), and it names the read that cannot be placed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from checkers.history.op import Op
from checkers.linearizable import check
from checkers.linearizable.lookahead import PrefixIndex, ScanIndex
from checkers.linearizable.models import KV
from checkers.linearizable.prepare import prepare
from checkers.linearizable.wgl import compile_problem, search, sequential


class _KVBlind(KV):
    """kv without the look-ahead: plain WGL."""

    looks_ahead = False


def _run(ops: list[Op], model: KV) -> Any:
    subs = prepare(ops, model)[0]
    out = []
    for sub in subs.values():
        gen = search(compile_problem(sub.ops, model, model.init()), model, 10**9)
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                out.append(stop.value)
                break
    return out


@st.composite
def kv_histories(draw: Any) -> list[Op]:
    """Up to five clients on one key: each op takes effect at a point of
    its interval (linearizable), except that a get may return an older
    value or a made-up one, and a client may crash after or before the
    effect (``info``: a crashed append or put may or may not count)."""
    procs = draw(st.integers(2, 5))
    busy: dict[int, list[Any]] = {}
    ops: list[Op] = []
    state, older = "", [""]
    pid = procs
    slots = list(range(procs))
    for _ in range(draw(st.integers(4, 50))):
        s = draw(st.integers(0, procs - 1))
        p = slots[s]
        if p not in busy:
            f = draw(st.sampled_from(["get", "get", "append", "append", "append", "put"]))
            v = None if f == "get" else draw(st.sampled_from(["a", "b", "c", "ab"]))
            busy[p] = [f, v, None]
            ops.append(Op("invoke", f, ["k", v], p, len(ops), len(ops)))
            continue
        f, v, seen = busy[p]
        if seen is None and draw(st.booleans()):
            if f == "get":
                odd = draw(st.integers(0, 9))
                seen = draw(st.sampled_from(older)) if odd == 0 else ("zz" if odd == 1 else state)
            else:
                older.append(state)
                state = v if f == "put" else state + v
                seen = v
            busy[p][2] = seen
            continue
        if draw(st.integers(0, 7)) == 0 and f != "get":
            del busy[p]
            ops.append(Op("info", f, ["k", v], p, len(ops), len(ops)))
            slots[s], pid = pid, pid + 1
            continue
        if seen is None:
            continue
        del busy[p]
        ops.append(Op("ok", f, ["k", seen], p, len(ops), len(ops)))
    return ops


@settings(max_examples=400, deadline=None)
@given(kv_histories())
def test_look_ahead_gives_the_verdict_of_plain_wgl(ops: list[Op]) -> None:
    seen = [r.valid for r in _run(ops, KV())]
    plain = [r.valid for r in _run(ops, _KVBlind())]
    assert seen == plain


def test_look_ahead_drops_an_append_order_before_the_get_returns() -> None:
    # five appends at once, then a get of them in reverse order: plain WGL
    # tries orders until one matches, the look-ahead only that one
    ops = [Op("invoke", "append", ["k", c], i, i) for i, c in enumerate("abcde")]
    ops += [Op("ok", "append", ["k", c], i, 5 + i) for i, c in enumerate("abcde")]
    ops += [Op("invoke", "get", ["k", None], 9, 10), Op("ok", "get", ["k", "edcba"], 9, 11)]
    (ahead,), (plain,) = _run(ops, KV()), _run(ops, _KVBlind())
    assert ahead.valid is plain.valid is True
    assert ahead.steps < plain.steps / 10


def test_a_get_missing_a_completed_append_is_named_as_the_violation() -> None:
    ops = [Op("invoke", "append", ["k", "x"], 0, 0), Op("ok", "append", ["k", "x"], 0, 1),
           Op("invoke", "put", ["k", "y"], 1, 2),
           Op("invoke", "get", ["k", None], 2, 3), Op("ok", "get", ["k", ""], 2, 4),
           Op("ok", "put", ["k", "y"], 1, 5)]
    r = check(ops, model="kv")
    assert r["valid"] is False and r["unlinearizable"] == [3, 4]


def test_a_put_that_may_come_first_explains_a_get() -> None:
    # the get reads the put's value and then z: fine while z may follow the
    # put, a violation once z completed before the put was invoked
    def history(z_first: bool) -> list[Op]:
        z = [Op("invoke", "append", ["k", "z"], 3, 0), Op("ok", "append", ["k", "z"], 3, 0)]
        put = [Op("invoke", "put", ["k", "y"], 1, 0)]
        rest = [Op("invoke", "get", ["k", None], 2, 0), Op("ok", "get", ["k", "yz"], 2, 0),
                Op("ok", "put", ["k", "y"], 1, 0)]
        ops = z + put + rest if z_first else put + z + rest
        for i, o in enumerate(ops):
            o.index = i
        return ops

    assert check(history(z_first=False), model="kv")["valid"] is True
    r = check(history(z_first=True), model="kv")
    assert r["valid"] is False and r["unlinearizable"] == [3, 4]


def test_prefix_index_finds_the_values_a_string_grows_into() -> None:
    observed = [("get", v) for v in ["ab", "", "abc", "b", "a", "abd", "ba"]]
    model = KV()
    fast, slow = PrefixIndex(observed, model.reaches), ScanIndex(observed, model.reaches)
    for state in ["", "a", "ab", "abc", "b", "c", "abcd", ("<any>", "b"), ("<any>", "")]:
        want = {i for i, (f, v) in enumerate(observed) if model.reaches(state, f, v)}
        got = fast.reachable(state)
        assert {i for i in range(len(observed)) if got >> fast.positions[i] & 1} == want
        slow_got = slow.reachable(state)
        assert {i for i in range(len(observed)) if slow_got >> i & 1} == want


def _sequential_then_a_bad_get(overlap: bool) -> list[Op]:
    """append a, then a get of "b" (no linearization); with ``overlap`` the
    get is called before the append returns."""
    inv_a, ok_a = Op("invoke", "append", ["k", "a"], 0, 0), Op("ok", "append", ["k", "a"], 0, 0)
    inv_g, ok_g = Op("invoke", "get", ["k", None], 1, 0), Op("ok", "get", ["k", "b"], 1, 0)
    ops = [inv_a, inv_g, ok_a, ok_g] if overlap else [inv_a, ok_a, inv_g, ok_g]
    for i, o in enumerate(ops):
        o.index = i
    return ops


def test_a_sequential_key_is_searched_without_the_look_ahead() -> None:
    # one op to try at each step: nothing to rule out, so no look-ahead is
    # built; the same ops overlapping get it (the append is ruled out as made)
    model = KV()
    (seq,) = prepare(_sequential_then_a_bad_get(False), model)[0].values()
    (conc,) = prepare(_sequential_then_a_bad_get(True), model)[0].values()
    assert sequential(compile_problem(seq.ops, model, "")) is True
    assert sequential(compile_problem(conc.ops, model, "")) is False
    (plain,), (ahead,) = _run(_sequential_then_a_bad_get(False), model), _run(_sequential_then_a_bad_get(True), model)
    assert plain.valid is ahead.valid is False
    assert plain.pruned == 0 and ahead.pruned == 1
    assert plain.blocked == ahead.blocked == 1  # the get, in either case


def test_an_op_that_crashed_makes_the_key_overlap() -> None:
    # its return is at infinity: every op called after it runs beside it
    ops = [Op("invoke", "append", ["k", "a"], 0, 0), Op("info", "append", ["k", "a"], 0, 1),
           Op("invoke", "get", ["k", None], 1, 2), Op("ok", "get", ["k", "a"], 1, 3)]
    model = KV()
    (sub,) = prepare(ops, model)[0].values()
    assert sequential(compile_problem(sub.ops, model, "")) is False
    assert check(ops, model="kv")["valid"] is True
