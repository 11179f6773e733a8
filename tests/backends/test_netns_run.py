"""A campaign on the netns backend end to end: valid, with the run directory
and results.json of the local backend's shape, and test.json naming the
backend (the nodes' traces come back under nodes/<name>/)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtimes.net.netns import list_namespaces

from .conftest import assert_no_orphans, needs_root_net

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def test_a_netns_campaign_with_every_fault_is_valid_and_shaped_like_local(tmp_path):
    needs_root_net()
    before = set(list_namespaces())
    out = tmp_path / "results"
    r = subprocess.run(CLI + ["run", "--backend", "netns", "--nemesis", "partition,kill,pause,clock", "--acks", "all",
                              "--rf", "3", "--min-isr", "2", "--time-limit", "12", "--nemesis-interval", "2",
                              "--nemesis-mode", "overlap", "--seed", "3", "--out", str(out), "--json"],
                       capture_output=True, text=True, timeout=400, cwd=ROOT,
                       env={**os.environ, "KRAFTWERK_RUNTIME_DIR": str(tmp_path / "registry")})
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["valid"] is True
    assert res["durability"]["acks=all"]["acked"] > 0
    run_dir = Path(res["run_dir"])
    test = json.loads((run_dir / "test.json").read_text())
    assert test["backend"] == "netns"
    for f in ("history.jsonl", "results.json", "index.html", "timeline.html"):
        assert (run_dir / f).exists(), f
    assert sorted(p.name for p in (run_dir / "nodes").iterdir() if p.is_dir()) == ["c1", "c2", "c3", "n1", "n2", "n3"]
    assert all((run_dir / "nodes" / n / "trace.jsonl").stat().st_size > 0 for n in ("n1", "c1"))
    faults = {json.loads(line)["f"] for line in (run_dir / "history.jsonl").read_text().splitlines()
              if '"nemesis"' in line}
    # overlap mode gives each fault its own timetable, first start within
    # 1.5 x the interval: every kind flies whatever the clients' pace
    assert {f for f in faults if f.startswith("start-")} == {"start-partition", "start-kill", "start-pause", "start-clock"}
    assert_no_orphans(before)  # nothing of the run outlives it
