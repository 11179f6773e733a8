"""What the run page computes before it draws: Jepsen's consumer
diagnostics on small histories whose answers are known, a G0 / G1c cycle
explained edge by edge from the checker's own finding, the nested results
as readable rows, and the traces of a real simulator run read onto the
history's clock."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from checkers.check import check_history
from checkers.history.jsonl import read_jsonl, write_jsonl
from checkers.queue.synth import HistoryBuilder
from harness.report import render_report
from harness.report import diagnostics as dg
from harness.report.cycles import OpIndex, explain, render_cycles
from harness.report.tables import rows, table
from harness.report.traces import read_traces

K, K1 = "t-0", "t-1"
ROOT = Path(__file__).resolve().parents[2]


def test_realtime_lag_is_the_age_of_the_oldest_acknowledged_record_a_poll_had_not_read():
    """Jepsen's realtime lag: at each poll's invocation, the process's
    position is what it read before; the oldest acknowledged record past it
    gives the lag, 0 once caught up."""
    b = HistoryBuilder()
    b.send(0, K, "a", 0)
    b.send(0, K, "b", 1)
    b.poll(1, {K: [(0, "a")]})   # had read nothing: a is the oldest unread
    b.poll(1, {K: [(1, "b")]})   # had read a: b is the oldest unread
    b.poll(1, {K: []})           # had read b: caught up
    lag = dg.realtime_lag(dg.facts(b.ops))
    ack_a, ack_b = b.ops[1].time, b.ops[3].time
    polls = [o.time for o in b.ops if o.f == "poll" and o.type == "invoke"]
    got = [round(v * 1e9) for _, v in lag[K]]
    assert got == [polls[0] - ack_a, polls[1] - ack_b, 0]


def test_unseen_counts_acknowledged_records_until_a_poll_returns_them():
    b = HistoryBuilder()
    b.send(0, K, "a", 0)
    b.send(0, K1, "c", 0)
    b.poll(1, {K: [(0, "a")]})
    ts, total, per = dg.unseen_series(dg.facts(b.ops), buckets=10)
    assert max(total) == 2 and total[-1] == 1  # c is never read
    assert per[K1][-1] == 1 and per[K][-1] == 0


def test_consume_counts_and_info_resolution():
    b = HistoryBuilder()
    b.send(0, K, "a", 0)
    b.send(0, K, "b", 1)
    b.invoke(2, "send", [["send", K, "c"]], acks="1")
    b.complete(2, "info", [["send", K, "c"]], acks="1")
    b.invoke(3, "send", [["send", K, "d"]], acks="1")
    b.complete(3, "info", [["send", K, "d"]], acks="1")
    b.poll(1, {K: [(0, "a"), (1, "b"), (2, "c")]})
    b.poll(4, {K: [(0, "a")]})
    q = dg.facts(b.ops)
    assert dict(dg.consume_counts(q)) == {2: 1, 1: 1}   # a twice, b once
    (row,) = dg.info_resolution(q)
    assert (row["acks"], row["info"], row["info_read"], row["info_unread"]) == ("acks=1", 2, 1, 1)


def _g0() -> HistoryBuilder:
    """Two concurrent transactions write both keys in opposite orders."""
    b = HistoryBuilder()
    b.invoke(0, "txn", [["send", K, 1], ["send", K1, 2]])
    b.invoke(1, "txn", [["send", K, 3], ["send", K1, 4]])
    b.complete(0, "ok", [["send", K, [0, 1]], ["send", K1, [1, 2]]])
    b.complete(1, "ok", [["send", K, [1, 3]], ["send", K1, [0, 4]]])
    b.poll(2, {K: [(0, 1), (1, 3)], K1: [(0, 4), (1, 2)]})
    return b


def test_a_g0_cycle_is_drawn_with_each_ww_edge_explained_from_the_log_order(tmp_path):
    b = _g0()
    result = check_history(b.ops)
    assert "G0" in result["anomaly_types"]
    cycles = render_cycles(result, b.ops, tmp_path)
    (c,) = [c for c in cycles if c["type"] == "G0"]
    assert (tmp_path / c["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {s["type"] for s in c["steps"]} == {"ww"}
    whys = " | ".join(s["why"] for s in c["steps"])
    assert "op 2 wrote 1 to t-0 at offset 0, op 3 wrote 3 at offset 1" in whys
    assert "op 3 wrote 4 to t-1 at offset 0, op 2 wrote 2 at offset 1" in whys


def test_wr_and_realtime_edges_say_what_was_read_and_when():
    b = HistoryBuilder()
    b.send(0, K, "x", 0)
    b.poll(1, {K: [(0, "x")]})
    ix = OpIndex(b.ops)
    wr = explain({"from": 1, "to": 3, "type": "wr", "key": K}, ix)
    assert wr == "op 3 read x (offset 0) from t-0, which op 1 wrote"
    rt = explain({"from": 1, "to": 3, "type": "realtime"}, ix)
    assert rt.startswith("op 1 completed at") and "before op 3 was invoked" in rt


def test_nested_results_become_dotted_rows_of_plain_values():
    got = dict(rows({"messages": {"sent": 3, "dropped": 0}, "keys": ["a", "b"], "ok": True,
                     "pairs": [[1, 2], [3, 4]], "empty": {}}))
    assert got == {"messages.sent": "3", "messages.dropped": "0", "keys": "a, b", "ok": "yes",
                   "pairs": "(1, 2); (3, 4)", "empty": "none"}
    t = table({f"k{i}": i for i in range(100)}, limit=10)
    assert len(t["rows"]) == 10 and t["more"] == 90


def test_a_simulator_runs_traces_are_read_onto_the_history_clock(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "sim", "--seed", "5",
                        "--time-limit", "20", "--scenario", "unclean-loss",
                        "--variant", "unclean_election=on", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 1, r.stderr[-500:]  # this seed loses acknowledged writes
    run = (tmp_path / "latest").resolve()
    ops = read_jsonl(run / "history.jsonl")
    test = json.loads((run / "test.json").read_text())
    view = read_traces(run, ops, test)
    assert view.offset_ms == 0.0 and view.files == 6
    assert view.partitions == [f"t0-{p}" for p in range(test["partitions"])]
    assert any(e["kind"] == "unclean" for e in view.elections)
    assert view.truncations and view.fencing
    # an acknowledged offset was below the leader's HW: the HW series reaches past it
    hw_max = max(v for pts in view.hw.values() for _, v in pts)
    acked = max(o.value[0][2][0] for o in ops if o.f == "send" and o.type == "ok")
    assert hw_max >= acked
    html = render_report(run).read_text()
    assert 'src="lost-writes.png"' in html and 'src="isr-leader.png"' in html and "unclean" in html


def test_a_history_of_a_million_operations_gets_thinned_plots(tmp_path, monkeypatch):
    """The raw scatter keeps every fail/info point and samples ok points down
    to MAX_POINTS; shown here with a small cap rather than a million ops."""
    from harness.report import plots

    monkeypatch.setattr(plots, "MAX_POINTS", 50)
    d = tmp_path / "run"
    d.mkdir()
    b = HistoryBuilder()
    for i in range(400):
        b.send(i % 4, K, i, i)
    write_jsonl(d / "history.jsonl", b.ops)
    (d / "results.json").write_text(json.dumps({"valid": True}))
    html = render_report(d).read_text()
    assert ">VALID<" in html and (d / "latency-raw.png").stat().st_size > 0


def test_a_real_runs_wall_clock_traces_are_aligned_by_its_first_answered_produce(tmp_path):
    """A real run's trace ``t`` is the host's wall clock while its history
    counts from the generator's start: the first produce a broker answered
    and the first acknowledged send are taken as the same moment."""
    b = HistoryBuilder()
    b.t = 100_000_000 - 10  # the first send is acknowledged at 100 ms of history time... plus one op
    b.send(0, K, "a", 0)
    first_ok_ms = b.ops[1].time / 1e6
    wall0 = 1_700_000_000_000
    node = tmp_path / "nodes" / "n1"
    node.mkdir(parents=True)
    lines = [{"t": wall0 - 5000, "node": 1, "kind": "become_leader", "tp": K, "leader_epoch": 0, "isr": [1]},
             {"t": wall0, "node": 1, "kind": "produce", "tp": K, "acks": "all", "error": None, "base": 0, "count": 1},
             {"t": wall0 + 2000, "node": 1, "kind": "hw", "tp": K, "hw": 1, "leo": 1, "role": "leader"}]
    (node / "trace.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"t": 17')  # torn last line
    view = read_traces(tmp_path, b.ops, {"name": "queue", "runtime": "local"})
    assert view.offset_ms == wall0 - first_ok_ms
    (t, hw), = view.hw[(K, 1)]
    assert (round(t, 6), hw) == (round((first_ok_ms + 2000) / 1000, 6), 1)
    assert view.meta[K][0]["leader"] == 1 and view.bad_lines == 1
