"""Trace lines (``reference_impl.trace_format``): one spelling for both
runtimes, re-read by the invariant monitor exactly as it saw them live."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.invariants import iter_trace_dir
from reference_impl.core.messages import TopicPartition
from harness.config import TestConfig
from harness.lifecycle.runner import sim_run
from reference_impl.trace_format import encode_trace_line, stamp


@dataclass(frozen=True)
class _Point:
    x: int
    y: int


def _line(rec: dict[str, Any]) -> Any:
    b = encode_trace_line(rec)
    assert b.endswith(b"\n") and b.count(b"\n") == 1
    return json.loads(b)


def test_trace_line_spells_partitions_sets_dataclasses_and_bytes_as_json() -> None:
    rec = {"kind": "x", "tp": TopicPartition("t", 2), "isr": frozenset({3, 1, 2}), "p": _Point(1, 2),
           "raw": b"\x01\xff", "pair": (1, "a"), 7: "int key"}
    assert _line(rec) == {"kind": "x", "tp": "t-2", "isr": [1, 2, 3], "p": {"x": 1, "y": 2},
                          "raw": "01ff", "pair": [1, "a"], "7": "int key"}


def test_trace_line_never_raises_on_values_json_cannot_hold() -> None:
    """A runtime must never lose a trace event to its encoder: an integer
    beyond 64 bits goes through json, an unknown object is written as repr."""
    big = 1 << 70
    assert _line({"n": big}) == {"n": big}
    out = _line({"n": big, "o": object(), "s": {1, "a"}})
    assert out["n"] == big and out["o"].startswith("<object object") and sorted(map(str, out["s"])) == ["1", "a"]


def test_stamp_keeps_the_runtime_stamps_when_event_data_collides() -> None:
    rec = stamp({"t": 5, "kind": "election"}, {"kind": "unclean", "tp": "t-0"}, frozenset({"t", "kind"}))
    assert rec == {"t": 5, "kind": "election", "data_kind": "unclean", "tp": "t-0"}


def test_sim_trace_files_reread_equal_the_events_the_monitor_saw_live(tmp_path: Path) -> None:
    """The simulator's ``nodes/*/trace.jsonl`` merged back (what ``kraftwerk
    check`` gives the monitor for a run directory) is the live event stream,
    event for event, in the same order."""
    opts = TestConfig(backend="sim", time_limit=6, nemesis=("all",), nemesis_interval=2, rate=60,
                      final_read_timeout=8, acks="mixed")
    run = sim_run(opts, 4, run_dir=tmp_path)
    live: list[dict[str, Any]] = []
    run.sim.add_trace_listener(lambda ev: live.append(json.loads(json.dumps(ev))))
    run.run()
    reread = list(iter_trace_dir(tmp_path))
    assert len(live) > 500 and {e["kind"] for e in live} >= {"append", "hw", "become_leader", "raft_state"}
    assert reread == live


def test_sim_trace_lines_lead_with_the_runtime_stamps(tmp_path: Path) -> None:
    """Every line of a node's trace starts with the stamps, in the order
    t, seq, node, kind, then the event's data: the simulator stamps the
    event in place for the monitor but writes the stamps first."""
    opts = TestConfig(backend="sim", time_limit=3, nemesis=("none",), rate=60, final_read_timeout=4)
    sim_run(opts, 2, run_dir=tmp_path).run()
    lines = [json.loads(b) for f in sorted(tmp_path.glob("nodes/*/trace.jsonl")) for b in f.read_bytes().splitlines()]
    assert len(lines) > 100
    assert {e["kind"] for e in lines} >= {"append", "hw"}
    for e in lines:
        assert list(e)[:4] == ["t", "seq", "node", "kind"], e


def test_sim_unstamped_fast_path_writes_the_same_traces_and_verdict_as_the_stamped_path(tmp_path: Path) -> None:
    """With no trace listener the simulator hands its frequent events
    (append, hw, produce) to the monitor and the trace file unstamped; with
    one it stamps every event first. The same seed must give byte-identical
    node traces and the same invariant verdict either way, here with kip101
    off under leader churn and kills, so that the monitor reports
    violations."""
    opts = TestConfig(backend="sim", time_limit=20, nemesis=("partition:primaries", "kill"), variants={"kip101": False}, final_read_timeout=6)
    (tmp_path / "fast").mkdir()
    (tmp_path / "slow").mkdir()
    fast = sim_run(opts, 0, run_dir=tmp_path / "fast")
    fast_res = fast.run()
    slow = sim_run(opts, 0, run_dir=tmp_path / "slow")
    slow.sim.add_trace_listener(lambda ev: None)
    slow_res = slow.run()
    files = sorted(p.relative_to(tmp_path / "fast") for p in (tmp_path / "fast").glob("nodes/*/trace.jsonl"))
    assert len(files) == 6
    for f in files:
        assert (tmp_path / "fast" / f).read_bytes() == (tmp_path / "slow" / f).read_bytes(), f
    assert fast_res["invariants"]["counts"], "the variant should break an invariant"
    assert fast_res["invariants"] == slow_res["invariants"]
    assert fast_res["stats"]["history_sha256"] == slow_res["stats"]["history_sha256"]


def test_sim_hands_the_monitor_the_event_time_and_node_on_both_trace_paths() -> None:
    """A violation found on an unstamped event names the same virtual time
    and node as one found on a stamped event: the simulator passes its
    clock and the emitting node to the monitor on the fast path."""
    opts = TestConfig(backend="sim", time_limit=2, nemesis=("none",), rate=20)
    run = sim_run(opts, 1)
    assert run.setup()
    sim = run.sim
    sim.run_until(sim.now + 1234)  # an odd time, so a wrong stamp shows
    bad = {"tp": "t-0", "hw": 10_000, "leo": 1, "role": "follower"}  # HW above LEO
    sim.trace(2, "hw", dict(bad))  # no listener: unstamped
    sim.add_trace_listener(lambda ev: None)
    sim.trace(3, "hw", dict(bad))  # stamped
    fast, slow = [v for v in run.monitor.violations if v.kind == "hw-above-leo"]
    assert (fast.t, fast.node) == (sim.now, 2) and (slow.t, slow.node) == (sim.now, 3)
    assert slow.step == fast.step + 1 and fast.message == slow.message
