"""The common lines read by their spelling (checkers/queue/spelling.py)
say what their JSON says, and anything spelt otherwise is left to the JSON
parser."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from checkers.history.jsonl import encode_line
from checkers.queue.spelling import ABSENT, INVOKE_POLL, INVOKE_SEND, OK_POLL, OK_SEND, parse
from checkers.queue.synth import valid_history


def _as_json(line: bytes) -> tuple[Any, ...]:
    """What :func:`parse` should give, from the JSON of ``line``."""
    d = orjson.loads(line)
    (mop,) = d["value"]
    kind = {("invoke", "send"): INVOKE_SEND, ("invoke", "poll"): INVOKE_POLL,
            ("ok", "send"): OK_SEND, ("ok", "poll"): OK_POLL}[(d["type"], d["f"])]
    key, a, b, reads = "", 0, 0, []
    if kind == INVOKE_SEND:
        key, a = mop[1], mop[2]
    elif kind == OK_SEND:
        key, (a, b) = mop[1], mop[2]
    elif kind == OK_POLL:
        reads = [(k, [o for o, _ in prs], [v for _, v in prs]) for k, prs in mop[1].items()]
    return kind, d["index"], d["time"], d["process"], key, a, b, d.get("acks", ABSENT), reads


def _fields(line: bytes) -> tuple[Any, ...] | None:
    x = parse(line)
    return None if x is None else (x.kind, x.ix, x.tm, x.proc, x.key, x.a, x.b, x.acks, x.reads)


def test_every_common_line_of_a_history_reads_as_its_json() -> None:
    lines = [encode_line(op).encode() for op in valid_history(3000, 5, 6, seed=2)]
    common = [line for line in lines if b'"final"' not in line]
    assert common and all(_fields(line) == _as_json(line) for line in common)
    last = common[-1].rstrip(b"\n")  # a last line without its newline
    assert _fields(last) == _as_json(last)


@pytest.mark.parametrize("line", [
    b'{"index":1,"time":5,"process":2,"type":"ok","f":"poll","value":[["poll",{}]]}\n',
    b'{"index":1,"time":5,"process":2,"type":"ok","f":"poll","value":[["poll",{"a":[],"b":[[0,1],[1,2]]}]]}',
    b'{"index":0,"time":0,"process":0,"type":"invoke","f":"send","value":[["send","t-1",0]],"acks":"-1"}\n',
    b'{"index":999999999999999999,"time":1,"process":3,"type":"ok","f":"send","value":[["send","k",[4,5]]]}\n',
    b'{"index":1,"time":5,"process":2,"type":"invoke","f":"poll","value":[["poll"]]}\n',
])
def test_unusual_but_common_spellings_read_as_their_json(line: bytes) -> None:
    assert _fields(line) == _as_json(line)


BASE = b'{"index":1,"time":5,"process":2,"type":"ok","f":"send","value":[["send","t-1",[3,4]]],"acks":"all"}\n'
POLL = b'{"index":1,"time":5,"process":2,"type":"ok","f":"poll","value":[["poll",{"t-1":[[3,4]]}]]}\n'


@pytest.mark.parametrize("line", [
    BASE.replace(b'"index":1', b'"index": 1'),                  # whitespace
    BASE.replace(b'"time":5', b'"time":05'),                    # a leading zero: not JSON
    BASE.replace(b'[3,4]', b'[-3,4]'),                          # negative
    BASE.replace(b'[3,4]', b'[3.0,4]'),                         # a float
    BASE.replace(b'[3,4]', b'[1234567890123456789,4]'),         # 19 digits
    BASE.replace(b't-1', b't\\u002d1'),                         # an escape
    BASE.replace(b't-1', 't\u00e9'.encode()),                   # not ASCII
    BASE.replace(b't-1', b't\x01'),                             # a control character
    BASE.replace(b'"all"', b'"weird"'),
    BASE.replace(b'"all"', b'null'),
    BASE.replace(b'"all"}', b'"all","final":true}'),
    BASE.replace(b'}\n', b'}\r\n'),
    BASE.replace(b'}\n', b'} \n'),
    BASE.replace(b'"type":"ok"', b'"type":"info"'),
    BASE.replace(b'"index":1,', b'') ,                          # a field missing
    POLL.replace(b'{"t-1":[[3,4]]}', b'{"t-1":[[3,4]],"t-1":[[5,6]]}'),  # a repeated key
    POLL.replace(b'[[3,4]]', b'[[3,4,5]]'),
    POLL.replace(b'[[3,4]]', b'[[3,4],]'),
    POLL[:-3],                                                  # torn
])
def test_anything_spelt_otherwise_is_left_to_the_json_parser(line: bytes) -> None:
    assert parse(line) is None
