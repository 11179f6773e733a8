"""A run's ``history_sha256`` (what replay checks compare) is the SHA-256 of
its history.jsonl, byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.config import TestConfig
from harness.lifecycle.runner import run_seed


def test_history_digest_is_the_sha256_of_history_jsonl(tmp_path):
    opts = TestConfig(backend="sim", time_limit=5, nemesis=("all",), nemesis_interval=2, rate=50)
    res = run_seed(opts, 3, tmp_path)
    data = (Path(res["run_dir"]) / "history.jsonl").read_bytes()
    assert data  # a history was written
    assert res["stats"]["history_sha256"] == hashlib.sha256(data).hexdigest()
    # without a run directory the digest is the same: it does not depend on the file
    assert run_seed(opts, 3)["stats"]["history_sha256"] == res["stats"]["history_sha256"]


VALUES = [[["send", "t-0", [4, 7]]], {"t-0": [[0, 1]], 3: "x"}, 2**70, {1, 2}, float("nan"), "é", None]


def test_the_recorder_spells_each_operation_as_encode_line_does(tmp_path):
    """Recorder.append builds its lines itself (it runs compiled); they must
    be exactly encode_line's, fallbacks included, in the file and the digest,
    at the times the injected clock tells."""
    from checkers.history.jsonl import encode_line
    from checkers.history.recorder import Recorder
    from reference_impl.sim.clients import VirtualClock
    from reference_impl.sim.events import EventLoop

    loop = EventLoop()
    h = Recorder(tmp_path / "h.jsonl", keep=True, clock=VirtualClock(loop), epoch=0, background=False)
    for i, v in enumerate(VALUES):
        loop.now = i
        h.append(i % 3, "ok" if i % 2 else "info", "send", v, ["timeout", "x"] if i % 2 else None, {"acks": "all"})
    loop.now = 9
    h.append("nemesis", "info", "start-partition", None, extra={"node": [1, 2]})
    h.close()
    assert h.ops is not None and [op.time for op in h.ops] == [i * 1_000_000 for i in range(len(VALUES))] + [9_000_000]
    want = "".join(encode_line(op) for op in h.ops)
    assert (tmp_path / "h.jsonl").read_text() == want
    assert h.digest() == hashlib.sha256(want.encode()).hexdigest()


def test_both_ways_of_recording_write_the_same_bytes(tmp_path):
    """The one recorder, on its two paths: the interpreter's (dicts, a
    writer thread) and the simulator's (fields, inline) write the same file
    and digest for the same operations at the same times."""
    from checkers.history.recorder import Recorder
    from reference_impl.sim.clients import VirtualClock
    from reference_impl.sim.events import EventLoop

    loop = EventLoop()
    loop.now = 5
    files = {}
    for background in (True, False):
        path = tmp_path / f"h-{background}.jsonl"
        r = Recorder(path, keep=True, clock=VirtualClock(loop), epoch=0, background=background)
        for i, v in enumerate(VALUES):
            r.record({"process": i, "type": "ok", "f": "send", "value": v, "acks": "all", "_private": 1})
        r.record({"process": "nemesis", "type": "info", "f": "start-kill", "value": None, "error": ["x"]})
        r.close()
        files[background] = (path.read_bytes(), r.digest(), [op.to_dict() for op in r.ops or []])
    assert files[True][0] and files[True] == files[False]
    assert files[True][1] == hashlib.sha256(files[True][0]).hexdigest()


def test_a_seeds_digest_is_that_of_its_operations_as_encode_line_spells_them():
    from checkers.history.jsonl import encode_line
    from harness.lifecycle.runner import sim_run

    run = sim_run(TestConfig(backend="sim", time_limit=5, nemesis=("all",), nemesis_interval=2, rate=50), 3)
    res = run.run()
    want = "".join(encode_line(op) for op in run.history.ops)
    assert len(run.history.ops) > 100
    assert res["stats"]["history_sha256"] == hashlib.sha256(want.encode()).hexdigest()


def test_an_inline_recorder_writes_whole_blocks_and_flush_writes_the_rest(tmp_path):
    """Recording inline (the simulator), the file holds whole blocks of
    FLUSH_EVERY lines, the very bytes the digest was fed, until flush() or
    close() writes the rest; a text line written after stays in order."""
    from checkers.history.jsonl import encode_line
    from checkers.history.recorder import FLUSH_EVERY, Recorder
    from reference_impl.sim.clients import VirtualClock
    from reference_impl.sim.events import EventLoop

    loop = EventLoop()
    path = tmp_path / "h.jsonl"
    r = Recorder(path, keep=True, clock=VirtualClock(loop), epoch=0, background=False)
    for i in range(FLUSH_EVERY + 3):
        loop.now = i
        r.append(i % 4, "ok", "send", [["send", "k", [i, "é"]]], None, {"acks": "all"})
    assert r.ops is not None
    assert path.read_text() == "".join(encode_line(op) for op in r.ops[:FLUSH_EVERY])
    r.flush()
    assert path.read_text() == "".join(encode_line(op) for op in r.ops)
    r.append("nemesis", "info", "start-kill", None)
    r.close()
    want = "".join(encode_line(op) for op in r.ops)
    assert path.read_text() == want
    assert r.digest() == hashlib.sha256(want.encode()).hexdigest()


def test_every_line_of_a_simulated_history_is_its_operation_spelt_by_encode_line(tmp_path):
    """The simulator's lines are built from parts (an ok completion from its
    invocation's line, a poll's value from its records' JSON spelt once for
    the run): each must still be the line encode_line writes for the
    operation it reads back as, byte for byte."""
    from checkers.history.jsonl import encode_line
    from checkers.history.op import Op
    import orjson

    opts = TestConfig(backend="sim", time_limit=4, rate=200)
    res = run_seed(opts, 5, tmp_path)
    lines = (Path(res["run_dir"]) / "history.jsonl").read_bytes().splitlines(keepends=True)
    polls = [ln for ln in lines if b'"f":"poll"' in ln and b'"type":"ok"' in ln and b'[[0,' in ln]
    assert len(lines) > 500 and polls  # polls that read records were recorded
    for ln in lines:
        assert encode_line(Op.from_dict(orjson.loads(ln))).encode() == ln
