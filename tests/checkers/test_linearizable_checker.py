"""The WGL checker itself: agreement with a brute-force definition of
linearizability, P-compositionality (per-key verdicts, one bad key makes the
history bad), budgets (a pathological history answers "unknown" instead of
hanging, and one hard key does not starve the others), failure reports, and
clear errors on bad input."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from checkers.history.op import HistoryError, Op
from checkers.linearizable import check, ModelError
from checkers.linearizable.models import CASRegister
from checkers.linearizable.synth import register_history


def H(*rows: tuple) -> list[Op]:
    return [Op(type=t, f=f, value=v, process=p, index=i) for i, (t, p, f, v) in enumerate(rows)]


# -- a brute-force oracle ----------------------------------------------------

def brute_force_linearizable(ops: list[Op], initial: Any = 0) -> bool:
    """Straight from the definition: is there a total order of the completed
    ops plus any subset of the crashed ones, respecting real-time order
    (a op that returned before b was invoked comes first), that a sequential
    cas-register accepts? Failed ops are excluded."""
    model = CASRegister(initial=initial)
    pend: dict[Any, tuple[int, Op]] = {}
    calls: list[tuple[int, float, str, Any, bool]] = []  # (call, ret, f, value, required)
    for pos, o in enumerate(ops):
        if o.type == "invoke":
            pend[o.process] = (pos, o)
        else:
            ipos, inv = pend.pop(o.process)
            if o.type == "ok":
                v = o.value if o.value is not None else inv.value
                calls.append((ipos, pos, o.f, v, True))
            elif o.type == "info":
                calls.append((ipos, float("inf"), inv.f, inv.value, False))
    for ipos, inv in pend.values():
        calls.append((ipos, float("inf"), inv.f, inv.value, False))
    n = len(calls)
    frozen = [(c, r, f, tuple(v) if isinstance(v, list) else v, req) for c, r, f, v, req in calls]

    @lru_cache(maxsize=None)
    def go(done: frozenset, state: Any) -> bool:
        if all(frozen[i][4] is False or i in done for i in range(n)):
            return True
        for i in range(n):
            if i in done:
                continue
            c = frozen[i][0]
            # i may go next only if no other pending op returned before i's call
            if any(j not in done and j != i and frozen[j][1] < c for j in range(n)):
                continue
            ok, s2 = model.step(state, (frozen[i][2], frozen[i][3]))
            if ok and go(done | {i}, s2):
                return True
        return False

    return go(frozenset(), initial)


@st.composite
def small_histories(draw: Any) -> list[Op]:
    procs = draw(st.integers(2, 4))
    steps = draw(st.integers(1, 14))
    busy: dict[int, tuple[str, Any]] = {}
    rows: list[tuple] = []
    next_pid = procs
    slots = list(range(procs))
    for _ in range(steps):
        s = draw(st.integers(0, procs - 1))
        p = slots[s]
        if p not in busy:
            f = draw(st.sampled_from(["read", "write", "cas"]))
            v = (None if f == "read" else draw(st.integers(0, 2)) if f == "write"
                 else [draw(st.integers(0, 2)), draw(st.integers(0, 2))])
            busy[p] = (f, v)
            rows.append(("invoke", p, f, v))
        else:
            f, v = busy.pop(p)
            t = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
            if f == "read" and t == "ok":
                v = draw(st.integers(0, 2))
            rows.append((t, p, f, v))
            if t == "info":
                slots[s] = next_pid
                next_pid += 1
    return H(*rows)


@settings(max_examples=400, deadline=None)
@given(small_histories())
def test_wgl_agrees_with_brute_force_definition_of_linearizability(ops):
    expected = brute_force_linearizable(ops, initial=0)
    got = check(ops, model="cas-register", initial=0)["valid"]
    assert got is expected


def brute_force_model(ops: list[Op], model: Any, successors: Any = None) -> bool:
    """The same definition for any single-object model, through its ``step``
    (or ``successors(model, state, op) -> [next states]`` if given)."""
    successors = successors or _steps
    pend: dict[Any, tuple[int, Op]] = {}
    calls: list[tuple[float, float, Any, bool]] = []
    for pos, o in enumerate(ops):
        if o.type == "invoke":
            pend[o.process] = (pos, o)
            continue
        ipos, inv = pend.pop(o.process)
        if o.type == "fail":
            continue
        done = o.type == "ok"
        v = o.value if done and o.value is not None else inv.value
        for _, f, fv in model.split(o.f, v):
            calls.append((ipos, pos if done else float("inf"), (f, fv), done))
    for ipos, inv in pend.values():
        for _, f, fv in model.split(inv.f, inv.value):
            calls.append((ipos, float("inf"), (f, fv), False))
    n = len(calls)

    @lru_cache(maxsize=None)
    def go(done: frozenset, state: Any) -> bool:
        if all(not calls[i][3] or i in done for i in range(n)):
            return True
        for i in range(n):
            if i in done or any(j not in done and calls[j][1] < calls[i][0] for j in range(n)):
                continue
            for s2 in successors(model, state, calls[i][2]):
                if go(done | {i}, s2):
                    return True
        return False

    return go(frozenset(), model.init())


def _steps(model: Any, state: Any, op: Any) -> list[Any]:
    ok, s2 = model.step(state, op)
    return [s2] if ok else []


# (invoke f, invoke value, ok value) generators per model
MODEL_OPS: dict[str, list[tuple[str, Any, Any]]] = {
    "mutex": [("acquire", st.none(), st.none()), ("release", st.none(), st.none())],
    "fifo-queue": [("enqueue", st.integers(0, 2), None), ("dequeue", st.none(), st.integers(0, 2))],
    "set": [("add", st.integers(0, 2), None),
            ("read", st.none(), st.lists(st.integers(0, 2), max_size=3, unique=True))],
    "kv": [("put", st.sampled_from(["a", "b"]).map(lambda v: ["k", v]), None),
           ("append", st.sampled_from(["a", "b"]).map(lambda v: ["k", v]), None),
           ("get", st.just(["k", None]), st.sampled_from(["", "a", "b", "ab", "ba", "aa"])
            .map(lambda v: ["k", v]))],
    # one object: txns over x and y always touch both keys' group via x
    "multi-register": [
        ("txn", st.just([["write", "x", 1]]), None),
        ("txn", st.just([["write", "x", 2], ["write", "y", 2]]), None),
        ("txn", st.just([["read", "x", None], ["read", "y", None]]),
         st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from([None, 2]))
         .map(lambda t: [["read", "x", t[0]], ["read", "y", t[1]]])),
    ],
    # one partition, so projection and whole-history checks coincide; send
    # values are made unique below, as the queue workload's are
    "kafka-log": [
        ("send", st.just([["send", "t-0", None]]), st.integers(0, 3)),
        ("poll", st.just([["poll"]]),
         st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=2)
         .map(lambda rs: [["poll", {"t-0": [list(r) for r in rs]}]])),
    ],
}


def _unique_kafka_sends(ops: list[Op]) -> list[Op]:
    """Send n gets value n; its ok completion the drawn offset with it."""
    n = 0
    inv: dict[Any, int] = {}
    for o in ops:
        if o.f != "send":
            continue
        if o.type == "invoke":
            o.value = [["send", "t-0", n]]
            inv[o.process] = n
            n += 1
        elif o.type == "ok":
            o.value = [["send", "t-0", [o.value, inv[o.process]]]]
        else:
            o.value = [["send", "t-0", inv[o.process]]]
    return ops


def _kafka_any_offset_steps(model: Any, state: Any, op: Any) -> list[Any]:
    """The specification for a send whose offset is unknown: it took *some*
    offset above the last one (offsets need not be dense)."""
    (m,) = op[1]
    if m[0] == "send" and m[1] is None:
        out = []
        for off in range(6):
            ok, s2 = model.step(state, ("txn", (("send", off, m[2]),)))
            if ok:
                out.append(s2)
        return out
    ok, s2 = model.step(state, op)
    return [s2] if ok else []


@st.composite
def model_histories(draw: Any, name: str) -> list[Op]:
    table = MODEL_OPS[name]
    procs = draw(st.integers(2, 4))
    busy: dict[int, tuple[str, Any, Any]] = {}
    rows: list[tuple] = []
    slots = list(range(procs))
    next_pid = procs
    for _ in range(draw(st.integers(1, 14))):
        s = draw(st.integers(0, procs - 1))
        p = slots[s]
        if p not in busy:
            f, inv, okv = draw(st.sampled_from(table))
            v = draw(inv)
            busy[p] = (f, v, okv)
            rows.append(("invoke", p, f, v))
        else:
            f, v, okv = busy.pop(p)
            t = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
            rows.append((t, p, f, draw(okv) if (t == "ok" and okv is not None) else v))
            if t == "info":
                slots[s] = next_pid
                next_pid += 1
    return H(*rows)


def _kafka_dense_steps(model: Any, state: Any, op: Any) -> list[Any]:
    """Dense offsets: an unknown offset is last+1, except that the first
    record of a log may sit at any offset (the log may start anywhere)."""
    (m,) = op[1]
    if state is None and m[0] == "send" and m[1] is None:
        return _kafka_any_offset_steps(model, state, op)
    return _steps(model, state, op)


def test_wgl_agrees_with_brute_force_for_dense_kafka_log():
    from checkers.linearizable.models import KafkaLog

    @settings(max_examples=200, deadline=None)
    @given(model_histories("kafka-log"))
    def agree(ops):
        ops = _unique_kafka_sends(ops)
        expected = brute_force_model(ops, KafkaLog(dense=True), _kafka_dense_steps)
        assert check(ops, model=KafkaLog(dense=True))["valid"] is expected

    agree()


@pytest.mark.parametrize("name", sorted(MODEL_OPS))
def test_wgl_agrees_with_brute_force_for_every_model(name):
    from checkers.linearizable.models import make_model

    @settings(max_examples=200, deadline=None)
    @given(model_histories(name))
    def agree(ops):
        if name == "kafka-log":
            ops = _unique_kafka_sends(ops)
            expected = brute_force_model(ops, make_model(name), _kafka_any_offset_steps)
        else:
            expected = brute_force_model(ops, make_model(name))
        assert check(ops, model=name)["valid"] is expected

    agree()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cas-register", *sorted(MODEL_OPS)])
def test_wgl_agrees_with_brute_force_soak(name):
    """The agreement tests at 5,000 examples per model (run with -m slow)."""
    from checkers.linearizable.models import make_model

    strategy = small_histories() if name == "cas-register" else model_histories(name)

    @settings(max_examples=5000, deadline=None)
    @given(strategy)
    def agree(ops):
        m = make_model(name, initial=0) if name == "cas-register" else make_model(name)
        if name == "cas-register":
            expected = brute_force_linearizable(ops, 0)
        elif name == "kafka-log":
            ops = _unique_kafka_sends(ops)
            expected = brute_force_model(ops, m, _kafka_any_offset_steps)
        else:
            expected = brute_force_model(ops, m)
        assert check(ops, model=m)["valid"] is expected

    agree()


def test_generated_kafka_history_is_linearizable_by_construction():
    from checkers.linearizable.synth import kafka_history

    ops = kafka_history(1500, clients=6, partitions=3, seed=5, crash_p=0.05)
    r = check(ops, model="kafka-log", time_budget=30)
    assert r["valid"] is True and set(r["keys"]) == {"t-0", "t-1", "t-2"}


def test_kafka_poll_of_a_record_before_its_send_was_invoked_is_caught():
    from checkers.linearizable.synth import kafka_history

    ops = kafka_history(400, clients=4, partitions=1, seed=9)
    # the first successful non-empty poll: pretend it also saw the record
    # sent by the last send of the history (invoked much later)
    last_send = [o for o in ops if o.type == "ok" and o.f == "send"][-1]
    off, val = last_send.value[0][2]
    polls = [o for o in ops if o.type == "ok" and o.f == "poll" and o.value[0][1]["t-0"]]
    victim = polls[0]
    victim.value[0][1]["t-0"] = [[off, val]]
    r = check(ops, model="kafka-log")
    assert r["valid"] is False
    assert r["unlinearizable"][1] == victim.index


def test_generated_register_history_is_linearizable_by_construction():
    ops = register_history(2000, clients=10, seed=7, crash_p=0.05)
    r = check(ops, model="cas-register", initial=0, time_budget=30)
    assert r["valid"] is True


def test_corrupting_one_read_of_a_linearizable_history_is_caught():
    ops = register_history(600, clients=5, seed=3, fs=("read", "write"), values=50)
    reads = [i for i, o in enumerate(ops) if o.type == "ok" and o.f == "read"]
    victim = reads[len(reads) // 2]
    ops[victim].value = 10_000  # never written
    r = check(ops, model="cas-register", initial=0, time_budget=30)
    assert r["valid"] is False
    assert r["unlinearizable"][1] == victim
    # every op in the reported prefix is a real invocation in the history
    assert all(ops[i].type == "invoke" for i in r["longest_prefix"])


# -- P-compositionality ------------------------------------------------------

def test_independent_keys_are_checked_separately_and_one_bad_key_fails_all():
    good = [("invoke", 0, "write", ["a", 1]), ("ok", 0, "write", ["a", 1]),
            ("invoke", 0, "read", ["a", None]), ("ok", 0, "read", ["a", 1])]
    bad = [("invoke", 1, "write", ["b", 2]), ("ok", 1, "write", ["b", 2]),
           ("invoke", 1, "read", ["b", None]), ("ok", 1, "read", ["b", 3])]
    r = check(H(*good, *bad), model="register", initial=0, independent=True)
    assert r["valid"] is False
    assert r["keys"]["a"]["valid"] is True
    assert r["keys"]["b"]["valid"] is False
    assert r["failed_keys"] == ["b"] and r["key"] == "b"
    assert r["unlinearizable"] == [6, 7]


def test_values_of_other_keys_do_not_leak_into_a_key():
    # without partitioning, the read of b=1 would be explained by a's write
    rows = [("invoke", 0, "write", ["a", 1]), ("ok", 0, "write", ["a", 1]),
            ("invoke", 1, "read", ["b", None]), ("ok", 1, "read", ["b", 1])]
    assert check(H(*rows), model="register", initial=0, independent=True)["valid"] is False


# -- budgets -----------------------------------------------------------------

def pathological(k: int, key: Any = None, first_pid: int = 0) -> list[tuple]:
    """k concurrent crashed writes of distinct values, then a read of a value
    nobody wrote: WGL must try every subset and order of the crashed writes
    (about k * 2^k configurations) before it can say "not linearizable"."""
    wrap = (lambda v: v) if key is None else (lambda v: [key, v])
    rows = [("invoke", first_pid + i, "write", wrap(i + 1)) for i in range(k)]
    rows += [("invoke", first_pid + k, "read", wrap(None)), ("ok", first_pid + k, "read", wrap(-1))]
    return rows


def test_pathological_history_with_tiny_budget_is_unknown_not_a_hang():
    r = check(H(*pathological(22)), model="register", initial=0, time_budget=0.2)
    assert r["valid"] == "unknown"
    assert r["cause"] == "timeout"
    assert r["keys"]["all"]["stats"]["steps"] > 0


def test_small_pathological_history_is_decided_invalid():
    assert check(H(*pathological(6)), model="register", initial=0)["valid"] is False


def test_memory_budget_exhaustion_is_unknown():
    r = check(H(*pathological(22)), model="register", initial=0, time_budget=60,
              memory_budget_mb=0.5)
    assert r["valid"] == "unknown" and r["cause"] == "memory"


def test_hard_key_does_not_starve_other_keys_under_shared_budget():
    hard = pathological(22, key="hard")
    # an easy key that needs many slices, and is larger than the hard one so
    # it is not simply scheduled first: it only finishes if slices alternate
    easy = []
    for o in register_history(3000, clients=5, seed=4):
        easy.append((o.type, 1000 + o.process, o.f, ["easy", o.value]))
    bad = [("invoke", 200, "write", ["bad", 1]), ("ok", 200, "write", ["bad", 1]),
           ("invoke", 200, "read", ["bad", None]), ("ok", 200, "read", ["bad", 0])]
    r = check(H(*hard, *easy, *bad), model="cas-register", initial=0, independent=True,
              time_budget=3.0, slice_steps=200, stop_on_failure=False)
    assert r["keys"]["easy"]["valid"] is True
    assert r["keys"]["easy"]["stats"]["steps"] > 10 * 200  # it took many turns
    assert r["keys"]["bad"]["valid"] is False
    assert r["keys"]["hard"]["valid"] == "unknown"
    assert r["valid"] is False  # a definite violation outranks unknown
    assert r["unknown_keys"] == ["hard"]


def test_every_key_gets_a_first_slice_even_past_the_budget():
    hard = pathological(22, key="hard")
    # more ops than the hard key, so it is scheduled after it
    small = [(t, 300, "write", ["small", i]) for i in range(40) for t in ("invoke", "ok")]
    r = check(H(*hard, *small), model="register", initial=0, independent=True,
              time_budget=0.0)
    assert r["keys"]["small"]["valid"] is True
    assert r["keys"]["hard"]["valid"] == "unknown"


# -- errors ------------------------------------------------------------------

def test_completion_without_invocation_is_a_history_error():
    with pytest.raises(HistoryError, match="without an invocation"):
        check(H(("ok", 0, "write", 1)), model="register")


def test_operation_unknown_to_the_model_is_a_history_error():
    with pytest.raises(HistoryError, match="no operation 'enqueue'"):
        check(H(("invoke", 0, "enqueue", 1), ("ok", 0, "enqueue", 1)), model="cas-register")


def test_unknown_model_name_is_a_model_error():
    with pytest.raises(ModelError, match="unknown model"):
        check([], model="paxos")


def test_empty_history_is_linearizable_but_a_run_that_checked_nothing_is_unknown():
    r = check([], model="cas-register")
    assert r["valid"] is True and r["keys"] == {}
    from checkers.check import check_history

    res = check_history([], model="cas-register")
    assert res["valid"] == "unknown" and res["checkers"]["linearizable"]["cause"] == "no-ops"


def test_nemesis_ops_are_ignored_and_dicts_accepted():
    rows = [{"type": "info", "f": "start-partition", "process": "nemesis", "index": 0},
            {"type": "invoke", "f": "write", "value": 1, "process": 0, "index": 1},
            {"type": "ok", "f": "write", "value": 1, "process": 0, "index": 2},
            {"type": "info", "f": "stop-partition", "process": "nemesis", "index": 3},
            {"type": "invoke", "f": "read", "value": None, "process": 1, "index": 4},
            {"type": "ok", "f": "read", "value": 1, "process": 1, "index": 5}]
    r = check(rows, model="cas-register")
    assert r["valid"] is True
    assert r["stats"]["history"]["skipped"] == 2


def test_result_reports_search_statistics():
    ops = register_history(300, clients=4, seed=1)
    r = check(ops, model="cas-register", initial=0)
    s = r["stats"]
    assert s["keys"] == 1 and s["lifts"] >= r["keys"]["all"]["op_count"]
    assert s["cache_size"] == s["lifts"]
    assert s["elapsed_s"] >= 0


@pytest.mark.parametrize("model,rows,kw", [
    ("set", [("invoke", 0, "add", 1), ("ok", 0, "add", 1),
             ("invoke", 0, "read", None), ("ok", 0, "read", [2])], {}),
    ("set", [("invoke", 0, "add", 1), ("ok", 0, "add", 1)], {}),
    ("multi-register", [("invoke", 0, "txn", [["write", "x", 1]]),
                        ("ok", 0, "txn", [["read", "x", 2]])], {}),
    ("multi-register", [("invoke", 0, "txn", [["write", "x", 1]]),
                        ("ok", 0, "txn", [["write", "x", 1]])], {}),
    ("kafka-log", [("invoke", 0, "send", [["send", "t-0", 5]]),
                   ("ok", 0, "send", [["send", "t-0", [0, 5]]])], {}),
    ("kafka-log", [("invoke", 0, "poll", [["poll"]]),
                   ("ok", 0, "poll", [["poll", {"t-0": [[0, 5]]}]])], {}),
    ("fifo-queue", [("invoke", 0, "enqueue", 1), ("ok", 0, "enqueue", 1)], {}),
    ("cas-register", [("invoke", 0, "cas", [0, 1]), ("ok", 0, "cas", [0, 1])], {"initial": 5}),
])
def test_results_are_json_serialisable_for_results_json(model, rows, kw):
    import json

    r = check(H(*rows), model=model, **kw)
    assert json.loads(json.dumps(r))["valid"] == r["valid"]


def test_by_default_a_failing_key_stops_the_others_verdict_false():
    bad = [("invoke", 0, "write", ["bad", 1]), ("ok", 0, "write", ["bad", 1]),
           ("invoke", 0, "read", ["bad", None]), ("ok", 0, "read", ["bad", 0])]
    r = check(H(*bad, *pathological(22, key="hard", first_pid=10)), model="register",
              initial=0, independent=True, time_budget=30)  # the default
    assert r["valid"] is False
    assert r["keys"]["hard"] == {**r["keys"]["hard"], "valid": "unknown", "cause": "stopped"}
    assert r["stats"]["elapsed_s"] < 30


def test_keys_whose_names_collide_stay_apart():
    rows = [("invoke", 0, "write", [1, 5]), ("ok", 0, "write", [1, 5]),
            ("invoke", 1, "read", ["1", None]), ("ok", 1, "read", ["1", 0])]
    r = check(H(*rows), model="register", initial=0, independent=True)
    assert r["valid"] is True and set(r["keys"]) == {"1", "'1'"}


def test_unhashable_process_ids_are_accepted():
    rows = [("invoke", [0, 1], "write", 1), ("ok", [0, 1], "write", 1)]
    assert check(H(*rows), model="register")["valid"] is True
