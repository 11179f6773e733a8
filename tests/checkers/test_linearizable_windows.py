"""Window refutation (checkers/linearizable/windows.py): a stretch of
history checked from the model's wildcard state can only refute, so it
must never call a linearizable history a violation."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st

from checkers.history.op import Op
from checkers.linearizable import check
from checkers.linearizable.models import KV
from checkers.linearizable.prepare import prepare
from checkers.linearizable.wgl import compile_problem, search
from checkers.linearizable.windows import refute, window_ops


def _run(gen: Any) -> Any:
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def _wgl_alone(ops: list[Op]) -> bool:
    m = KV()
    (sub,) = prepare(ops, m)[0].values()
    return _run(search(compile_problem(sub.ops, m, m.init()), m, 10_000)).valid


@st.composite
def kv_histories(draw: Any) -> list[Op]:
    """Overlapping puts, appends and gets on one key, taking effect at a
    point inside their interval (so linearizable), except that some gets
    return an older value (often not)."""
    procs = draw(st.integers(2, 5))
    busy: dict[int, tuple[str, Any, Any]] = {}
    ops: list[Op] = []
    state, older = "", [""]
    for _ in range(draw(st.integers(30, 60))):
        p = draw(st.integers(0, procs - 1))
        if p not in busy:
            f = draw(st.sampled_from(["get", "get", "append", "append", "put"]))
            v = None if f == "get" else draw(st.sampled_from("abcd"))
            busy[p] = (f, v, None)
            ops.append(Op("invoke", f, ["k", v], p, len(ops), len(ops)))
            continue
        f, v, seen = busy[p]
        if seen is None and draw(st.booleans()):
            # the op takes effect now; it completes later
            if f == "get":
                stale = draw(st.integers(0, 12)) == 0
                seen = draw(st.sampled_from(older)) if stale else state
            else:
                older.append(state)
                state = v if f == "put" else state + v
                seen = v
            busy[p] = (f, v, seen)
            continue
        if seen is None:
            continue
        del busy[p]
        ops.append(Op("ok", f, ["k", seen], p, len(ops), len(ops)))
    return ops


@settings(max_examples=150, deadline=None)
@given(kv_histories())
def test_a_window_refutes_only_histories_that_are_not_linearizable(ops: list[Op]) -> None:
    m = KV()
    subs = prepare(ops, m)[0]
    if not subs:
        return
    (sub,) = subs.values()
    r = _run(refute(sub.ops, m))
    if r is not None:
        assert r.valid is False and r.window is not None
        assert _wgl_alone(ops) is False


def _appends_then_stale_get(n: int) -> list[Op]:
    """``n`` rounds of two overlapping appends and a get of the whole value;
    in the middle round the get misses the round's appends."""
    ops: list[Op] = []
    value = ""

    def add(t: str, p: int, f: str, v: Any) -> None:
        ops.append(Op(t, f, ["k", v], p, len(ops), len(ops)))

    for i in range(n):
        a, b = f"<{i}a>", f"<{i}b>"
        add("invoke", 0, "append", a)
        add("invoke", 1, "append", b)
        add("ok", 1, "append", b)
        add("ok", 0, "append", a)
        seen = value if i == n // 2 else value + b + a
        value += b + a
        add("invoke", 2, "get", None)
        add("ok", 2, "get", seen)
    return ops


def test_a_stale_get_is_refuted_by_the_window_around_it() -> None:
    ops = _appends_then_stale_get(40)
    m = KV()
    (sub,) = prepare(ops, m)[0].values()
    r = _run(refute(sub.ops, m))
    assert r is not None and r.valid is False
    lo, hi = r.window
    assert hi - lo < 40
    stale = 6 * 20 + 4                    # the stale get's invocation
    assert sub.ops[r.blocked].invoke_index == stale
    assert sub.ops[lo].call <= stale < (sub.ops[hi].call if hi < len(sub.ops) else 10**9)
    assert check(ops, model="kv")["unlinearizable"][0] == stale
    fixed = _appends_then_stale_get(40)
    fixed[stale + 1] = Op("ok", "get", ["k", "".join(f"<{i}b><{i}a>" for i in range(21))], 2, 125, 125)
    (sub,) = prepare(fixed, m)[0].values()
    assert _run(refute(sub.ops, m)) is None
    assert check(fixed, model="kv")["valid"] is True


def test_edge_ops_of_a_window_are_optional_and_outside_ops_left_out() -> None:
    m = KV()
    ops = [Op("invoke", "append", ["k", "x"], 0, 0), Op("invoke", "get", ["k", None], 1, 1),
           Op("ok", "get", ["k", "x"], 1, 2), Op("invoke", "put", ["k", "y"], 2, 3),
           Op("ok", "append", ["k", "x"], 0, 4), Op("ok", "put", ["k", "y"], 2, 5),
           Op("invoke", "get", ["k", None], 1, 6), Op("ok", "get", ["k", "y"], 1, 7)]
    (sub,) = prepare(ops, m)[0].values()
    w = window_ops(sub.ops, 1, 3, m)     # from the first get's call to the last get's
    assert [(o.f, o.value, o.ret is None) for o in w] == [
        ("append", "x", True), ("get", "x", False), ("put", "y", False)]
