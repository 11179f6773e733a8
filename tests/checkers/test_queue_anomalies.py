"""Every anomaly of Jepsen's Kafka taxonomy: a minimal history that has it and
is reported with it, and a near-identical history that is clean.

Some anomalies imply others by definition, and the tests say so: a lost write
was never read, so it is also ``unseen`` (and, acknowledged with acks=all,
the durability checker's ``lost-acked-write``); a process whose consecutive sends go
backwards (nonmonotonic-send) closes a ww + process cycle (G0-process); a
transaction whose sends skip over another producer's record (int-send-skip)
closes a ww cycle with that producer (G0).
"""

from __future__ import annotations

from typing import Callable

import pytest

from checkers.check import check_history
from checkers.queue.checker import QueueOptions
from checkers.queue.synth import HistoryBuilder

K, K1 = "t-0", "t-1"


def found(b: HistoryBuilder, **kw) -> set[str]:
    return set(check_history(b.ops, **kw)["anomaly_types"])


# --- builders: each takes `bad` and differs from its clean twin in one place --


def duplicate(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.poll(1, {K: [(0, 1)]})
    b.poll(2, {K: [(1, 1)] if bad else [(0, 1)]})  # value 1 also at offset 1
    return b


def inconsistent_offsets(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(1, K, 2, 0 if bad else 1)  # two acknowledged values at offset 0
    b.poll(2, {K: [(0, 1)]})
    b.poll(3, {K: [(0, 2)] if bad else [(1, 2)]})
    return b


def lost_write(bad: bool) -> HistoryBuilder:
    # acks=all: an acks=1 loss is reported as lost-write-acks1 (see test_verdict)
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.poll(1, {K: [(1, 2)] if bad else [(0, 1), (1, 2)]})  # read past offset 0, never saw it
    return b


def unseen(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.poll(1, {K: [] if bad else [(0, 1)]})
    return b


def g1a(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, None, type="fail")
    b.send(2, K, 2, 1 if bad else 0)
    b.poll(1, {K: [(0, 1), (1, 2)] if bad else [(0, 2)]})  # a failed send is visible
    return b


def _three(b: HistoryBuilder) -> None:
    for i, v in enumerate((1, 2, 3)):
        b.send(0, K, v, i)


def poll_skip(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    _three(b)
    b.poll(1, {K: [(0, 1)]})
    b.poll(1, {K: [(2, 3)] if bad else [(1, 2), (2, 3)]})
    b.poll(2, {K: [(0, 1), (1, 2), (2, 3)]})
    return b


def nonmonotonic_poll(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.poll(1, {K: [(0, 1), (1, 2)]})
    b.poll(1, {K: [(1, 2)] if bad else []})  # starts again at what it already read
    return b


def int_poll_skip(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    _three(b)
    b.poll(1, {K: [(0, 1), (2, 3)] if bad else [(0, 1), (1, 2), (2, 3)]})
    b.poll(2, {K: [(0, 1), (1, 2), (2, 3)]})
    return b


def int_nonmonotonic_poll(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.poll(1, {K: [(1, 2), (0, 1)] if bad else [(0, 1), (1, 2)]})
    return b


def nonmonotonic_send(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 1 if bad else 0)
    b.send(0, K, 2, 0 if bad else 1)  # the process's later send lands earlier
    b.poll(1, {K: [(0, 2), (1, 1)] if bad else [(0, 1), (1, 2)]})
    return b


def int_send_skip(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.invoke(0, "txn", [["send", K, 1], ["send", K, 3]])
    b.send(1, K, 2, 1 if bad else 2)  # another producer's record between the txn's two
    b.complete(0, "ok", [["send", K, [0, 1]], ["send", K, [2 if bad else 1, 3]]])
    b.poll(2, {K: [(0, 1), (1, 2), (2, 3)] if bad else [(0, 1), (1, 3), (2, 2)]})
    return b


def int_nonmonotonic_send(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.txn(0, [["send", K, [1 if bad else 0, 1]], ["send", K, [0 if bad else 1, 2]]])
    b.poll(1, {K: [(0, 2), (1, 1)] if bad else [(0, 1), (1, 2)]})
    return b


def _read_all(b: HistoryBuilder, logs: dict[str, list]) -> None:
    b.poll(9, {k: [(o, v) for o, v in enumerate(vs) if v is not None] for k, vs in logs.items()})


def g0(bad: bool) -> HistoryBuilder:
    """T1 and T2 (concurrent) write both keys in opposite orders."""
    b = HistoryBuilder()
    b.invoke(0, "txn", [["send", K, 1], ["send", K1, 2]])
    b.invoke(1, "txn", [["send", K, 3], ["send", K1, 4]])
    b.complete(0, "ok", [["send", K, [0, 1]], ["send", K1, [1 if bad else 0, 2]]])
    b.complete(1, "ok", [["send", K, [1, 3]], ["send", K1, [0 if bad else 1, 4]]])
    _read_all(b, {K: [1, 3], K1: [4, 2] if bad else [2, 4]})
    return b


def g1c(bad: bool) -> HistoryBuilder:
    """T1 and T2 (concurrent) each read what the other sent."""
    b = HistoryBuilder()
    b.invoke(0, "txn", [["send", K, 1], ["poll"]])
    b.invoke(1, "txn", [["send", K1, 4], ["poll"]])
    b.complete(0, "ok", [["send", K, [0, 1]], ["poll", {K1: [[0, 4]]}]])
    b.complete(1, "ok", [["send", K1, [0, 4]], ["poll", {K: [[0, 1]] if bad else []}]])
    _read_all(b, {K: [1], K1: [4]})
    return b


def _cross(b: HistoryBuilder, first: tuple, second: tuple, bad: bool, read: bool) -> None:
    """A long transaction B (process 5) overlapping two short ops `first`
    and `second` (processes given in the tuples). With ``read`` False the
    edges are ww: B's t-0 record precedes first's, second's t-1 record
    precedes B's. With ``read`` True they are wr: first reads B's t-0 record,
    B reads second's t-1 record."""
    p1, p2, overlap = first[0], second[0], first[1]
    if read:
        b.invoke(5, "txn", [["send", K, 3], ["poll"]])
    else:
        b.invoke(5, "txn", [["send", K, 3], ["send", K1, 4]])
    if read:
        b.invoke(p1, "poll", [["poll"]])
        c1 = ("ok", [["poll", {K: [[0, 3]]}]])
    else:
        b.invoke(p1, "send", [["send", K, 1]], acks="all")
        c1 = ("ok", [["send", K, [1, 1]]])
    if not overlap:
        b.complete(p1, *c1)
    b.invoke(p2, "send", [["send", K1, 2]], acks="all")
    if overlap:
        b.complete(p1, *c1)
    b.complete(p2, "ok", [["send", K1, [0, 2]]])
    if read:
        b.complete(5, "ok", [["send", K, [0, 3]], ["poll", {K1: [[0, 2]] if bad else []}]])
        _read_all(b, {K: [3], K1: [2]})
    else:
        b.complete(5, "ok", [["send", K, [0 if bad else 2, 3]], ["send", K1, [1, 4]]])
        _read_all(b, {K: [3, 1] if bad else [None, 1, 3], K1: [2, 4]})


def g0_process(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    _cross(b, (0, False), (0, None), bad, read=False)
    return b


def g0_realtime(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    _cross(b, (0, not bad), (1, None), True, read=False)  # clean twin: the two ops overlap
    return b


def g1c_process(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    _cross(b, (0, False), (0, None), bad, read=True)
    return b


def g1c_realtime(bad: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    _cross(b, (0, not bad), (1, None), True, read=True)
    return b


CASES: list[tuple[str, Callable[[bool], HistoryBuilder], set[str]]] = [
    ("duplicate", duplicate, {"duplicate"}),
    ("inconsistent-offsets", inconsistent_offsets, {"inconsistent-offsets"}),
    ("lost-write", lost_write, {"lost-write", "unseen", "lost-acked-write"}),
    ("unseen", unseen, {"unseen"}),
    ("G1a", g1a, {"G1a"}),
    ("poll-skip", poll_skip, {"poll-skip"}),
    ("nonmonotonic-poll", nonmonotonic_poll, {"nonmonotonic-poll"}),
    ("int-poll-skip", int_poll_skip, {"int-poll-skip"}),
    ("int-nonmonotonic-poll", int_nonmonotonic_poll, {"int-nonmonotonic-poll"}),
    ("nonmonotonic-send", nonmonotonic_send, {"nonmonotonic-send", "G0-process"}),
    ("int-send-skip", int_send_skip, {"int-send-skip", "G0"}),
    ("int-nonmonotonic-send", int_nonmonotonic_send, {"int-nonmonotonic-send"}),
    ("G0", g0, {"G0"}),
    ("G1c", g1c, {"G1c"}),
    ("G0-process", g0_process, {"G0-process"}),
    ("G0-realtime", g0_realtime, {"G0-realtime"}),
    ("G1c-process", g1c_process, {"G1c-process"}),
    ("G1c-realtime", g1c_realtime, {"G1c-realtime"}),
]


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_anomaly_is_reported_exactly(name: str, build, expected: set[str]) -> None:
    assert found(build(True)) == expected


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_near_identical_history_is_clean(name: str, build, expected: set[str]) -> None:
    r = check_history(build(False).ops)
    assert r["anomaly_types"] == []
    assert r["valid"] is True


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_examples_name_op_indices(name: str, build, expected: set[str]) -> None:
    b = build(True)
    r = check_history(b.ops)
    n = len(b.ops)
    for typ in expected:
        exs = r["anomalies"][typ]
        assert exs, typ
        for ex in exs:
            idxs = [ex[k] for k in ("op", "writer") if isinstance(ex.get(k), int)]
            idxs += [i for k in ("ops", "cycle") for i in ex.get(k, [])]
            assert idxs, ex
            assert all(0 <= i < n and b.ops[i].type != "invoke" for i in idxs), ex


def test_cycle_example_explains_each_step() -> None:
    r = check_history(g0_realtime(True).ops)
    (ex,) = r["anomalies"]["G0-realtime"]
    types = [s["type"] for s in ex["steps"]]
    assert "realtime" in types and "ww" in types
    assert ex["cycle"][0] == ex["cycle"][-1]
    for s in ex["steps"]:
        if s["type"] == "ww":
            assert s["key"] in (K, K1)


def test_subscribe_allows_poll_skip_and_nonmonotonic_poll() -> None:
    """Jepsen's allowed-error-types: a subscribed consumer can be rebalanced
    between polls, so skips and rewinds are expected there."""
    for build, typ in ((poll_skip, "poll-skip"), (nonmonotonic_poll, "nonmonotonic-poll")):
        b = build(True)
        assert check_history(b.ops)["valid"] is False
        r = check_history(b.ops, queue_options=QueueOptions(sub_via=("subscribe",)))
        assert typ in r["anomaly_types"] and r["valid"] is True


def test_int_send_skip_and_its_g0_are_allowed_unless_strict_cycles() -> None:
    """Jepsen allows int-send-skip and G0 always; the stricter reading
    allows that G0 only with transactions."""
    r = check_history(int_send_skip(True).ops)
    assert {"int-send-skip", "G0"} <= set(r["anomaly_types"])
    assert r["valid"] is True
    strict = QueueOptions(strict_cycles=True)
    assert check_history(int_send_skip(True).ops, queue_options=strict)["valid"] is False
    strict_txn = QueueOptions(strict_cycles=True, txn=True)
    assert check_history(int_send_skip(True).ops, queue_options=strict_txn)["valid"] is True


def test_assign_forgets_position_of_unassigned_key() -> None:
    """After an assign without the key, the next poll of it starts afresh:
    no poll-skip (Jepsen keeps last reads only for still-assigned keys)."""
    b = poll_skip(False)
    b2 = HistoryBuilder()
    _three(b2)
    b2.poll(1, {K: [(0, 1)]})
    b2.assign(1, [K1])
    b2.assign(1, [K, K1])
    b2.poll(1, {K: [(2, 3)]})
    b2.poll(2, {K: [(0, 1), (1, 2), (2, 3)]})
    assert found(b2) == set()
    assert found(b) == set()


def test_info_send_that_was_read_is_not_unseen_or_lost() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, None, type="info")
    b.send(2, K, 2, 1)
    b.poll(1, {K: [(0, 1), (1, 2)]})
    r = check_history(b.ops)
    assert r["valid"] is True
    assert r["durability"]["acks=all"]["unacked_visible"] == 1


def test_invocation_without_completion_counts_as_info() -> None:
    b = HistoryBuilder()
    b.invoke(0, "send", [["send", K, 1]], acks="all")  # never completes
    b.send(2, K, 2, 1)
    b.poll(1, {K: [(0, 1), (1, 2)]})
    r = check_history(b.ops)
    assert r["valid"] is True
    assert r["durability"]["acks=all"]["indeterminate"] == 1


def test_budget_exhausted_is_unknown_not_valid() -> None:
    from checkers.queue.synth import valid_history

    r = check_history(valid_history(400, 2, 4, seed=5), time_budget=1e-9)
    assert r["valid"] == "unknown"
    assert r["checkers"]["queue"]["cycle_search"] == "budget-exceeded"


def test_final_read_from_offset_zero_is_not_a_nonmonotonic_poll() -> None:
    """Final reads use a fresh consumer from the beginning of the log
    (workloads/queue.py), so re-reading offset 0 is not going backwards."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.poll(1, {K: [(0, 1), (1, 2)]})
    b.poll(1, {K: [(0, 1), (1, 2)]}, final=True)
    assert found(b) == set()
    b2 = HistoryBuilder()
    b2.send(0, K, 1, 0)
    b2.send(0, K, 2, 1)
    b2.poll(1, {K: [(0, 1), (1, 2)]})
    b2.poll(1, {K: [(0, 1), (1, 2)]})  # the same re-read by an ordinary poll
    assert found(b2) == {"nonmonotonic-poll"}


def test_inline_per_key_stage_stops_at_the_budget() -> None:
    from checkers.pipeline import PerKeyBudgetExceeded, run_keys
    from checkers.queue.project import project
    from checkers.queue.synth import valid_history

    keys = project(valid_history(2000, 6, 4, seed=3)).keys
    with pytest.raises(PerKeyBudgetExceeded) as e:
        run_keys(keys, deadline=0.0)
    assert e.value.results == []


def test_jepsen_edn_kafka_history_with_integer_keys(tmp_path) -> None:
    """Histories from Jepsen's Kafka workload (integer keys, keyword
    micro-ops) check the same as ours."""
    from checkers.history import read_edn

    p = tmp_path / "history.edn"
    p.write_text("""[
{:type :invoke, :f :assign, :value [0], :process 1, :time 1, :index 0}
{:type :ok, :f :assign, :value [0], :process 1, :time 2, :index 1}
{:type :invoke, :f :send, :value [[:send 0 7]], :process 0, :time 3, :index 2}
{:type :ok, :f :send, :value [[:send 0 [0 7]]], :process 0, :time 4, :index 3}
{:type :invoke, :f :send, :value [[:send 0 8]], :process 0, :time 5, :index 4}
{:type :ok, :f :send, :value [[:send 0 [1 8]]], :process 0, :time 6, :index 5}
{:type :invoke, :f :poll, :value [[:poll]], :process 1, :time 7, :index 6}
{:type :ok, :f :poll, :value [[:poll {0 [[1 8]]}]], :process 1, :time 8, :index 7}
]""")
    r = check_history(read_edn(p))
    # no acks on Jepsen's sends: counted under acks=unknown, so no lost-acked-write
    assert set(r["anomaly_types"]) == {"lost-write", "unseen"}
    assert r["durability"]["acks=unknown"]["lost"] == 1
    (ex,) = r["anomalies"]["lost-write"]
    assert ex["key"] == "0" and ex["value"] == 7 and ex["op"] == 3


def test_rw_cycles_are_searched_only_on_request() -> None:
    """A poll invoked after a send completed that does not return it proves
    nothing in Kafka (a poll returns a batch, not 'everything so far'), so
    rw edges are off by default, as in Jepsen; with rw=True the stale read
    is a G-single-realtime cycle."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.poll(1, {K: [(0, 1)]})
    b.poll(2, {K: [(0, 1), (1, 2)]})
    assert found(b) == set()
    r = check_history(b.ops, queue_options=QueueOptions(rw=True))
    assert r["anomaly_types"] == ["G-single-realtime"]
    types = [s["type"] for s in r["anomalies"]["G-single-realtime"][0]["steps"]]
    assert sorted(types) == ["realtime", "rw"]


@pytest.mark.parametrize("seed,partitions,processes,max_poll", [
    (0, 1, 2, 1), (1, 3, 5, 4), (2, 8, 3, 10), (3, 16, 16, 2), (4, 2, 9, 0),
])
def test_histories_of_a_correct_log_have_no_anomalies(seed, partitions, processes, max_poll) -> None:
    """Soundness: concurrent clients of a correct log (effects inside each
    op's real-time interval) never trip any check."""
    from checkers.queue.synth import valid_history

    ops = valid_history(3000, partitions, processes, seed=seed, max_poll=max_poll)
    r = check_history(ops)
    assert r["anomaly_types"] == [] and r["valid"] is True
    assert r["checkers"]["queue"]["graph"]["cyclic_nodes"] == 0
    assert r["durability"]["acks=all"]["lost"] == 0


def test_duplicated_record_read_in_one_poll_is_only_a_duplicate() -> None:
    """A retried send without idempotence can append one record twice
    (found by the simulator with kip101 off); the poll that returns both
    copies continues offset by offset, so it is not also an internal skip or
    rewind."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.poll(1, {K: [(0, 1), (1, 2), (2, 2)]})
    b.poll(1, {K: []})
    assert found(b) == {"duplicate"}


def test_cycle_search_refuses_a_remainder_too_big_for_memory() -> None:
    from checkers.pipeline import run_keys
    from checkers.queue.checker import merge_key_results
    from checkers.queue.graph import BudgetExceeded, find_cycles
    from checkers.queue.project import project

    proj = project(g0(True).ops)
    merged = merge_key_results(run_keys(proj.keys))
    assert find_cycles(proj.ops, merged["edges"], merged["committed_info"])["counts"] == {"G0": 1}
    with pytest.raises(BudgetExceeded, match="nodes on cycles"):
        find_cycles(proj.ops, merged["edges"], merged["committed_info"], max_cyclic_nodes=1)
