"""Every finding of docs/analysis-kafka-4.4.md replays on real Kafka from
its shipped schedule file (docs/findings/) to its verdict class: the
command the analysis gives, the faults, order, targets and nominal times
of the recorded schedule (state-named targets named again on Kafka), on
network namespaces. Slow: a real cluster per finding, 1-2 minutes each
(``bench/findings.py`` replays each three times and prints the ranges)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from findings import FINDINGS, replay  # noqa: E402

TABLE = json.loads((FINDINGS / "findings.json").read_text())


def test_every_finding_ships_a_schedule_file_that_names_its_settings_and_faults():
    for f in TABLE:
        if f["file"] is None:  # a scripted scenario: its command is the reproduction
            assert "--scenario" in f["flags"] and "--seed" in f["flags"]
            continue
        body = json.loads((FINDINGS / f["file"]).read_text())
        assert body["schedule"] and body["seed"] is not None and body["time_limit"] > 0, f["file"]
        assert f["expect"] in ("valid", "invalid")


@pytest.mark.slow
@pytest.mark.parametrize("finding", TABLE, ids=[f"finding-{f['finding']}" for f in TABLE])
def test_a_finding_replays_on_kafka_to_its_verdict_class(finding: dict, tmp_path: Path):
    run = replay(finding, "netns", str(tmp_path))
    assert run["valid"] is (finding["expect"] == "valid"), run
