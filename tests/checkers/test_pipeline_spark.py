"""The Spark engine gives the same verdicts as the inline engine, and the
per-key checks really run in executor processes (not on the driver)."""

from __future__ import annotations

import os

import pytest

from checkers.check import check_history
from checkers.pipeline import _balanced, run_keys
from checkers.queue.project import project
from checkers.queue.synth import HistoryBuilder, valid_history

pytestmark = pytest.mark.spark
MASTER = "local[2]"


def _verdict(r: dict) -> dict:
    q = r["checkers"]["queue"]
    return {"valid": r["valid"], "anomaly_types": r["anomaly_types"], "anomalies": r["anomalies"],
            "counts": q["counts"], "durability": r["durability"], "graph": {
                k: v for k, v in q["graph"].items() if k != "seconds"}}


def _anomalous() -> list:
    """Several anomalies across several keys at once."""
    b = HistoryBuilder()
    for i, v in enumerate((1, 2, 3)):
        b.send(0, "t-0", v, i)
    b.send(0, "t-1", 10, 0, acks="1")
    b.send(0, "t-1", 11, 1, acks="1")
    b.send(3, "t-2", 20, None, type="fail")
    b.poll(1, {"t-0": [(0, 1)]})
    b.poll(1, {"t-0": [(2, 3)], "t-1": [(1, 11)], "t-2": [(0, 20)]})
    b.invoke(4, "txn", [["send", "t-0", 4], ["send", "t-1", 12]])
    b.invoke(5, "txn", [["send", "t-0", 5], ["send", "t-1", 13]])
    b.complete(4, "ok", [["send", "t-0", [3, 4]], ["send", "t-1", [3, 12]]])
    b.complete(5, "ok", [["send", "t-0", [4, 5]], ["send", "t-1", [2, 13]]])
    b.poll(2, {"t-0": [(o, v) for o, v in enumerate((1, 2, 3, 4, 5))]}, final=True)
    return b.ops


@pytest.mark.parametrize("name", ["valid", "anomalous"])
def test_spark_and_inline_engines_give_identical_verdicts(spark, name: str) -> None:
    ops = valid_history(6000, 12, 8, seed=4) if name == "valid" else _anomalous()
    inline = check_history(ops, engine="inline")
    on_spark = check_history(ops, engine="spark", spark_master=MASTER)
    assert _verdict(on_spark) == _verdict(inline)
    assert on_spark["stats"]["engine"] == "spark"
    if name == "anomalous":
        # t-1's lost record was sent with acks=1: reported under its level's name
        assert {"poll-skip", "lost-write-acks1", "G1a", "G0"} <= set(inline["anomaly_types"])
        assert inline["valid"] is False


def test_per_key_checks_run_on_executors_not_the_driver(spark) -> None:
    keys = project(valid_history(4000, 8, 8, seed=9)).keys
    results = run_keys(keys, engine="spark", spark_master=MASTER)
    assert sorted(r["key"] for r in results) == sorted(keys)
    pids = {r["pid"] for r in results}
    assert os.getpid() not in pids
    assert len(pids) >= 1


def test_rows_are_dealt_into_balanced_partitions() -> None:
    items = [(f"k{i}", b"x" * (100 * (i + 1))) for i in range(10)]
    rows = _balanced(items, 2)
    first, second = rows[:5], rows[5:]
    a, b = sum(len(x[1]) for x in first), sum(len(x[1]) for x in second)
    assert sorted(rows) == sorted(items)
    assert abs(a - b) <= 100 * 10 / 2


def test_spark_job_past_its_budget_is_cancelled_and_unknown(spark) -> None:
    """Checkers never hang: the Spark stage is cancelled at the deadline."""
    ops = valid_history(20000, 10, 8, seed=2)
    r = check_history(ops, engine="spark", spark_master=MASTER, time_budget=0.05)
    assert r["valid"] == "unknown"
    assert r["checkers"]["queue"]["per_key"] == "budget-exceeded"
    # and the session is still usable afterwards
    assert check_history(ops[:2000], engine="spark", spark_master=MASTER)["checkers"]["queue"]["per_key"] == "complete"


def test_a_scanned_file_checks_the_same_on_spark_from_key_files_the_executors_read(spark, tmp_path,
                                                                                 monkeypatch) -> None:
    """``kraftwerk check`` of a JSONL file scans it into columns; on Spark the
    driver writes each key's columns to a file and the executors read them
    (from ``KRAFTWERK_SPARK_DIR`` when set): the results equal the inline
    check of the operations, and the key files are gone afterwards."""
    from checkers import pipeline
    from checkers.history import write_jsonl
    from checkers.queue.scan import scan_jsonl
    from tests.checkers.test_columnar_reading import _untimed, every_field

    shared = tmp_path / "shared"
    shared.mkdir()
    for i, ops in enumerate((every_field(), _anomalous(), valid_history(3000, 6, 5, seed=8))):
        if i == 2:
            monkeypatch.setenv("KRAFTWERK_SPARK_DIR", str(shared))
        path = tmp_path / "h.jsonl"
        write_jsonl(path, ops)
        inline = _untimed(check_history(ops, engine="inline"))
        on_spark = _untimed(check_history(scan_jsonl(path), engine="spark", spark_master=MASTER))
        on_spark["stats"]["engine"] = "inline"
        assert on_spark == inline
    assert not list(pipeline._private_dir().glob("keys-*"))
    assert shared.is_dir() and not list(shared.iterdir())
