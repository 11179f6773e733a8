"""results.json assembly: a key whose final read never completed leaves its
acknowledged writes unverified, so a run that found nothing wrong is
"unknown", not valid; anomalies still make it invalid."""

import json

from checkers.history.jsonl import write_jsonl
from checkers.history.op import Op
from checkers.final_reads import final_read_coverage
from harness.lifecycle.checking import check_run


def history(final_types):
    ops = []

    def add(**kw):
        ops.append(Op(index=len(ops), time=len(ops) * 1000, **kw))

    for k, key in enumerate(["t0-0", "t0-1"]):
        add(type="invoke", f="send", value=[["send", key, k]], process=0, extra={"acks": "all"})
        add(type="ok", f="send", value=[["send", key, [0, k]]], process=0, extra={"acks": "all"})
    # an ordinary poll saw both values, so nothing is "unseen"
    add(type="invoke", f="poll", value=[["poll"]], process=3)
    add(type="ok", f="poll", value=[["poll", {"t0-0": [[0, 0]], "t0-1": [[0, 1]]}]], process=3)
    add(type="invoke", f="assign", value=[], process=1, extra={"final": True})
    add(type="ok", f="assign", value=[], process=1, extra={"final": True})
    add(type="invoke", f="assign", value=[], process=2, extra={"final": True})
    add(type="ok", f="assign", value=[], process=2, extra={"final": True})
    for p, (key, typ) in enumerate(zip(["t0-0", "t0-1"], final_types)):
        add(type="invoke", f="poll", value=[["poll"]], process=p + 1, extra={"final": True, "key": key, "upto": 0})
        add(type=typ, f="poll", value=[["poll", {key: [[0, p]] if typ == "ok" else []}]], process=p + 1,
            extra={"final": True, "key": key, "upto": 0})
    return ops


def run_dir(tmp_path, final_types):
    d = tmp_path / "run"
    d.mkdir()
    write_jsonl(d / "history.jsonl", history(final_types))
    (d / "test.json").write_text(json.dumps({"keys": ["t0-0", "t0-1"], "sub_via": ["assign"]}))
    return d


def test_all_keys_read_to_the_end_keeps_the_verdict(tmp_path):
    res = check_run(run_dir(tmp_path, ["ok", "ok"]))
    assert res["valid"] is True
    assert res["checkers"]["final-reads"]["incomplete_keys"] == []
    assert json.loads((tmp_path / "run" / "results.json").read_text())["valid"] is True


def test_unreadable_key_makes_a_clean_run_unknown(tmp_path):
    res = check_run(run_dir(tmp_path, ["ok", "info"]))
    assert res["valid"] == "unknown"
    assert res["checkers"]["final-reads"]["incomplete_keys"] == ["t0-1"]


def test_partial_history_without_final_reads_has_no_coverage_verdict():
    ops = [o for o in history(["ok", "ok"]) if not o.extra.get("final")]
    assert final_read_coverage(ops) is None


def test_check_run_scans_the_history_in_columns_with_the_same_results(tmp_path):
    """check_run reads history.jsonl as ``kraftwerk check`` does (one
    columnar scan, no operation list) and writes what checking the list of
    operations wrote: the same verdict, findings and statistics."""
    from checkers.availability import check_run_dir, merge_availability, set_cause
    from checkers.check import check_history
    from checkers.history.jsonl import read_jsonl
    from checkers.queue.synth import valid_history
    from harness.lifecycle.checking import history_stats
    from tests.checkers.test_columnar_reading import _untimed, every_field

    for i, ops in enumerate((history(["ok", "info"]), every_field(), valid_history(2000, 3, 4, seed=2))):
        d = tmp_path / f"run{i}"
        d.mkdir()
        write_jsonl(d / "history.jsonl", ops)
        test = {"keys": ["t0-0", "t0-1"], "sub_via": ["assign"]}
        (d / "test.json").write_text(json.dumps(test))
        listed = read_jsonl(d / "history.jsonl")
        want = check_history(listed, model="queue", test=test)
        merge_availability(want, check_run_dir(d, test))  # as check_run judges a run directory's liveness too
        want["stats"] = {**history_stats(listed), **want["stats"]}
        set_cause(want)
        got = check_run(d)
        assert _untimed(got) == _untimed(want)
        assert got["stats"]["nemesis_ops"] == history_stats(listed)["nemesis_ops"]
