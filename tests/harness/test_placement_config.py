"""A pinned placement that cannot be the test's is refused before anything
starts: one line, exit 2 (``harness.config.placement.placement_error``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import build_config
from harness.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
CFG = {"backend": "sim", "brokers": 4}
GOOD = {"t0-0": ["n3", "n4", "n1"], "t0-1": ["n4", "n1", "n2"]}


@pytest.mark.parametrize("placement, words", [
    ({"t0-0": ["n1", "n2", "n3"]}, "placement gives no replicas for t0-1"),
    ({**GOOD, "t9-0": ["n1", "n2", "n3"]}, "placement names t9-0, not a partition of this test"),
    ({**GOOD, "t0-1": ["n1", "n2"]}, "placement of t0-1 lists 2 replica(s), not --rf 3"),
    ({**GOOD, "t0-1": ["n1", "n2", "n1"]}, "placement of t0-1 names a broker twice"),
    ({**GOOD, "t0-1": ["n1", "n2", "n9"]}, "placement of t0-1 names n9, not a broker of this cluster"),
    ({**GOOD, "t0-1": ["n1", "n2", "c1"]}, "names c1, not a broker"),
])
def test_a_placement_that_cannot_be_the_tests_is_refused_in_one_line(placement, words) -> None:
    with pytest.raises(UsageError) as e:
        build_config(None, {**CFG, "placement": placement})
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_placement_that_fits_is_taken() -> None:
    assert build_config(None, {**CFG, "placement": GOOD}).placement == GOOD


def test_a_schedule_file_with_a_bad_placement_exits_2_with_one_line_and_starts_nothing(tmp_path: Path) -> None:
    f = tmp_path / "schedule.json"
    f.write_text(json.dumps({"brokers": 3, "placement": GOOD, "schedule": [
        {"at_ms": 1000, "f": "start-kill", "fault": "kill", "target": "one", "nodes": ["n1"]}]}))
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "sim", "--schedule", str(f),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "names n4, not a broker of this cluster" in lines[0]
    assert not (tmp_path / "out").exists()
