"""Traces of several node processes are merged in causal order, at the finest
stamp each runtime writes (``t_us`` from the server, ``seq`` from the
simulator). Within one millisecond a follower's append and the leader's ISR
expansion on the fetch that followed it tie; ordered the wrong way round the
monitor would report an early ISR expansion (seed 000, "Expanding the ISR":
the follower's LEO must reach the HW) that never happened."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.invariants import check_trace_dir, iter_trace_dir


def _write(run: Path, events: list[dict]) -> None:
    for ev in events:
        d = run / "nodes" / f"n{ev['node']}"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "trace.jsonl", "a") as f:
            f.write(json.dumps(ev) + "\n")


def _expansion(follower_stamp: dict, leader_stamp: dict) -> list[dict]:
    """Leader 1 at HW 2 adds follower 2 to the ISR; the follower, at LEO 1
    before, reached LEO 2 in the same millisecond."""
    return [
        {"t": 1000, "node": 1, "kind": "become_leader", "tp": "t-0", "leader_epoch": 1, "partition_epoch": 1,
         "isr": [1], "leo": 0, "hw": 0},
        {"t": 1000, "node": 2, "kind": "become_follower", "tp": "t-0", "leader": 1, "leader_epoch": 1,
         "partition_epoch": 1},
        {"t": 1001, "node": 1, "kind": "append", "tp": "t-0", "base": 0, "count": 2, "epoch": 1,
         "epochs": [[1, 0]], "leo": 2, "role": "leader"},
        {"t": 1001, "node": 1, "kind": "hw", "tp": "t-0", "hw": 2, "leo": 2, "role": "leader"},
        {"t": 1001, "node": 2, "kind": "append", "tp": "t-0", "base": 0, "count": 1, "epoch": 1,
         "epochs": [[1, 0]], "leo": 1, "role": "follower"},
        {"node": 2, "kind": "append", "tp": "t-0", "base": 1, "count": 1, "epoch": 1, "epochs": [[1, 1]],
         "leo": 2, "role": "follower", **follower_stamp},
        {"node": 1, "kind": "isr", "tp": "t-0", "isr": [1], "maximal_isr": [1, 2], "state": "pending-expand",
         "partition_epoch": 1, "leader_epoch": 1, **leader_stamp},
    ]


def test_server_traces_merge_by_microseconds_within_a_millisecond(tmp_path):
    _write(tmp_path, _expansion({"t": 1002, "t_us": 1_002_100}, {"t": 1002, "t_us": 1_002_300}))
    order = [(e["node"], e["kind"]) for e in iter_trace_dir(tmp_path)]
    assert order.index((2, "append")) < order.index((1, "isr"))
    assert check_trace_dir(tmp_path)["valid"] is True


def test_an_expansion_before_the_follower_caught_up_is_still_reported(tmp_path):
    _write(tmp_path, _expansion({"t": 1002, "t_us": 1_002_900}, {"t": 1002, "t_us": 1_002_300}))
    summary = check_trace_dir(tmp_path)
    assert summary["valid"] is False
    assert "isr-expanded-early" in json.dumps(summary)


def test_simulator_traces_merge_by_sequence_within_a_millisecond(tmp_path):
    _write(tmp_path, _expansion({"t": 1002, "seq": 10}, {"t": 1002, "seq": 11}))
    assert check_trace_dir(tmp_path)["valid"] is True
