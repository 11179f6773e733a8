"""The same campaign (partition, kill, pause, clock; acks all, rf 3,
min.insync 2; 30 s) is valid on every backend, with run directories and
results.json of one shape and test.json naming the backend. Slow (about
six minutes on a quiet machine): run with ``-m slow``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtimes import docker as kwdocker
from harness.runtimes.throwaway import down, up

from .conftest import needs_root_net

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def campaign(backend, out, *extra):
    r = subprocess.run(CLI + ["run", "--backend", backend, *extra, "--nemesis", "partition,kill,pause,clock",
                              "--acks", "all", "--rf", "3", "--min-isr", "2", "--time-limit", "30",
                              "--seed", "21", "--out", str(out), "--json"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT, env={**os.environ})
    assert r.returncode == 0, (backend, r.stderr[-1500:])
    return json.loads(r.stdout)


def shape(res):
    run_dir = Path(res["run_dir"])
    files = sorted(p.name for p in run_dir.iterdir() if p.is_file())
    nodes = sorted(p.name for p in (run_dir / "nodes").iterdir() if p.is_dir())
    return files, nodes, sorted(res)


def test_the_same_campaign_is_valid_on_every_backend(tmp_path):
    needs_root_net()
    had_engine = kwdocker.engine(start=False) is not None
    hosts = up(6, tmp_path / "hosts")
    try:
        results = {b: campaign(b, tmp_path / "r", *extra) for b, extra in [
            ("local", ()), ("netns", ()), ("docker", ()), ("ssh", ("--hosts", str(hosts)))]}
    finally:
        down(tmp_path / "hosts")
        if not had_engine:
            kwdocker.stop_own_dockerd()
    shapes = {b: shape(r) for b, r in results.items()}
    assert all(r["valid"] is True for r in results.values()), {b: r["valid"] for b, r in results.items()}
    assert len({json.dumps(s) for s in shapes.values()}) == 1, shapes
    for b, r in results.items():
        assert json.loads((Path(r["run_dir"]) / "test.json").read_text())["backend"] == b
