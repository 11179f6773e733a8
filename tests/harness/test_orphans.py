"""Nothing a run makes outlives it (ARCHITECTURE.md principle 7): node and
proxy processes end on their own when the harness that started them is
SIGKILLed, and one machine-wide registry lets a plain ``kraftwerk cleanup``,
run from anywhere, find every run whatever ``--out`` it used."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness.rundir.lease import PARENT_ENV, RUN_ENV
from harness.rundir.state import RunState, registry_dir
from reference_impl.server.procs import alive, proc_start_time

from tests.procscan import pids_with_env

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


@pytest.fixture
def registry(tmp_path, monkeypatch):
    d = tmp_path / "registry"
    monkeypatch.setenv("KRAFTWERK_RUNTIME_DIR", str(d))
    return d


def _dead_harness(state: RunState) -> None:
    """Make the registry entry look like its harness was SIGKILLed."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    state.data["harness_pid"] = dead.pid
    state.data["harness_start"] = 1
    state._save()


def test_registry_and_state_files_are_owner_only(registry, tmp_path):
    st = RunState.create(tmp_path / "out", "t-1", tmp_path / "out" / "t" / "1")
    assert registry_dir() == registry
    assert stat.S_IMODE(registry.stat().st_mode) == 0o700
    assert stat.S_IMODE(st.path.stat().st_mode) == 0o600
    st.add_process(os.getpid(), "node", "n1")
    assert stat.S_IMODE(st.path.stat().st_mode) == 0o600


def test_registry_refuses_a_directory_open_to_others(tmp_path, monkeypatch):
    """A planted world-writable registry is closed (chmod 0700) before use,
    and a symlink in its place is not followed."""
    d = tmp_path / "reg"
    d.mkdir(mode=0o777)
    os.chmod(d, 0o777)
    monkeypatch.setenv("KRAFTWERK_RUNTIME_DIR", str(d))
    assert stat.S_IMODE(registry_dir().stat().st_mode) == 0o700
    link = tmp_path / "link"
    link.symlink_to(d)
    monkeypatch.setenv("KRAFTWERK_RUNTIME_DIR", str(link))
    with pytest.raises(OSError, match="no private run registry"):
        registry_dir()


def test_plain_cleanup_from_root_finds_a_run_with_any_out(registry, tmp_path):
    """The issue's report: a run with --out elsewhere was invisible to a plain
    `kraftwerk cleanup` from the project directory."""
    st = RunState.create(tmp_path / "somewhere" / "else", "orphan-1", tmp_path / "somewhere" / "else" / "r")
    child = subprocess.Popen(["sleep", "300"], start_new_session=True, env=st.child_env())
    try:
        st.add_process(child.pid, "node", "n1")
        marker = tmp_path / "undone"
        st.add_resource("netns", "kw-orphan-1-n1", undo=[["touch", str(marker)]])
        _dead_harness(st)
        env = {**os.environ, "KRAFTWERK_RUNTIME_DIR": str(registry)}
        narrow = subprocess.run(CLI + ["cleanup", "--out", str(tmp_path / "other")], cwd="/", env=env,
                                capture_output=True, text=True, timeout=60)
        assert narrow.returncode == 0 and "0 process(es) stopped" in narrow.stdout
        assert child.poll() is None
        r = subprocess.run(CLI + ["cleanup"], cwd="/", env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "2 process(es) stopped, 1 resource(s) undone" in r.stdout  # the child and the run's reaper
        assert child.wait(timeout=10) == -signal.SIGKILL
        assert marker.exists()
        again = subprocess.run(CLI + ["cleanup"], cwd="/", env=env, capture_output=True, text=True, timeout=60)
        assert "0 process(es) stopped" in again.stdout
    finally:
        if child.poll() is None:
            child.kill()


def test_cleanup_spares_a_run_whose_harness_lives_and_a_recycled_pid(registry, tmp_path):
    st = RunState.create(tmp_path / "out", "live-1", tmp_path / "out" / "r")
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        st.add_process(child.pid, "node", "n1")
        st.data["harness_pid"] = child.pid  # a live "harness"
        st.data["harness_start"] = proc_start_time(child.pid)
        st._save()
        from harness.rundir.state import cleanup

        assert cleanup(None) == []
        st.data["harness_pid"] = -1
        st.data["processes"][0]["start"] = 1  # not the process that started: a recycled pid
        st._save()
        assert cleanup(None) == []
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_cluster_up_nodes_get_no_lease(tmp_path, monkeypatch):
    """`kraftwerk cluster up` nodes are the user's to stop: even started from
    inside a harness run's environment, they get no lease."""
    from reference_impl.server.launcher import LocalCluster

    for k, v in (("KRAFTWERK_LEASE_FD", "3"), ("KRAFTWERK_PDEATHSIG", "1"), (PARENT_ENV, "1"), (RUN_ENV, "x")):
        monkeypatch.setenv(k, v)
    c = LocalCluster.plan(str(tmp_path / "c"), brokers=1, controllers=1, base_port=31500, combined=True)
    assert not {"KRAFTWERK_LEASE_FD", "KRAFTWERK_PDEATHSIG", PARENT_ENV, RUN_ENV} & set(c.child_env())


def test_cluster_down_never_signals_a_recycled_pid(tmp_path):
    """cluster.json's pid now belongs to another process (its start time
    differs): `down` leaves it alone; the state file is owner-only."""
    from reference_impl.server.launcher import LocalCluster

    c = LocalCluster.plan(str(tmp_path / "c"), brokers=1, controllers=1, base_port=31500, combined=True)
    other = subprocess.Popen(["sleep", "300"])
    try:
        c.nodes[0].pid = other.pid
        c.nodes[0].start = proc_start_time(other.pid) - 1
        c.save()
        assert stat.S_IMODE((tmp_path / "c" / "cluster.json").stat().st_mode) == 0o600
        LocalCluster.load(str(tmp_path / "c")).down(timeout=1)
        time.sleep(0.2)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("start", [None, "123", True, 0.5])
def test_cluster_down_never_signals_a_pid_recorded_without_its_start_time(tmp_path, start):
    """A forged cluster.json with ``"start": null`` (or not a number) names no
    process: `down` signals nothing, the local, Kafka and hosted kinds alike."""
    from harness.handcluster import hosted, kafka
    from reference_impl.server.launcher import LocalCluster

    other = subprocess.Popen(["sleep", "300"])
    try:
        c = LocalCluster.plan(str(tmp_path / "c"), brokers=1, controllers=1, base_port=31500, combined=True)
        c.nodes[0].pid, c.nodes[0].start = other.pid, start
        c.save()
        assert LocalCluster.load(str(tmp_path / "c")).down(timeout=1) == {}
        (tmp_path / "k").mkdir()
        kafka.state_path(tmp_path / "k").write_text(json.dumps(
            {"nodes": [{"name": "n1", "roles": ["broker"]}],
             "processes": [{"pid": other.pid, "start": start, "name": "n1", "role": "node"}]}))
        assert kafka.down(tmp_path / "k", timeout=1) == {}
        st = {"backend": "netns", "nodes": [{"name": "n1", "roles": ["broker"], "pid": other.pid, "start": start}]}
        assert hosted._stop_local_pids(st, timeout=1) == {}
        assert hosted.status(st)[0]["alive"] is False
        time.sleep(0.2)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


# -- SIGKILL of the harness --------------------------------------------------------

def _moment_reached(out: Path, moment: str, t0: float) -> bool:
    if moment.startswith("t+"):
        return time.monotonic() - t0 >= float(moment[2:])
    hist = list(out.glob("*/*/history.jsonl"))
    if not hist:
        return False
    if moment == "running":
        return hist[0].stat().st_size > 4000
    if moment == "final-reads":
        return b'"final": true' in hist[0].read_bytes() or b'"final":true' in hist[0].read_bytes()
    raise AssertionError(moment)


def kill_harness_at(tmp_path: Path, moment: str, extra: list[str] | None = None, wait_s: float = 20.0) -> dict:
    """Start `kraftwerk run`, SIGKILL it at ``moment``, and report which of its
    children were still there ``wait_s`` later (with no cleanup)."""
    out = tmp_path / f"results-{moment}"
    env = {**os.environ, "KRAFTWERK_RUNTIME_DIR": str(tmp_path / "registry")}
    args = ["run", "--out", str(out), "--time-limit", "6", "--nemesis", "pause", "--nemesis-interval", "1",
            "--seed", "5", "--no-progress", "--rate", "30", *(extra or [])]
    h = subprocess.Popen(CLI + args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    try:
        while not _moment_reached(out, moment, t0):
            assert h.poll() is None, f"the run ended before {moment}"
            assert time.monotonic() - t0 < 120, f"{moment} never came"
            time.sleep(0.05)
        children = pids_with_env(PARENT_ENV, str(h.pid))
    finally:
        h.send_signal(signal.SIGKILL)
        h.wait()
    deadline = time.monotonic() + wait_s
    left = pids_with_env(PARENT_ENV, str(h.pid))
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = pids_with_env(PARENT_ENV, str(h.pid))
    for pid in left:  # do not leak into other tests
        os.kill(pid, signal.SIGKILL)
    return {"children": children, "left": left, "out": out, "elapsed": time.monotonic() - t0}


@pytest.mark.integration
@pytest.mark.parametrize("moment", ["t+2", "running", "final-reads"])
def test_nodes_and_proxy_end_within_20s_of_a_harness_sigkill(tmp_path, moment):
    r = kill_harness_at(tmp_path, moment)
    if moment != "t+2":
        assert len(r["children"]) == 8, r  # six nodes, the proxy and the run's reaper were up
    assert r["left"] == [], f"still running 20 s after the harness died: {r['left']}"
    for hist in r["out"].glob("*/*/history.jsonl"):
        chk = subprocess.run(CLI + ["check", str(hist.parent), "--json"], capture_output=True, text=True,
                             timeout=300, cwd=ROOT)
        assert chk.returncode in (0, 1, 3), chk.stderr
        res = json.loads(chk.stdout)
        assert res["valid"] in (True, False, "unknown") and res.get("partial") is True


def test_a_child_that_cannot_watch_the_lease_is_reaped(tmp_path, registry):
    """A JVM or a shell cannot run harness.rundir.lease.arm(); the run's reaper ends
    it when the harness is SIGKILLed (here a `sleep` stands in for it)."""
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        from pathlib import Path
        from harness.rundir.state import RunState
        st = RunState.create(Path({str(tmp_path)!r}) / "out", "jvm-1", Path({str(tmp_path)!r}) / "out" / "r")
        p = subprocess.Popen(["sleep", "300"], env=st.child_env(), start_new_session=True)
        print(p.pid, flush=True)
        time.sleep(300)
    """)
    h = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "KRAFTWERK_RUNTIME_DIR": str(registry)})
    pid = int(h.stdout.readline())
    start = proc_start_time(pid)
    time.sleep(0.5)
    h.kill()
    h.wait()
    h.stdout.close()
    deadline = time.monotonic() + 20
    while alive(pid, start) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid, start)


def test_a_lease_that_ends_while_the_harness_is_still_exiting_is_reaped(registry, tmp_path):
    """The kernel closes a dying harness's lease before the harness turns
    into a zombie: the reaper must not take that moment for a live harness
    that ended the run itself (it once left the record behind, and on a
    quiet machine the namespaces too)."""
    from harness.rundir.state import reap

    st = RunState.create(tmp_path / "out", "dying-1", tmp_path / "out" / "r")
    node = subprocess.Popen(["sleep", "300"], start_new_session=True)
    dying = subprocess.Popen(["sleep", "0.5"])  # a harness that is on its way out
    try:
        st.add_process(node.pid, "node", "n1")
        st.data["harness_pid"] = dying.pid
        st.data["harness_start"] = proc_start_time(dying.pid)
        st._save()
        threading.Thread(target=dying.wait, daemon=True).start()  # reaped as init would
        stopped = reap(st.env_id)
        assert [p["pid"] for p in stopped] == [node.pid]
        assert node.wait(timeout=5) == -signal.SIGKILL
        assert not st.path.exists()
    finally:
        for p in (node, dying):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_run_its_harness_ended_is_left_to_the_harness(registry, tmp_path):
    """``ended`` in the record (written by RunState.remove before the lease
    closes) means the harness undid the run: the reaper signals nothing."""
    from harness.rundir.state import reap

    st = RunState.create(tmp_path / "out", "ended-1", tmp_path / "out" / "r")
    node = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        st.add_process(node.pid, "node", "n1")
        st.data["ended"] = True
        st._save()
        assert reap(st.env_id) == []
        assert node.poll() is None
    finally:
        node.kill()
        node.wait()
