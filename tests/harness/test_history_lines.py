"""The recorder's direct JSONL line is byte for byte the line of the Op it
stands for, so a run recorded without keeping ops in memory reads back the
same history (checkers.history.jsonl)."""

from __future__ import annotations

import json

from checkers.history.jsonl import encode_line
from checkers.history.recorder import Recorder


def test_direct_line_equals_the_ops_own_serialisation():
    cases = [
        {"type": "invoke", "f": "send", "value": [["send", "t-0", 1]], "process": 3, "acks": "all", "idempotent": False},
        {"type": "ok", "f": "poll", "value": [["poll", {"t-0": [[0, 1]]}]], "process": 3, "final": True, "key": "t-0"},
        {"type": "info", "f": "send", "value": None, "process": 0, "error": ["timeout", "_MSG_TIMED_OUT"], "_private": 1},
        {"type": "info", "f": "start-partition", "value": {"cut": [["n1", "n2"]]}, "process": "nemesis"},
    ]
    for i, d in enumerate(cases):
        want = encode_line(Recorder._op(d, i, 1000 + i))
        assert Recorder._line(d, i, 1000 + i) == want
        assert "_private" not in json.loads(Recorder._line(d, i, 0))


def test_history_line_is_compact_json_that_the_json_module_reads_back():
    """The line format does not depend on the encoder: compact separators,
    one line, and json.loads gives back to_dict() (non-string keys as strings)."""
    from checkers.history.op import Op

    op = Op(type="ok", f="poll", value={"t-0": [[0, 1]], 3: "x"}, process=2, time=5, index=9, extra={"acks": "all"})
    line = encode_line(op)
    assert line.endswith("\n") and line.count("\n") == 1
    assert ", " not in line and '": ' not in line
    assert json.loads(line) == {**op.to_dict(), "value": {"t-0": [[0, 1]], "3": "x"}}


def test_no_operation_is_lost_over_a_value_json_cannot_spell():
    """A big integer, a set and a NaN still give one readable line each (the
    recorder's drain thread must never die on an operation)."""
    from checkers.history.jsonl import encode_fields

    big = encode_fields({"index": 0, "type": "ok", "f": "send", "value": 2**70})
    assert json.loads(big)["value"] == 2**70 and big.count("\n") == 1
    odd = encode_fields({"index": 1, "type": "ok", "f": "send", "value": {1, 2}})
    assert json.loads(odd)["value"] == "{1, 2}"
    assert json.loads(encode_fields({"index": 2, "type": "ok", "f": "send", "value": float("nan")}))["value"] is None


def test_recorded_file_reads_back_as_the_recorded_ops(tmp_path):
    from checkers.history.jsonl import read_jsonl

    rec = Recorder(tmp_path / "h.jsonl")
    rec.record({"type": "invoke", "f": "send", "value": [["send", "t-0", 7]], "process": 1, "acks": "1"})
    rec.record({"type": "ok", "f": "send", "value": [["send", "t-0", [0, 7]]], "process": 1, "acks": "1"})
    rec.close()
    ops = read_jsonl(tmp_path / "h.jsonl")
    assert [(o.index, o.type, o.extra.get("acks")) for o in ops] == [(0, "invoke", "1"), (1, "ok", "1")]
    assert ops[1].value == [["send", "t-0", [0, 7]]]


def test_an_appended_op_is_the_op_its_constructor_makes_every_field_set():
    """``Recorder.append`` sets an Op's fields one by one rather than through
    the dataclass's ``__init__``: each of them, so the Op is equal to the
    constructor's (a field added to Op and not set there fails here)."""
    import dataclasses

    from checkers.history.op import Op

    rec = Recorder(None, keep=True, background=False, epoch=0)
    got = [rec.append(3, "invoke", "send", [["send", "t-0", 1]], None, {"acks": "all"}),
           rec.append("nemesis", "info", "start-partition", {"cut": []}, ["e"], None)]
    for op in got:
        for fld in dataclasses.fields(Op):
            assert hasattr(op, fld.name), fld.name
    assert got == [Op("invoke", "send", [["send", "t-0", 1]], 3, got[0].time, 0, None, {"acks": "all"}),
                   Op("info", "start-partition", {"cut": []}, "nemesis", got[1].time, 1, ["e"], {})]
    assert rec.ops == got
