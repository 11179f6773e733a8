"""One YAML test file runs in the simulator and on real local processes
with the same fault names and targets, and a schedule the simulator drew
replays on real processes: both histories name their fault intervals
identically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TEST_FILE = """\
name: both
time_limit: 6
nemesis: [kill:majority, partition:halves, pause:one]
nemesis_interval: 2
rate: 40
partitions: 2
seed: 5
"""


def kraftwerk(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args, "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=400)
    assert p.returncode in (0, 1, 3), p.stderr
    out = json.loads(p.stdout)
    return out[0] if isinstance(out, list) else out


def intervals(run_dir: Path) -> list[dict]:
    """The nemesis completions: what each fault interval was."""
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    nem = [o for o in ops if o["process"] == "nemesis"]
    return nem[1::2]


@pytest.mark.integration
def test_one_file_runs_on_both_runtimes_with_the_same_fault_names(tmp_path: Path) -> None:
    f = tmp_path / "both.yaml"
    f.write_text(TEST_FILE)
    sim = Path(kraftwerk("sim", "--config", str(f), "--out", str(tmp_path / "sim"), "--no-report")["run_dir"])
    real = Path(kraftwerk("run", "--config", str(f), "--out", str(tmp_path / "real"), "--no-progress",
                          "--no-report")["run_dir"])
    mix = {"kill:majority", "partition:halves", "pause:one"}
    for run in (sim, real):
        test = json.loads((run / "test.json").read_text())
        assert test["nemesis"] == sorted(mix, key=["kill:majority", "partition:halves", "pause:one"].index)
        done = intervals(run)
        assert {o["value"]["fault"] for o in done if not o["value"].get("final")} <= mix
        # the final heal names every kind of the mix, in the mix's order
        assert [o["f"] for o in done if o["value"].get("final")] == ["stop-kill", "stop-partition", "stop-pause"]
        for o in done:
            if o["f"] == "start-kill":
                assert o["value"]["target"] == "majority" and len(o["value"]["nodes"]) == 4
    assert json.loads((sim / "test.json").read_text())["runtime"] == "sim"
    assert json.loads((real / "test.json").read_text())["runtime"] == "local"

    # the simulator's schedule, replayed on real processes: the same intervals
    replayed = Path(kraftwerk("run", "--schedule", str(sim / "test.json"), "--out", str(tmp_path / "replay"),
                              "--no-progress", "--no-report")["run_dir"])
    schedule = json.loads((sim / "test.json").read_text())["schedule"]
    starts = [e for e in schedule if e["f"].startswith("start-")]
    got = [o for o in intervals(replayed) if o["f"].startswith("start-")]
    assert starts, "the simulator drew no fault to replay"
    keys = ("fault", "target", "nodes", "cut")
    assert [{k: o["value"].get(k) for k in keys} for o in got] == [{k: e.get(k) for k in keys} for e in starts]
