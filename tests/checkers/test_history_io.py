"""Histories in and out: JSONL and EDN both ways, Jepsen's pairing of
invocations with completions, and bad input named by file:line."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import edn_format
import pytest

from checkers.history import (HistoryError, Op, complete_history, pair, read_edn, read_jsonl,
                              write_edn, write_jsonl)
from checkers.history.edn import loads
from checkers.queue.synth import HistoryBuilder, valid_history
from tests.shared_data import KNOSSOS as KNOSSOS_DIR

KNOSSOS = sorted(glob.glob(str(KNOSSOS_DIR / "**" / "*.edn"), recursive=True))


def _plain(v):
    """edn_format's value mapped the way our reader maps EDN."""
    if isinstance(v, (edn_format.Keyword, edn_format.Symbol)):
        return v.name
    if isinstance(v, (frozenset, set)):
        return sorted((_plain(x) for x in v), key=repr)
    if isinstance(v, (list, tuple, edn_format.ImmutableList)):
        return [_plain(x) for x in v]
    if isinstance(v, (dict, edn_format.ImmutableDict)):
        return {_plain(k): _plain(x) for k, x in v.items()}
    return v


def _sets_sorted(v):
    if isinstance(v, list):
        return [_sets_sorted(x) for x in v]
    if isinstance(v, dict):
        return {k: _sets_sorted(x) for k, x in v.items()}
    return v


def test_every_knossos_file_parses_like_edn_format() -> None:
    assert len(KNOSSOS) > 100
    for path in KNOSSOS:
        text = Path(path).read_text()
        assert loads(text, path) == _sets_sorted(_plain(list(edn_format.loads_all(text)))), path
        ops = read_edn(path)
        assert ops and all(op.type in ("invoke", "ok", "fail", "info") for op in ops)
        if ":index" not in text:  # positions fill in missing indices
            assert [op.index for op in ops] == list(range(len(ops)))


def test_knossos_files_round_trip_through_our_edn_writer(tmp_path: Path) -> None:
    for path in KNOSSOS:
        ops = read_edn(path)
        write_edn(tmp_path / "h.edn", ops)
        again = read_edn(tmp_path / "h.edn")
        assert [o.to_dict() for o in again] == [o.to_dict() for o in ops], path
    # and Jepsen's tooling (edn_format standing in) reads what we wrote
    for path in KNOSSOS[::12]:
        write_edn(tmp_path / "h.edn", read_edn(path))
        assert len(edn_format.loads((tmp_path / "h.edn").read_text())) == len(read_edn(path))


def test_queue_history_round_trips_edn_and_jsonl(tmp_path: Path) -> None:
    ops = valid_history(300, 3, 4, seed=7)
    write_edn(tmp_path / "h.edn", ops)
    write_jsonl(tmp_path / "h.jsonl", read_edn(tmp_path / "h.edn"))
    back = read_jsonl(tmp_path / "h.jsonl")
    assert [o.to_dict() for o in back] == [o.to_dict() for o in ops]


def test_edn_keywords_nil_vectors_maps_map_to_python() -> None:
    (v,) = loads('{:type :ok, :f :txn, :value [[:r :x nil] [:w :y 3]], :error "a \\"b\\""} ; c')
    assert v == {"type": "ok", "f": "txn", "value": [["r", "x", None], ["w", "y", 3]], "error": 'a "b"'}
    assert loads("#{:a} #_ :gone #inst \"2020\" \\c -1.5 2N") == [["a"], "2020", "c", -1.5, 2]


def test_edn_writer_keeps_non_keyword_strings_as_strings(tmp_path: Path) -> None:
    op = Op("info", "send", [["send", "t-0", 1]], 3, 5, 0, error="Broker: Not enough replicas",
            extra={"acks": "1"})
    write_edn(tmp_path / "h.edn", [op])
    text = (tmp_path / "h.edn").read_text()
    assert ':f :send' in text and '"Broker: Not enough replicas"' in text and ':acks "1"' in text
    assert read_edn(tmp_path / "h.edn")[0].to_dict() == op.to_dict()


@pytest.mark.parametrize("text", [
    '{:process 6, :type :invoke, :f :append, :key "0", :value "x 6 0 y"}\n'
    '{:process 6, :type :ok, :f :append, :key "0", :value "x 6 0 y"}\n',
    '; a comment\n[{:type :invoke, :f :read, :value nil, :process -3, :time 7}\n'
    ' {:type :ok, :f :read, :value 12, :process -3, :time 9, :index 4, :acks "all"}]\n',
    '[{:type :ok, :f :read, :value "a, :b c"}]',              # a string that looks like fields
    '[{:type :ok, :f :read, :value "a \\"q\\" b"}]',      # escapes
    '[{:type :ok, :f :read, :value [0 1]}]',                   # a vector value
    '[{:type :ok, :f :read, :index nil}\n {:type :ok, :f :read, :time 2N}]',
    '[{:type :ok, :f :read, :value true, :error false}] ; trailing',
    '[{:type :ok, :f :read, :x 1, :x 2, :type :info}]',        # repeated keys: last wins
    '{:type :ok, :f :read} {:type :ok, :f :write}',            # two maps on a line
    '{:type :ok, :f :read, :value ' + '9' * 5000 + '}',        # past int()'s digit limit
    '[{:type :ok, :f :read}]\n[{:type :ok, :f :write}]',       # two vectors
])
def test_edn_flat_lines_read_as_the_full_reader_reads_them(tmp_path: Path, text: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The line-by-line reader of the common layout gives the full
    tokenizer's ops (or error), or leaves the file to it."""
    from checkers.history import edn

    p = tmp_path / "h.edn"
    p.write_text(text)

    def outcome() -> object:
        try:
            return read_edn(p)
        except HistoryError as e:
            return str(e)

    with_flat = outcome()
    monkeypatch.setattr(edn, "_read_flat", lambda text: None)
    assert with_flat == outcome()


def test_edn_flat_reader_takes_porcupine_and_jepsen_lines() -> None:
    from checkers.history import edn

    assert edn._read_flat('{:process 6, :type :invoke, :f :get, :key "9", :value nil}\n') is not None
    assert edn._read_flat('[{:type :invoke, :f :read, :value nil, :process 0, :time 12, :index 0}\n'
                          ' {:type :ok, :f :read, :value 3, :process 0, :time 15, :index 1}]\n') is not None
    assert edn._read_flat('[{:type :ok, :f :read, :value [0 1]}]') is None


def _fifo(p: Path) -> None:
    os.mkfifo(p)


@pytest.mark.parametrize("make,words", [
    (_fifo, "a FIFO, not a history file"),
    (lambda p: p.symlink_to("/dev/zero"), "a device, not a history file"),
    (lambda p: p.mkdir(), "a directory, not a history file"),
])
def test_an_edn_history_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, make: object,
                                                                   words: str) -> None:
    """read_edn reads the file with plain os.read calls: a FIFO without a
    writer, a device that never ends or a directory is refused before any
    read, in one line."""
    p = tmp_path / "h.edn"
    make(p)  # type: ignore[operator]
    with pytest.raises(HistoryError, match=f"h.edn: {words}$"):
        read_edn(p)


@pytest.mark.parametrize("text,line", [
    ('[{:type :ok, :f :read}\n {:type :ok :f}\n]', 2),         # odd map
    ('[{:type :ok, :f :read}\n {:type :ok, :f :read]\n', 2),    # wrong closer
    ('[{:type :ok, :f :read}\n {:type :weird, :f :read}]', 2),  # bad op type
    ('[{:type :ok, :f :read}\n\n {:type :ok, :f :read}', 1),    # truncated: vector never closed
    ('[{:type :ok, :f :read}\n 1]', 2),                          # not a map
])
def test_malformed_edn_names_file_and_line(tmp_path: Path, text: str, line: int) -> None:
    p = tmp_path / "bad.edn"
    p.write_text(text)
    with pytest.raises(HistoryError, match=rf"bad\.edn:{line}:"):
        read_edn(p)


def test_jsonl_truncated_last_line_is_tolerated_and_reported(tmp_path: Path) -> None:
    ops = valid_history(40, 2, 2, seed=1)
    write_jsonl(tmp_path / "h.jsonl", ops)
    text = (tmp_path / "h.jsonl").read_text()
    (tmp_path / "h.jsonl").write_text(text[: len(text) - 25])  # crash mid-line
    warnings: list[str] = []
    back = read_jsonl(tmp_path / "h.jsonl", warnings)
    assert len(back) == len(ops) - 1
    assert len(warnings) == 1 and "truncated" in warnings[0] and f"h.jsonl:{len(ops)}" in warnings[0]


def test_jsonl_malformed_middle_line_names_file_and_line(tmp_path: Path) -> None:
    ops = valid_history(40, 2, 2, seed=1)
    write_jsonl(tmp_path / "h.jsonl", ops)
    lines = (tmp_path / "h.jsonl").read_text().splitlines(keepends=True)
    lines[4] = lines[4][:10] + "\n"
    (tmp_path / "h.jsonl").write_text("".join(lines))
    with pytest.raises(HistoryError, match=r"h\.jsonl:5:"):
        read_jsonl(tmp_path / "h.jsonl")


def test_pairing_matches_completion_to_its_process_invocation() -> None:
    b = HistoryBuilder()
    b.invoke(0, "send", [["send", "t-0", 1]])
    b.invoke(1, "send", [["send", "t-0", 2]])
    b.complete(1, "ok", [["send", "t-0", [0, 2]]])
    b.complete(0, "fail", [["send", "t-0", 1]])
    pairs = pair(b.ops)
    assert [(p.invoke.index, p.complete.index) for p in pairs] == [(1, 2), (0, 3)]
    assert [p.complete.type for p in pairs] == ["ok", "fail"]


def test_invocation_without_completion_is_info_as_in_jepsen() -> None:
    b = HistoryBuilder()
    b.invoke(0, "send", [["send", "t-0", 1]])
    b.send(1, "t-0", 2, 0)
    pairs = pair(b.ops)
    crashed = [p for p in pairs if p.synthesized]
    assert len(crashed) == 1
    assert crashed[0].complete.type == "info" and crashed[0].invoke.index == 0
    assert crashed[0].complete_time is None
    done = complete_history(b.ops)
    assert done[-1].type == "info" and done[-1].process == 0 and done[-1].value == [["send", "t-0", 1]]


def test_nemesis_ops_are_not_paired() -> None:
    ops = [Op("info", "start-partition", "majority", "nemesis", 1, 0),
           Op("invoke", "poll", [["poll"]], 0, 2, 1),
           Op("info", "stop-partition", None, "nemesis", 3, 2),
           Op("ok", "poll", [["poll", {}]], 0, 4, 3)]
    assert [(p.invoke.index, p.complete.index) for p in pair(ops)] == [(1, 3)]


def test_writer_flushes_every_line_by_default_and_every_n_lines_when_asked(tmp_path):
    """The harness's writer hands each line to the OS at once (a crashed
    recorder loses at most the line being written); a writer asked for
    ``flush_every=3`` (the simulator's, whose history a replay rebuilds)
    holds lines back until the third, and close() writes the rest."""
    from checkers.history.jsonl import JsonlWriter, encode_line

    ops = [Op(type="invoke", f="send", value=[["send", "k", i]], process=0, index=i) for i in range(4)]
    every = JsonlWriter(tmp_path / "a.jsonl")
    batched = JsonlWriter(tmp_path / "b.jsonl", flush_every=3)
    for i, op in enumerate(ops[:3]):
        every.write(op)
        batched.write(op)
        assert (tmp_path / "a.jsonl").read_text() == "".join(encode_line(o) for o in ops[: i + 1])
        assert (tmp_path / "b.jsonl").read_text() == ("" if i < 2 else "".join(encode_line(o) for o in ops[:3]))
    batched.write(ops[3])
    assert (tmp_path / "b.jsonl").read_text().count("\n") == 3
    batched.close()
    every.close()
    assert (tmp_path / "b.jsonl").read_text() == "".join(encode_line(o) for o in ops)



def test_a_completions_extra_fields_built_from_its_invocations_are_those_of_the_merged_dict():
    """completion_extra(op_extra(inv), res) is op_extra of inv updated by
    res: the same fields, in the same order (the line's bytes follow it),
    in a dict of its own."""
    from checkers.history.recorder import completion_extra, op_extra

    invs = [{"f": "send", "process": 3, "value": [["send", "t-0", 1]], "acks": "all", "idempotent": False,
             "type": "invoke"},
            {"f": "poll", "process": 1, "value": [["poll"]], "final": True, "key": "t-1", "upto": 4,
             "_timeout": 40.0, "type": "invoke"},
            {"f": "start-kill", "process": "nemesis", "value": None, "type": "info", "node": 2}]
    results = [{}, {"type": "ok", "value": [["send", "t-0", [7, 1]]]}, {"type": "info", "error": "timeout"},
               {"type": "ok", "caught_up": True, "resets": ["t-1@3"], "upto": 9, "_completion": True},
               {"acks": "1", "index": 5, "time": 9, "error": "x", "new": 1}]
    for inv in invs:
        for res in results:
            merged = dict(inv)
            merged.update(res)
            extra = op_extra(inv)
            got = completion_extra(extra, res)
            assert list(got.items()) == list(op_extra(merged).items())
            assert got is not extra


def test_an_ok_completion_recorded_from_its_invocations_line_is_the_line_append_writes(tmp_path: Path):
    """Recorder.append_ok, given the invocation line's fields and the same
    process, f, error and extra fields, writes what append writes for that
    completion, byte for byte (index, time, type and value its own; the
    extra fields after an error, in the invocation's order), and keeps the
    same Op; the invocation's fields are left as they were."""
    from checkers.history.recorder import Recorder
    from reference_impl.sim.clients import VirtualClock
    from reference_impl.sim.events import EventLoop

    ops = [(3, "send", [["send", "t-0", 1]], None, {"acks": "all", "idempotent": False}, [["send", "t-0", [7, 1]]]),
           (1, "poll", [["poll"]], None, {}, [["poll", {"t-0": [[0, 1]]}]]),
           (2, "odd", 5, "said-so", {"node": 2}, {"v": 6})]
    lines = {}
    for how in ("append", "append_ok"):
        path = tmp_path / f"{how}.jsonl"
        loop = EventLoop()
        rec = Recorder(path, keep=True, clock=VirtualClock(loop), epoch=0, background=False)
        for process, f, value, error, extra, result in ops:
            loop.now += 3
            rec.append(process, "invoke", f, value, error, dict(extra))
            inv = rec.last_fields
            before = dict(inv)
            loop.now += 4
            if how == "append":
                got = rec.append(process, "ok", f, result, error, dict(extra))
            else:
                got = rec.append_ok(inv, process, f, result, error, dict(extra))
            assert inv == before and list(inv) == list(before)
            assert (got.type, got.value, got.error, got.extra, got.index) == ("ok", result, error, extra, rec.size - 1)
            assert got.time - inv["time"] == 4_000_000
        rec.close()
        lines[how] = (path.read_bytes(), rec.digest(), [o.to_dict() for o in rec.ops])
    assert lines["append_ok"] == lines["append"]
    assert lines["append"][0].count(b"\n") == 6 and b'"error":"said-so","node":2' in lines["append"][0]


def test_an_ok_completion_given_its_values_json_writes_the_line_encoded_anew(tmp_path: Path):
    """Recorder.append_ok given ``value_json`` (a simulated poll's value,
    spelt from its records' JSON: reference_impl.sim.consumer.poll_json)
    writes those bytes for the value: the same line and digest as the value
    encoded anew, the Op keeping the value itself; a line orjson refuses
    (an extra field with a non-string key) falls back to encode_op's
    spelling of the value, as any line; bytes that differ from the value's
    JSON are written as given (nothing re-encodes them: the caller's rule)."""
    import orjson

    from checkers.history.recorder import Recorder
    from reference_impl.sim.clients import VirtualClock
    from reference_impl.sim.events import EventLoop

    value = [["poll", {"t-0": [[0, 1], [1, "é"]], "t-2": [[5, None]]}]]
    cases = [{}, {"odd": {3: "x"}}]
    out = {}
    for how in ("plain", "json", "wrong"):
        loop = EventLoop()
        rec = Recorder(tmp_path / f"{how}.jsonl", keep=True, clock=VirtualClock(loop), epoch=0, background=False)
        for extra in cases:
            rec.append(4, "invoke", "poll", [["poll"]], None, dict(extra))
            inv = rec.last_fields
            loop.now += 2
            vj = {"plain": None, "json": orjson.dumps(value), "wrong": b'"not it"'}[how]
            got = rec.append_ok(inv, 4, "poll", value, None, dict(extra), vj)
            assert got.value is value
        rec.close()
        out[how] = ((tmp_path / f"{how}.jsonl").read_bytes(), rec.digest())
    assert out["json"] == out["plain"]
    wrong = out["wrong"][0].splitlines()
    assert b'"value":"not it"' in wrong[1]  # the bytes given, as given
    assert wrong[3] == out["plain"][0].splitlines()[3]  # refused by orjson: the value encoded anew
