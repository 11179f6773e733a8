"""Reading a history in columns changes no verdict.

``kraftwerk check`` scans a JSONL queue history line by line into per-key
columns (:func:`checkers.queue.scan.scan_jsonl`) instead of holding an
operation object per line. These tests hold the scan to the object reading
(``read_jsonl`` then ``check_history`` on the list): the same results.json
(timings aside) for every anomaly type, the Knossos corpus, and a history
that uses every field the projection reads; the same one-line errors and
warnings for bad lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkers.check import check_history
from checkers.history import Op, read_edn, read_jsonl, write_jsonl
from checkers.history.op import HistoryError
from checkers.linearizable import check as lin_check
from checkers.queue import lines
from checkers.queue.columns import KeyColumns, events_from_payload
from checkers.queue.project import project
from checkers.queue.scan import MalformedOp, scan_jsonl
from checkers.queue.synth import HistoryBuilder, valid_history
from tests.checkers.test_queue_anomalies import CASES
from tests.shared_data import KNOSSOS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, params=[False, True], ids=["json", "spelt"])
def spelt(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here twice: the common lines parsed as JSON, and read by
    their spelling (:mod:`checkers.queue.spelling`, what the compiled line
    reader does)."""
    monkeypatch.setattr(lines, "SPELT", request.param)


def _untimed(res: dict[str, Any]) -> dict[str, Any]:
    """A results object without its wall-clock figures."""
    res = json.loads(json.dumps(res, default=str))
    res["stats"].pop("check_seconds", None)
    q = res.get("checkers", {}).get("queue")
    if q:
        q.pop("seconds", None)
        q.pop("cross_key_seconds", None)
        (q.get("graph") or {}).pop("seconds", None)
    return res


def _both(tmp_path: Path, ops: list[Op], **kw: Any) -> tuple[dict, dict]:
    path = tmp_path / "h.jsonl"
    write_jsonl(path, ops)
    w1: list[str] = []
    w2: list[str] = []
    by_objects = check_history(read_jsonl(path, w1), **kw)
    by_columns = check_history(scan_jsonl(path, w2), **kw)
    assert w1 == w2
    return _untimed(by_objects), _untimed(by_columns)


def every_field() -> list[Op]:
    """A history using every field the projection reads: assigns and
    subscribes, a rebalance-log, a multi-key transaction, info sends read
    and unread, unfinished invocations, acks 1 / 0 / -1, idempotence,
    string and float values, nemesis operations and final reads."""
    b = HistoryBuilder()
    b.assign(0, ["t-0", "t-1"])
    b.send(1, "t-0", 1, 0, acks="1", idempotent=True)
    b.send(1, "t-1", "s", 0, acks="0", idempotent=False)
    b.send(2, "t-0", 2, None, type="info")
    b.send(2, "t-1", 3, 1, type="info")
    b.txn(3, [["send", "t-0", [1, 4]], ["send", "t-2", [0, 5]], ["poll", {"t-1": [[0, "s"], [1, 3]]}]],
          type="info")
    b.invoke(4, "send", [["send", "t-3", 9]], acks="-1")
    b.ops.append(Op("info", "start-partition", None, "nemesis", b.t + 1, len(b.ops)))
    b.invoke(5, "poll", [["poll"]])
    b.ops.append(Op("ok", "poll", [["poll", {"t-0": [[0, 1], [1, 4]]}]], 5, b.t + 2, len(b.ops),
                    extra={"rebalance-log": [{"keys": ["t-0"]}]}))
    b.assign(6, ["t-0"], f="subscribe")
    b.poll(6, {"t-0": [[0, 1], [0, 1]], "t-2": [[0, 5]]}, final=True)
    b.invoke(7, "send", [["send", "t-4", 1.5]])
    b.invoke(7, "send", [["send", "t-4", 2]])
    return b.ops


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_columnar_reading_finds_every_anomaly_type_as_the_object_reading(tmp_path, name, build, expected):
    for bad in (True, False):
        by_objects, by_columns = _both(tmp_path, build(bad).ops)
        assert by_columns == by_objects
        if bad:
            assert expected <= set(by_columns["anomaly_types"])


def test_columnar_reading_of_every_field_gives_the_object_readings_results(tmp_path):
    for kw in ({}, {"test": {"sub_via": ["subscribe"], "keys": ["t-0", "t-9"]}},
               {"strict_acks1": True, "strict_duplicates": True}):
        by_objects, by_columns = _both(tmp_path, every_field(), **kw)
        assert by_columns == by_objects
    assert {"worst_realtime_lag", "consume_counts", "info_txn_causes"} <= set(by_columns["checkers"]["queue"])


def test_columnar_reading_of_a_lossy_valid_history_gives_the_same_results(tmp_path):
    ops = valid_history(3000, 6, 5, seed=4)
    # lose two acknowledged records from the final reads, duplicate one
    final = [op for op in ops if op.type == "ok" and op.extra.get("final")]
    prs = final[0].value[0][1]
    key = next(iter(prs))
    prs[key] = prs[key][:-2] + [prs[key][0]]
    by_objects, by_columns = _both(tmp_path, ops)
    assert by_columns == by_objects
    assert by_columns["valid"] is False


def test_key_columns_round_trip_through_their_payload():
    proj = project(every_field())
    for key in proj.keys:
        cols = proj.keys.columns[key]
        again = KeyColumns.load(cols.dump())
        assert again.events(proj.keys.committed) == cols.events(proj.keys.committed)
        assert events_from_payload(proj.keys.payload(key)) == (key, proj.keys[key])


def _knossos() -> list[Path]:
    files = sorted(KNOSSOS.glob("*/*/*.edn"))
    assert files
    return files


def test_columnar_reading_of_the_knossos_corpus_gives_the_object_readings_results(tmp_path):
    """Each corpus history as JSONL: the queue scan's results (operation
    counts, warnings, verdict) equal the object reading's, and the
    operations read back (orjson first) give the EDN file's own
    linearizability verdict."""
    model_of = {"cas-register": ("cas-register", {"initial": 0}),
                "multi-register": ("multi-register", {"initial": {"x": 0, "y": 0}}),
                "mutex": ("mutex", {})}
    for f in _knossos():
        ops = read_edn(f)
        by_objects, by_columns = _both(tmp_path, ops)
        assert by_columns == by_objects, f
        back = read_jsonl(tmp_path / "h.jsonl")
        assert [o.to_dict() for o in back] == [o.to_dict() for o in ops], f
        model, opts = model_of[f.parts[-3]]
        from checkers.linearizable import make_model

        mdl = make_model(model, **opts)
        assert lin_check(back, model=mdl, time_budget=10)["valid"] == \
            lin_check(ops, model=mdl, time_budget=10)["valid"], f


BAD_LINES = {
    "not json": ('{"type":"ok","f":"send","process":0}\n{"type": ok}\n{"type":"ok","f":"x"}\n',
                 "h.jsonl:2: not valid JSON (Expecting value)"),
    "not an object": ('{"type":"ok","f":"send","process":0}\n[1, 2]\n', "h.jsonl:2: expected a JSON object"),
    "no type": ('{"f":"send","process":0}\n', "h.jsonl:1: operation needs 'type' and 'f'"),
    "bad type": ('{"type":"done","f":"send"}\n', "h.jsonl:1: type 'done' is not one of invoke/ok/fail/info"),
    "too deep": ('{"type":"ok","f":"send","value":' + "[" * 100_000 + "]" * 100_000 + "}\n",
                 "h.jsonl:1: nested too deeply"),
    "huge int": ('{"type":"ok","f":"send","value":' + "9" * 5000 + "}\n",
                 "h.jsonl:1: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
    "list process": ('{"type":"invoke","f":"send","process":[1],"value":[["send","t-0",1]]}\n',
                     "h.jsonl:1: process [1] is not a number or a string"),
    "object process": ('{"index":0,"time":1,"type":"invoke","f":"poll","process":{"a":1},"value":[["poll"]]}\n',
                       "h.jsonl:1: process {'a': 1} is not a number or a string"),
}


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_bad_lines_get_the_same_one_line_error_from_the_scan(tmp_path, name):
    text, want = BAD_LINES[name]
    path = tmp_path / "h.jsonl"
    path.write_text(text)
    errors = []
    for read in (read_jsonl, scan_jsonl):
        with pytest.raises(HistoryError) as e:
            read(path)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    assert errors[0].endswith(want), errors[0]
    assert "\n" not in errors[0]


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_a_bad_line_in_a_range_read_apart_is_the_same_error_naming_its_line_in_the_file(tmp_path, name):
    """Read in two ranges, the second by another process, a bad line in
    the second is named by its line in the whole file."""
    text, _want = BAD_LINES[name]
    path = tmp_path / "h.jsonl"
    write_jsonl(path, valid_history(60, 2, 2, seed=1))
    with open(path, "a") as f:
        f.write(text)
    errors = []
    for read in (read_jsonl, lambda p: _scan(p, [], readers=2, cuts=[0, _line_starts(p)[30]])):
        with pytest.raises(HistoryError) as e:
            read(path)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_what_orjson_refuses_but_json_reads_is_read_the_same(tmp_path):
    """Integers past 64 bits and lone surrogates are valid for the standard
    library's reader; the scan reads them as it does."""
    path = tmp_path / "h.jsonl"
    lines = ['{"type":"invoke","f":"send","process":0,"time":1,"value":[["send","t-0",%s]]}' % v
             for v in (str(2 ** 70), '"\\ud800"')]
    path.write_text("\n".join(lines) + "\n\n")
    assert [o.value[0][2] for o in read_jsonl(path)] == [2 ** 70, "\ud800"]
    by_objects = check_history(read_jsonl(path))
    by_columns = check_history(scan_jsonl(path))
    assert _untimed(by_columns) == _untimed(by_objects)


def test_torn_last_line_is_skipped_with_the_same_warning(tmp_path):
    path = tmp_path / "h.jsonl"
    write_jsonl(path, valid_history(200, 2, 2, seed=1))
    with open(path, "a") as f:
        f.write('{"type":"ok","f":"se')
    w1: list[str] = []
    w2: list[str] = []
    ops = read_jsonl(path, w1)
    scan = scan_jsonl(path, w2)
    assert w1 == w2 and len(w1) == 1 and "truncated last line ignored" in w1[0]
    assert scan.stats.n == len(ops)
    w3: list[str] = []
    apart = _scan(path, w3, readers=2, cuts=[0, _line_starts(path)[100]])
    assert w3 == w1 and apart.stats.n == len(ops)


def test_malformed_value_is_the_same_one_line_error_from_the_cli(tmp_path):
    """A line that parses but whose value the queue checker cannot use:
    ``kraftwerk check`` words it as checking the list of operations did."""
    path = tmp_path / "h.jsonl"
    path.write_text('{"type":"invoke","f":"send","process":0,"time":1,"value":[["send","t-0",1]]}\n'
                    '{"type":"ok","f":"poll","process":0,"time":2,"value":[["poll",{"t-0":[5]}]]}\n')
    with pytest.raises(MalformedOp) as scanned:
        scan_jsonl(path)
    with pytest.raises(HistoryError) as listed:
        check_history(read_jsonl(path))
    assert str(scanned.value) == str(listed.value)
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "check", str(path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [f"kraftwerk: bad history for model queue: {listed.value}"] or \
        r.stderr.strip().endswith(f"bad history for model queue: {listed.value}")


def test_fast_lines_mixed_with_unusual_ones_read_as_the_object_reading(tmp_path):
    """The scan takes the common lines (send and poll invocations, their
    ``ok`` completions with integer offsets and values) straight from the
    parsed dict; every other line goes through an operation. Interleaved —
    a subscribed consumer, idempotence and acks spellings on invocations,
    negative and string values, a process invoking twice, CRLF and bare CR
    line ends, a final read naming its key — both readings agree."""
    ops = valid_history(2000, 4, 4, seed=7)
    b = HistoryBuilder()
    b.t = ops[-1].time + 10
    b.assign(0, ["t-0"], f="subscribe")
    b.poll(0, {"t-0": [[0, 1], [1, 2]]})
    b.send(1, "t-0", -5, 7)
    b.send(1, "t-1", "x", 8, acks="-1")
    b.send(2, "t-1", 9, 9, idempotent=True)
    b.invoke(3, "send", [["send", "t-2", 10]], acks="1")
    b.invoke(3, "send", [["send", "t-2", 11]], acks="1")
    b.complete(3, "ok", [["send", "t-2", [0, 11]]])
    b.invoke(4, "poll", [["poll"]], final=True, key="t-3")
    b.complete(4, "ok", [["poll", {"t-3": []}]])
    tail = [Op(o.type, o.f, o.value, o.process, o.time, len(ops) + i, o.error, o.extra)
            for i, o in enumerate(b.ops)]
    path = tmp_path / "h.jsonl"
    write_jsonl(path, ops + tail)
    raw = path.read_bytes().split(b"\n")
    raw[3] += b"\r"  # a CRLF line end
    path.write_bytes(b"\n".join(raw))
    for kw in ({}, {"test": {"sub_via": ["subscribe"]}}):
        w1: list[str] = []
        w2: list[str] = []
        by_objects = _untimed(check_history(read_jsonl(path, w1), **kw))
        by_columns = _untimed(check_history(scan_jsonl(path, w2), **kw))
        assert by_columns == by_objects and w1 == w2
    assert by_columns["checkers"]["queue"]["consume_counts"]["distribution"]
    assert by_columns["stats"]["ops"] == len(ops) + len(tail)
    # a bare CR ends a text line: the same error, at the same line
    raw[5] = raw[5].replace(b",", b",\r", 1)
    path.write_bytes(b"\n".join(raw))
    errors = []
    for read in (read_jsonl, scan_jsonl):
        with pytest.raises(HistoryError) as e:
            read(path)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "h.jsonl:6:" in errors[0]


def test_consume_transform_produce_reads_the_same_through_fast_lines(tmp_path):
    """A final read of the input topic that carries nothing but ``final``
    is a fast line; the processing fold still learns its records, and an
    output read (its invocation says ``output``) is left to that fold."""
    from tests.checkers.test_processing import H

    h = H().send(0, "t0-0", 0, 10).send(0, "t0-0", 1, 11).send(0, "t0-0", 2, 12)
    h.ctp(1, "ok", {"t0-0": [[0, 10], [1, 11]]}, [("out-0", 0, 10), ("out-0", 1, 11)])
    h._add("invoke", "poll", [["poll"]], 9, final=True)
    h._add("ok", "poll", [["poll", {"t0-0": [[0, 10], [1, 11], [2, 12]]}]], 9, final=True)
    h._add("invoke", "poll", [["poll"]], 8, final=True, output=True)
    h._add("ok", "poll", [["poll", {"out-0": [[0, 10]]}]], 8, final=True)
    by_objects, by_columns = _both(tmp_path, h.ops)
    assert by_columns == by_objects
    assert by_columns["checkers"]["processing"]["rounds"] == 1


def test_only_cr_and_lf_end_lines_as_in_text_mode(tmp_path):
    """A CRLF line whose string holds U+2028 (valid, unescaped, in JSON)
    is one line for the text-mode reading, and so for the scan."""
    path = tmp_path / "h.jsonl"
    lines = ['{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send","t-0","a\u2028b"]]}',
             '{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send","t-0",[0,"a\u2028b"]]]}']
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    by_objects = check_history(read_jsonl(path))
    by_columns = check_history(scan_jsonl(path))
    assert _untimed(by_columns) == _untimed(by_objects)
    assert by_columns["stats"]["ops"] == 2


def _spliced_history() -> list[Op]:
    """A valid history with unusual operations spliced into its middle, so
    that batches are flushed while fast invocations are still open: info
    and failed sends and polls, acks=1, acks=0 and -1 sends, a send whose
    completion says no acks, assigns and a subscribe followed by fast
    polls, an orphan completion, a process invoking twice, a nemesis, a
    string value, a negative offset, an idempotent send, an empty read;
    its first completion is a poll's (dicts keep their first-seen order)."""
    ops = valid_history(3000, 5, 6, seed=11)
    b = HistoryBuilder()
    groups: list[list[Op]] = []

    def group(build: Any) -> None:
        n = len(b.ops)
        build()
        groups.append(b.ops[n:])

    group(lambda: b.send(100, "t-1", 900, type="info"))
    group(lambda: b.send(100, "t-2", 901, 5, acks="1"))
    group(lambda: b.send(101, "t-3", 902, 7, acks="0"))
    group(lambda: b.send(101, "t-0", 903, 9, acks="-1"))
    group(lambda: (b.invoke(102, "send", [["send", "t-4", 904]]), b.complete(102, "ok", [["send", "t-4", [3, 904]]])))
    group(lambda: b.poll(103, {"t-0": [[0, 1]]}, type="fail"))
    group(lambda: b.poll(103, {}, type="info"))
    group(lambda: b.assign(104, ["t-0", "t-1"]))
    group(lambda: b.poll(104, {"t-0": [[0, 5], [1, 6]], "t-1": []}))
    group(lambda: b.assign(105, ["t-2"], f="subscribe"))
    group(lambda: b.poll(105, {"t-2": [[0, 7]], "t-3": [[0, 8], [2, 9]]}))
    group(lambda: b.poll(105, {"t-2": [[0, 7]]}))
    group(lambda: b._add("ok", "send", [["send", "t-1", [4, 905]]], 106))
    group(lambda: b._add("invoke", "send", [["send", "t-1", 906]], 0))
    group(lambda: (b._add("info", "kill", None, "nemesis"), b._add("info", "kill", "done", "nemesis")))
    group(lambda: b.send(107, "t-3", "s", 11))
    group(lambda: b.send(107, "t-3", 908, -2))
    group(lambda: b.send(108, "t-4", 909, 12, idempotent=True))
    out = list(ops)
    step = len(ops) // (len(groups) + 1)
    for n, g in enumerate(reversed(groups)):
        at = step * (len(groups) - n)
        out[at:at] = [Op(o.type, o.f, o.value, o.process, out[at].time, o.index, o.error, o.extra) for o in g]
    b.poll(109, {})
    out[0:0] = [Op(o.type, o.f, o.value, o.process, 0, o.index, o.error, o.extra) for o in b.ops[-2:]]
    return [Op(o.type, o.f, o.value, o.process, o.time, i, o.error, o.extra) for i, o in enumerate(out)]


def _scan(path: Path, warnings: list[str] | None, batch: int = 1 << 16, small: int = 256, readers: int = 1,
          cuts: list[int] | None = None) -> Any:
    from checkers.queue.scan import QueueScan, _Feeder, _read_ranges

    scan = QueueScan()
    _read_ranges(_Feeder(scan, path, warnings, batch, small), readers, cuts)
    return scan.finish()


def _folds(scan: Any) -> dict[str, Any]:
    """What every fold of a scan holds, key order included."""
    keys = scan.projection.keys
    table = scan.projection.ops
    lag = scan.lag
    return {
        "warnings": scan.projection.warnings,
        "counts": scan.projection.counts,
        "keys": [(k, keys[k]) for k in keys],
        "table": {col: list(getattr(table, col)) for col in ("index", "process", "type", "invoke_time",
                                                            "complete_time")},
        "expired": [(k, list(c)) for k, c in lag.expired.items()],
        "lag": (lag.positions, lag.worst),
        "consume": scan.consume.counts,
        "stats": (scan.stats.result(), scan.clients.result(scan.stats)),
    }


def _assert_same_folds(scan: Any, reference: Any) -> None:
    """Every fold of ``scan`` holds what ``reference``'s does (or the
    reference's :func:`_folds`), key order included."""
    got, want = _folds(scan), reference if isinstance(reference, dict) else _folds(reference)
    for part in want:
        assert got[part] == want[part], part


@pytest.mark.parametrize("batch,small,readers", [(1 << 16, 256, 1), (5, 0, 1), (64, 1 << 30, 1), (997, 0, 1),
                                                 (1 << 16, 256, 2), (5, 0, 4)])
def test_batched_scan_gives_the_object_readings_results_byte_for_byte(tmp_path, batch, small, readers):
    """The scan reads the common lines into batches of flat columns and
    hands them to the folds a batch at a time, grouping each key's events
    with numpy (or one by one for a small batch); whatever the batch size,
    and whether one process reads the lines or several read a range each,
    on a history whose unusual lines fall mid-batch, the results are the
    object reading's, key order included, and so are each key's events
    and the op table."""
    from checkers.queue.scan import QueueScan

    path = tmp_path / "h.jsonl"
    write_jsonl(path, _spliced_history())
    w1: list[str] = []
    w2: list[str] = []
    reference = QueueScan.of(read_jsonl(path, w1))
    scan = _scan(path, w2, batch, small, readers)
    assert w1 == w2
    _assert_same_folds(scan, reference)
    assert any("invoked while" in w for w in scan.projection.warnings)  # the process that invoked twice
    assert reference.lag.worst["lag"] > 0 and reference.consume.counts
    for kw in ({}, {"test": {"sub_via": ["subscribe"]}}):
        by_objects = json.dumps(_untimed(check_history(read_jsonl(path), **kw)))
        by_columns = json.dumps(_untimed(check_history(scan, **kw)))
        assert by_columns == by_objects
        scan = _scan(path, None, batch, small, readers)


def _line_starts(path: Path) -> list[int]:
    starts = [0]
    with open(path, "rb") as f:
        for raw in f:
            starts.append(starts[-1] + len(raw))
    return starts[:-1]


def test_a_range_read_apart_folds_as_if_read_after_the_ranges_before_it(tmp_path):
    """Lines read in ranges by separate processes fold to the same state
    as one reading, wherever the ranges start: next to each unusual line,
    including where a process with an invocation open invokes again
    right after the cut (that range is read again with the true state:
    its reading from an empty start is refused)."""
    from checkers.queue.lines import LineReader, usable
    from checkers.queue.scan import QueueScan

    ops = _spliced_history()
    path = tmp_path / "h.jsonl"
    write_jsonl(path, ops)
    reference = _folds(QueueScan.of(read_jsonl(path, [])))
    starts = _line_starts(path)
    usual = {("invoke", "send"), ("invoke", "poll"), ("ok", "send"), ("ok", "poll")}
    odd = [i for i, o in enumerate(ops) if (o.type, o.f) not in usual or o.process not in range(6)]
    first = next(i for i, o in enumerate(ops) if o.process == 0 and o.value == [["send", "t-1", 906]])
    again = next(i for i in range(first + 1, len(ops)) if ops[i].process == 0)
    assert ops[again].type == "invoke"  # process 0 invokes while its send of 906 is open
    refused = 0
    for i in sorted({i + 1 for i in [*odd, first, again] if 0 < i + 1 < len(starts)}):
        cuts = [0, starts[i - 1], starts[i]]  # ranges starting at the unusual line i - 1 and right after it
        _assert_same_folds(_scan(path, [], readers=len(cuts), cuts=cuts), reference)
        alone = LineReader(path, lambda _x: None, starts[i], None).run()
        before = QueueScan()
        from checkers.queue.scan import _Feeder
        feeder = _Feeder(before, path, [])
        LineReader(path, feeder.item, 0, starts[i], open_=feeder.open).run()
        refused += not usable(alone.first_fast, feeder.open, set(before.projector.pending))
    assert refused >= 1  # the cut before the second invocation


@pytest.mark.parametrize("records", [0, 1, 7])
def test_a_range_reader_that_dies_part_way_is_read_on_from_its_last_item(tmp_path, monkeypatch, records):
    """The folds take a later range's items as its reader writes them; a
    reader that dies after some of them (or before any) leaves this process
    to read on from after the last one it folded: the same folds."""
    import checkers.queue.scan as scan_mod

    path = tmp_path / "h.jsonl"
    write_jsonl(path, _spliced_history())
    reference = _folds(scan_mod.QueueScan.of(read_jsonl(path, [])))
    real = scan_mod._read_range

    def dying(out: Any, *args: Any) -> None:
        class Out:
            written = 0

            def write(self, b: bytes) -> None:
                out.write(b)

            def flush(self) -> None:
                out.flush()
                Out.written += 1
                if Out.written > records:
                    os._exit(1)

        real(Out(), *args)

    monkeypatch.setattr(scan_mod, "_read_range", dying)
    _assert_same_folds(_scan(path, [], batch=5, readers=2), reference)
