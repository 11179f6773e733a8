"""SIGKILL of the harness mid-run on the netns backend leaves, 90 s later
and with no ``kraftwerk cleanup`` run, no kw- namespace of the run, no
veth, no iptables rule (they lived in those namespaces), no owner record
and no process, the packet delayers of a latency fault included: the run's reaper undid it (harness/rundir/lease.py,
state.py ``reap``); a cleanup afterwards finds nothing."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.runtimes.net.netns import OWNER_DIR, list_namespaces
from harness.rundir.state import RUN_ENV
from reference_impl.server.procs import alive

from tests.procscan import pids_with_env
from .conftest import needs_root_net

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def owned_by(pid):
    for f in OWNER_DIR.glob("*.json"):
        rec = json.loads(f.read_text())
        if rec.get("pid") == pid:
            return rec["tag"]
    return None


def test_a_sigkilled_harness_leaves_no_namespace_rule_or_process_within_90_s_without_cleanup(tmp_path):
    needs_root_net()
    out = tmp_path / "results"
    registry = tmp_path / "registry"
    env = {**os.environ, "KRAFTWERK_RUNTIME_DIR": str(registry)}
    harness = subprocess.Popen(CLI + ["run", "--backend", "netns", "--out", str(out), "--time-limit", "60",
                                      "--nemesis", "partition,pause,latency", "--nemesis-interval", "1", "--seed", "5",
                                      "--no-progress"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        hist = None
        recorded: dict = {"processes": []}
        while time.monotonic() < deadline and not any(p["role"] == "helper" for p in recorded["processes"]):
            runs = list(out.glob("queue/*/history.jsonl"))
            if runs and runs[0].stat().st_size > 3_000:
                hist = runs[0]
                (state,) = list(registry.glob("*.json"))
                recorded = json.loads(state.read_text())
            time.sleep(0.5)
        assert hist is not None, "the run never got going"
        assert any(p["role"] == "helper" for p in recorded["processes"]), "no latency fault started a delayer"
        tag = owned_by(harness.pid)
        assert tag is not None
        assert [r["kind"] for r in recorded["resources"]] == ["netns"]
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    procs = [p for p in recorded["processes"] if p["role"] in ("node", "helper")]
    assert len([p for p in procs if p["role"] == "node"]) == 6  # they may already have ended on their own (harness.rundir.lease)

    def left() -> list[str]:
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        return ([ns for ns in list_namespaces() if ns.startswith(f"kw-{tag}-")]
                + ([f"link kw-{tag}"] if f"kw-{tag}" in links else [])
                + [f"process {p['pid']}" for p in procs if alive(p["pid"], p["start"])]
                + [f"process {pid}" for pid in pids_with_env(RUN_ENV, recorded["run_id"])]
                + [str(f) for f in (OWNER_DIR / f"{tag}.json", state) if f.exists()])

    # no cleanup run: the reaper alone; a few seconds, but the window is for a heavily loaded machine
    deadline = time.monotonic() + 90
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left() == []

    again = subprocess.run(CLI + ["cleanup", "--out", str(out)], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert again.returncode == 0 and f"kw-{tag}" not in again.stdout
