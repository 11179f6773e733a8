"""After SIGKILL of the harness mid-run, a plain ``kraftwerk cleanup`` run
from / (the run used another ``--out``) leaves no node or proxy process behind
(idempotently), and ``kraftwerk check`` works on the partial history."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.rundir.state import RUN_ENV
from reference_impl.server.procs import alive

from tests.procscan import pids_with_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def test_cleanup_after_harness_sigkill_stops_nodes_and_proxy(tmp_path):
    out = tmp_path / "results"
    registry = tmp_path / "registry"
    env = {**os.environ, "KRAFTWERK_RUNTIME_DIR": str(registry)}
    harness = subprocess.Popen(CLI + ["run", "--out", str(out), "--time-limit", "60", "--nemesis", "pause",
                                      "--nemesis-interval", "1", "--seed", "5", "--no-progress"],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        hist = None
        while time.monotonic() < deadline:
            runs = list(out.glob("queue/*/history.jsonl"))
            if runs and runs[0].stat().st_size > 20_000:
                hist = runs[0]
                break
            time.sleep(0.5)
        assert hist is not None, "the run never got going"
        (state,) = list(registry.glob("*.json"))
        recorded = json.loads(state.read_text())
        roles = sorted(p["role"] for p in recorded["processes"])
        assert roles.count("node") == 6 and roles.count("proxy") == 1
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    procs = recorded["processes"]
    r = subprocess.run(CLI + ["cleanup"], capture_output=True, text=True, timeout=60, cwd="/", env=env)
    assert r.returncode == 0, r.stderr
    assert "process(es) stopped" in r.stdout
    assert not any(alive(p["pid"], p["start"]) for p in procs)
    assert pids_with_env(RUN_ENV, recorded["run_id"]) == []
    assert not state.exists()

    again = subprocess.run(CLI + ["cleanup"], capture_output=True, text=True, timeout=60, cwd="/", env=env)
    assert again.returncode == 0 and "0 process(es) stopped" in again.stdout

    chk = subprocess.run(CLI + ["check", str(hist.parent), "--json"], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert chk.returncode in (0, 1, 3), chk.stderr
    res = json.loads(chk.stdout)
    assert res["valid"] in (True, False, "unknown")
    assert res["durability"]["acks=all"]["sent"] > 0
