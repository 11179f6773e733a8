"""SIGKILL of the harness mid-run on the netns backend, then a plain
``kraftwerk cleanup``, leaves no kw- namespace of the run, no veth, no
iptables rule (they lived in those namespaces) and no process, the packet
delayers of a latency fault included; a second cleanup finds nothing
(harness/runtimes/net/netns.py ``sweep``)."""

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

from .conftest import needs_root_net

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def pids_with_env(run_id):
    want = f"{RUN_ENV}={run_id}".encode()
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if want in (p / "environ").read_bytes().split(b"\0"):
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def owned_by(pid):
    for f in OWNER_DIR.glob("*.json"):
        rec = json.loads(f.read_text())
        if rec.get("pid") == pid:
            return rec["tag"]
    return None


def test_cleanup_after_harness_sigkill_removes_namespaces_and_processes(tmp_path):
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
    ours = [ns for ns in list_namespaces() if ns.startswith(f"kw-{tag}-")]
    assert len(ours) == 7  # six nodes and the bridge
    procs = [p for p in recorded["processes"] if p["role"] in ("node", "helper")]
    assert len([p for p in procs if p["role"] == "node"]) == 6  # they may already have ended on their own (harness.rundir.lease)

    r = subprocess.run(CLI + ["cleanup", "--out", str(out)], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert not [ns for ns in list_namespaces() if ns.startswith(f"kw-{tag}-")]
    assert f"kw-{tag}" not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not any(alive(p["pid"], p["start"]) for p in procs)
    assert pids_with_env(recorded["run_id"]) == []
    assert not (OWNER_DIR / f"{tag}.json").exists()
    assert not state.exists()

    again = subprocess.run(CLI + ["cleanup", "--out", str(out)], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert again.returncode == 0 and f"kw-{tag}" not in again.stdout
