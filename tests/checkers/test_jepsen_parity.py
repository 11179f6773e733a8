"""Jepsen's Kafka checker (``jepsen.tests.kafka``), rule by rule: each test
is a small history written from the rule's definition, named after it.

The default reading is Jepsen's; ``strict_cycles`` keeps kraftwerk's stricter
one (a cycle without transactions counts)."""

from __future__ import annotations

import networkx as nx

from checkers.check import check_history
from checkers.history.op import Op
from checkers.queue.checker import QueueOptions, allowed_anomalies
from checkers.queue.graph import PROC, RT, WR, WW, cycle_exists_cases
from checkers.queue.synth import HistoryBuilder

X, Y = "t-0", "t-1"


def _g0_txns() -> HistoryBuilder:
    """Two transactions send to x and y in opposite log orders: a ww cycle."""
    b = HistoryBuilder()
    b.txn(0, [["send", X, [0, "a"]], ["send", Y, [1, "b"]]])
    b.txn(1, [["send", X, [1, "c"]], ["send", Y, [0, "d"]]])
    b.poll(2, {X: [(0, "a"), (1, "c")], Y: [(0, "d"), (1, "b")]})
    return b


def _wr_cycle() -> HistoryBuilder:
    """Each transaction polls the other's send: a cycle of wr edges alone."""
    b = HistoryBuilder()
    b.invoke(0, "txn", [["send", X, "a"], ["poll"]])
    b.invoke(1, "txn", [["send", Y, "b"], ["poll"]])
    b.complete(0, "ok", [["send", X, [0, "a"]], ["poll", {Y: [[0, "b"]]}]])
    b.complete(1, "ok", [["send", Y, [0, "b"]], ["poll", {X: [[0, "a"]]}]])
    return b


def test_g0_is_always_allowed_as_jepsen_allows_unisolated_writes() -> None:
    r = check_history(_g0_txns().ops)
    assert "G0" in r["anomaly_types"]
    assert r["valid"] is True


def test_strict_cycles_counts_g0_unless_the_run_used_transactions() -> None:
    b = _g0_txns()
    assert check_history(b.ops, queue_options=QueueOptions(strict_cycles=True))["valid"] is False
    assert check_history(b.ops, queue_options=QueueOptions(strict_cycles=True, txn=True))["valid"] is True


def test_g1c_is_allowed_with_ww_deps_and_invalid_without() -> None:
    b = _wr_cycle()
    r = check_history(b.ops)
    assert "G1c" in r["anomaly_types"] and r["valid"] is True
    r = check_history(b.ops, queue_options=QueueOptions(ww_deps=False))
    assert "G1c" in r["anomaly_types"] and r["valid"] is False
    assert "G1c" not in r["checkers"]["queue"]["allowed_anomaly_types"]


def test_no_ww_deps_infers_no_write_write_edges() -> None:
    r = check_history(_g0_txns().ops, queue_options=QueueOptions(ww_deps=False))
    assert not any(t.startswith("G0") for t in r["anomaly_types"])


def test_allowed_types_follow_jepsens_allowed_error_types() -> None:
    base = allowed_anomalies(QueueOptions())
    assert {"int-send-skip", "G0", "G0-process", "G0-realtime", "PL-1-cycle-exists",
            "strong-PL-1-cycle-exists", "G1c", "G1c-process", "G1c-realtime",
            "PL-2-cycle-exists", "strong-PL-2-cycle-exists"} <= base
    assert not {"poll-skip", "nonmonotonic-poll", "precommitted-read", "G1a", "lost-write"} & base
    sub = allowed_anomalies(QueueOptions(sub_via=("subscribe",)))
    assert {"poll-skip", "nonmonotonic-poll"} <= sub
    no_ww = allowed_anomalies(QueueOptions(ww_deps=False))
    assert "G0" in no_ww and not {"G1c", "PL-2-cycle-exists"} & no_ww


def test_precommitted_read_a_transaction_polls_its_own_send() -> None:
    b = HistoryBuilder()
    b.txn(0, [["send", X, [0, "a"]], ["poll", {X: [[0, "a"]]}]])
    r = check_history(b.ops)
    assert "precommitted-read" in r["anomaly_types"] and r["valid"] is False
    clean = HistoryBuilder()
    clean.txn(0, [["send", X, [0, "a"]], ["poll", {X: []}]])
    clean.poll(1, {X: [(0, "a")]})
    assert check_history(clean.ops)["anomaly_types"] == []


def _info_txn(read_x: bool) -> HistoryBuilder:
    """An indeterminate transaction sent to x and y; y's log goes on past
    its record, which no poll returned."""
    b = HistoryBuilder()
    b.invoke(0, "txn", [["send", X, "a"], ["send", Y, "b"]])
    b.complete(0, "info", [["send", X, [0, "a"]], ["send", Y, [0, "b"]]])
    b.send(1, Y, "c", 1)
    b.send(1, X, "d", 1 if read_x else 0)
    b.poll(2, {Y: [(1, "c")], X: [(0, "a"), (1, "d")] if read_x else [(0, "d")]})
    return b


def test_info_txn_proven_by_a_read_in_another_key_must_have_committed() -> None:
    """must-have-committed?: an info transaction one of whose sends (in any
    key) was read committed, so its unread send below a read offset is lost."""
    r = check_history(_info_txn(read_x=True).ops)
    assert r["checkers"]["queue"]["counts"].get("lost-write") == 1
    (ex,) = r["anomalies"]["lost-write"]
    assert ex["key"] == Y and ex["value"] == "b"
    assert r["valid"] is False


def test_info_txn_never_read_is_not_lost() -> None:
    r = check_history(_info_txn(read_x=False).ops)
    assert "lost-write" not in r["anomaly_types"]
    assert "unseen" not in r["anomaly_types"]  # only ok sends can be unseen


def test_worst_realtime_lag_is_from_when_the_read_offset_stopped_being_the_tail() -> None:
    b = HistoryBuilder()
    b.send(0, X, "a", 0)
    i_b = b.send(0, X, "b", 1)           # offset 1 known to exist from here
    b.assign(1, [X])
    inv = len(b.ops)
    b.poll(1, {X: [(0, "a")]})           # still at offset 0
    lag = b.ops[inv].time - b.ops[i_b].time
    w = check_history(b.ops)["checkers"]["queue"]["worst_realtime_lag"]
    assert w["lag"] == lag / 1e9 and w["key"] == X and w["process"] == 1


def test_consume_counts_count_what_subscribed_consumers_got_twice() -> None:
    b = HistoryBuilder()
    b.send(0, X, "a", 0)
    b.assign(1, [X], f="subscribe")
    b.poll(1, {X: [(0, "a")]})
    b.poll(1, {X: [(0, "a")]})
    b.assign(2, [X])                     # assigned consumers may re-read freely
    b.poll(2, {X: [(0, "a")]})
    b.poll(2, {X: [(0, "a")]})
    cc = check_history(b.ops)["checkers"]["queue"]["consume_counts"]
    assert cc == {"distribution": {2: 1}, "dup_counts": {X: {"a": 2}}}


def test_info_txn_causes_are_the_distinct_errors_of_indeterminate_ops() -> None:
    b = HistoryBuilder()
    for p, err in ((0, "timeout"), (1, "timeout"), (2, ["disconnect", 3])):
        b.invoke(p, "send", [["send", X, p]])
        b.complete(p, "info", None)
        b.ops[-1].error = err
    b.send(3, X, "z", 0)
    b.poll(4, {X: [(0, "z")]})
    assert check_history(b.ops)["checkers"]["queue"]["info_txn_causes"] == ["timeout", ["disconnect", 3]]


def _unseen_writes(n: int) -> HistoryBuilder:
    b = HistoryBuilder()
    for v in range(n):
        b.send(0, X, v, v)
    b.poll(1, {X: []})
    return b


def test_all_errors_keeps_every_example_and_the_default_a_sample() -> None:
    b = _unseen_writes(40)
    assert len(check_history(b.ops)["anomalies"]["unseen"]) == 32
    r = check_history(b.ops, queue_options=QueueOptions(all_errors=True))
    assert len(r["anomalies"]["unseen"]) == 40
    assert r["checkers"]["queue"]["counts"]["unseen"] == 40


def test_default_sample_of_poll_skips_keeps_the_largest_deltas() -> None:
    b = HistoryBuilder()
    n = 70
    for v in range(n):
        b.send(0, X, v, v)
    b.assign(1, [X])
    b.poll(1, {X: [(0, 0)]})
    at, skips = 0, []
    for d in range(2, 12):               # ten skips of growing size
        at += d
        b.poll(1, {X: [(at, at)]})
        skips.append(d)
    b.poll(2, {X: [(o, o) for o in range(n)]}, final=True)
    exs = check_history(b.ops)["anomalies"]["poll-skip"]
    assert sorted(e["delta"] for e in exs) == skips[-8:]


def test_cycle_exists_reports_the_weakest_level_with_a_cycle() -> None:
    """Elle's fallback: an SCC in the ww subgraph is PL-1-cycle-exists, and
    the stronger levels (whose subgraphs contain it) are not repeated."""
    g = nx.DiGraph()
    g.add_edge(0, 1, types={WW})
    g.add_edge(1, 0, types={WW})
    assert [n for n, _ in cycle_exists_cases(g, 2, [10, 11])] == ["PL-1-cycle-exists"]
    g = nx.DiGraph()
    g.add_edge(0, 1, types={WW})
    g.add_edge(1, 0, types={WR})
    names = [n for n, _ in cycle_exists_cases(g, 2, [10, 11])]
    assert names == ["PL-2-cycle-exists"]
    g = nx.DiGraph()
    g.add_edge(0, 1, types={WW})
    g.add_edge(1, 2, types={RT})         # 2 is a time point
    g.add_edge(2, 0, types={RT})
    cases = cycle_exists_cases(g, 2, [10, 11])
    assert [n for n, _ in cases] == ["strong-PL-1-cycle-exists"]
    assert cases[0][1]["scc"] == [10, 11]
    g.add_edge(0, 1, types={WW, PROC})
    assert cycle_exists_cases(g, 2, [10, 11])[0][0] == "strong-PL-1-cycle-exists"


def test_a_run_that_acknowledged_no_write_is_unknown_not_valid() -> None:
    b = HistoryBuilder()
    b.invoke(0, "send", [["send", X, "a"]])
    b.complete(0, "fail", [["send", X, "a"]])
    b.poll(1, {X: []})
    r = check_history(b.ops)
    assert r["anomaly_types"] == [] and r["valid"] == "unknown"
    assert r["checkers"]["queue"]["evidence"]["acked_writes"] == 0


def test_a_run_that_checked_no_key_is_unknown_not_valid() -> None:
    ops = [Op("info", "start-partition", None, "nemesis", 10, 0)]
    r = check_history(ops)
    assert r["valid"] == "unknown"
    assert check_history([])["valid"] == "unknown"


def test_a_rebalance_during_a_poll_excuses_its_internal_skip_of_that_key() -> None:
    b = HistoryBuilder()
    for v in range(3):
        b.send(0, X, v, v)
    b.invoke(1, "poll", [["poll"]])
    i = b.complete(1, "ok", [["poll", {X: [[0, 0], [2, 2]]}]])
    b.poll(2, {X: [(0, 0), (1, 1), (2, 2)]})
    assert "int-poll-skip" in check_history(b.ops)["anomaly_types"]
    b.ops[i].extra["rebalance-log"] = [{"keys": [X]}]
    assert check_history(b.ops)["anomaly_types"] == []
    b.ops[i].extra["rebalance-log"] = [{"keys": [Y]}]
    assert "int-poll-skip" in check_history(b.ops)["anomaly_types"]


def test_an_unexplained_cycle_search_falls_back_to_cycle_exists() -> None:
    """When cycles are not named (budget), the SCC of the weakest subgraph
    stands for them: here a ww cycle, PL-1-cycle-exists (allowed, as G0)."""
    from checkers.queue.checker import merge_key_results
    from checkers.queue.graph import find_cycles
    from checkers.queue.keycheck import check_key
    from checkers.queue.project import project

    proj = project(_g0_txns().ops)
    merged = merge_key_results([check_key(k, evs) for k, evs in proj.keys.items()])
    cyc = find_cycles(proj.ops, merged["edges"], merged["committed_info"], explain=False)
    assert cyc["cut_short"] == "not explained"
    assert cyc["counts"] == {"PL-1-cycle-exists": 1}
    (ex,) = cyc["anomalies"]["PL-1-cycle-exists"]
    assert ex["scc-size"] == 2 and ex["not"] == "read-uncommitted"
    assert "PL-1-cycle-exists" in allowed_anomalies(QueueOptions())
    assert "PL-1-cycle-exists" not in allowed_anomalies(QueueOptions(strict_cycles=True))


def _aborted_then_read(reader_type: str) -> HistoryBuilder:
    """A transaction sent ``a`` to x and was aborted (``fail``); a later
    transaction's send of ``b`` committed; a poll then returns x's log."""
    b = HistoryBuilder()
    b.txn(0, [["send", X, [0, "a"]], ["poll", {}]], type="fail")
    b.txn(1, [["send", X, [2, "b"]]])
    b.poll(2, {X: [(0, "a"), (2, "b")]}, type=reader_type)
    return b


def test_g1a_an_ok_poll_returns_a_send_of_an_aborted_transaction() -> None:
    """Jepsen's g1a-cases: a value whose writer failed, read by an ok
    txn/poll (what a read_uncommitted consumer does with an aborted
    transaction's records)."""
    r = check_history(_aborted_then_read("ok").ops)
    assert r["checkers"]["queue"]["counts"].get("G1a") == 1
    (ex,) = r["anomalies"]["G1a"]
    assert ex["key"] == X and ex["value"] == "a"
    assert r["valid"] is False


def test_g1a_needs_an_ok_reader_an_indeterminate_poll_proves_nothing() -> None:
    assert "G1a" not in check_history(_aborted_then_read("info").ops)["anomaly_types"]


def test_an_aborted_transactions_unread_records_are_gaps_not_losses_or_skips() -> None:
    """read_committed: the aborted record at offset 0 (and the markers) are
    holes in the offsets; the committed record after them is read alone. No
    lost-write, poll-skip or unseen: offsets are made dense, and a failed
    send is never owed to a reader."""
    b = HistoryBuilder()
    b.txn(0, [["send", X, [0, "a"]]], type="fail")
    b.txn(1, [["send", X, [2, "b"]]])
    b.poll(2, {X: [(2, "b")]})
    b.txn(1, [["send", X, [4, "c"]]])
    b.poll(2, {X: [(4, "c")]})
    r = check_history(b.ops)
    assert r["anomaly_types"] == [] and r["valid"] is True


def test_info_txn_causes_name_why_transactions_ended_indeterminate() -> None:
    """Jepsen's info-txn-causes: the errors of info txns (a commit that timed
    out, a producer fenced while committing); an aborted (fail) transaction's
    error is not among them: its outcome is known."""
    b = HistoryBuilder()
    for p, key, off, typ, err in ((0, X, 0, "info", "_TIMED_OUT"), (1, Y, 0, "info", "PRODUCER_FENCED"),
                                  (2, X, 1, "fail", "aborted")):
        b.invoke(p, "txn", [["send", key, p]])
        b.complete(p, typ, [["send", key, [off, p]]])
        b.ops[-1].error = err
    b.txn(3, [["send", X, [2, "d"]]])
    b.poll(4, {X: [(0, 0), (2, "d")]})
    causes = check_history(b.ops)["checkers"]["queue"]["info_txn_causes"]
    assert causes == ["_TIMED_OUT", "PRODUCER_FENCED"]
