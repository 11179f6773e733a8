"""A run's ``history_sha256`` (what replay checks compare) is the SHA-256 of
its history.jsonl, byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.config import TestConfig
from harness.runner import run_seed


def test_history_digest_is_the_sha256_of_history_jsonl(tmp_path):
    opts = TestConfig(backend="sim", time_limit=5, nemesis=("all",), nemesis_interval=2, rate=50)
    res = run_seed(opts, 3, tmp_path)
    data = (Path(res["run_dir"]) / "history.jsonl").read_bytes()
    assert data  # a history was written
    assert res["stats"]["history_sha256"] == hashlib.sha256(data).hexdigest()
    # without a run directory the digest is the same: it does not depend on the file
    assert run_seed(opts, 3)["stats"]["history_sha256"] == res["stats"]["history_sha256"]


def test_the_recorder_spells_each_operation_as_encode_line_does(tmp_path):
    """History.record builds its lines itself (it runs compiled); they must
    be exactly encode_line's, fallbacks included, in the file and the digest."""
    from checkers.history.jsonl import encode_line
    from reference_impl.sim.history import History

    h = History(tmp_path / "h.jsonl")
    values = [[["send", "t-0", [4, 7]]], {"t-0": [[0, 1]], 3: "x"}, 2**70, {1, 2}, float("nan"), "é", None]
    for i, v in enumerate(values):
        h.record(i, i % 3, "ok" if i % 2 else "info", "send", v, ["timeout", "x"] if i % 2 else None, {"acks": "all"})
    h.record(9, "nemesis", "info", "start-partition", None, extra={"node": [1, 2]})
    h.close()
    want = "".join(encode_line(op) for op in h.ops)
    assert (tmp_path / "h.jsonl").read_text() == want
    assert h.digest() == hashlib.sha256(want.encode()).hexdigest()


def test_a_seeds_digest_is_that_of_its_operations_as_encode_line_spells_them():
    from checkers.history.jsonl import encode_line
    from harness.backend.sim import SimRun

    run = SimRun(TestConfig(backend="sim", time_limit=5, nemesis=("all",), nemesis_interval=2, rate=50), 3)
    res = run.run()
    want = "".join(encode_line(op) for op in run.history.ops)
    assert len(run.history.ops) > 100
    assert res["stats"]["history_sha256"] == hashlib.sha256(want.encode()).hexdigest()
