"""A run's ``history_sha256`` (what replay checks compare) is the SHA-256 of
its history.jsonl, byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

from reference_impl.sim.options import SimOptions
from reference_impl.sim.runner import run_seed


def test_history_digest_is_the_sha256_of_history_jsonl(tmp_path):
    opts = SimOptions(time_limit_s=5, nemesis=("all",), nemesis_interval_s=2, rate=50, final_wait_s=5)
    res = run_seed(opts, 3, tmp_path)
    data = (Path(res["run_dir"]) / "history.jsonl").read_bytes()
    assert data  # a history was written
    assert res["stats"]["history_sha256"] == hashlib.sha256(data).hexdigest()
    # without a run directory the digest is the same: it does not depend on the file
    assert run_seed(opts, 3)["stats"]["history_sha256"] == res["stats"]["history_sha256"]
