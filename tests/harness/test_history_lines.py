"""The recorder's direct JSONL line is byte for byte the line of the Op it
stands for, so a run recorded without keeping ops in memory reads back the
same history (checkers.history.jsonl)."""

from __future__ import annotations

import json

from harness.history import _ENC, Recorder


def test_direct_line_equals_the_ops_own_serialisation():
    cases = [
        {"type": "invoke", "f": "send", "value": [["send", "t-0", 1]], "process": 3, "acks": "all", "idempotent": False},
        {"type": "ok", "f": "poll", "value": [["poll", {"t-0": [[0, 1]]}]], "process": 3, "final": True, "key": "t-0"},
        {"type": "info", "f": "send", "value": None, "process": 0, "error": ["timeout", "_MSG_TIMED_OUT"], "_private": 1},
        {"type": "info", "f": "start-partition", "value": {"cut": [["n1", "n2"]]}, "process": "nemesis"},
    ]
    for i, d in enumerate(cases):
        want = _ENC.encode(Recorder._op(d, i, 1000 + i).to_dict()) + "\n"
        assert Recorder._line(d, i, 1000 + i) == want
        assert "_private" not in json.loads(Recorder._line(d, i, 0))


def test_recorded_file_reads_back_as_the_recorded_ops(tmp_path):
    from checkers.history.jsonl import read_jsonl

    rec = Recorder(tmp_path / "h.jsonl")
    rec.record({"type": "invoke", "f": "send", "value": [["send", "t-0", 7]], "process": 1, "acks": "1"})
    rec.record({"type": "ok", "f": "send", "value": [["send", "t-0", [0, 7]]], "process": 1, "acks": "1"})
    rec.close()
    ops = read_jsonl(tmp_path / "h.jsonl")
    assert [(o.index, o.type, o.extra.get("acks")) for o in ops] == [(0, "invoke", "1"), (1, "ok", "1")]
    assert ops[1].value == [["send", "t-0", [0, 7]]]
