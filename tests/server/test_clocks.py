"""The clock nemesis against real node processes: a forward jump of twice the
broker session timeout on the active controller fences no broker, because
broker sessions are judged on the monotonic clock (Kafka's
BrokerHeartbeatManager reads ``time.nanoseconds()``), and the jump moves
only the wall clock (docs/architecture.md, "Clocks").

One controller, so the quorum has no check-quorum timer (a single voter never
resigns) and the same controller stays active through the jump: what is under
test is the session clock alone.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from reference_impl.server.launcher import LocalCluster

pytestmark = pytest.mark.integration

SESSION_MS = 3000


def _events(c: LocalCluster, node_id: int, kind: str) -> list[dict]:
    path = os.path.join(c.node(node_id).data_dir, "trace.jsonl")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("kind") == kind:
                out.append(ev)
    return out


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_forward_wall_jump_of_twice_the_session_timeout_on_the_active_controller_fences_no_broker(tmp_path):
    c = LocalCluster.plan(str(tmp_path / "cluster"), brokers=2, controllers=1, base_port=0,
                          config={"broker.session.timeout.ms": str(SESSION_MS),
                                  "broker.heartbeat.interval.ms": "500"})
    c.up(90)
    try:
        ctrl = c.nodes[0].node_id
        _wait(lambda: len(_events(c, ctrl, "broker_unfenced")) >= 2, 30, "both brokers unfenced")
        before = len(_events(c, ctrl, "broker_fenced"))
        r = c.control(ctrl, "POST", "/clock", {"shift_ms": 2 * SESSION_MS})
        assert r["clock_offset_ms"] == 2 * SESSION_MS
        time.sleep(3 * SESSION_MS / 1000)
        assert len(_events(c, ctrl, "broker_fenced")) == before
        status = c.control(ctrl, "GET", "/status")
        assert status["errors"] == 0
    finally:
        c.down(40)


def _trace(run_dir, name: str, kind: str) -> list[dict]:
    path = run_dir / "nodes" / name / "trace.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("kind") == kind:
            out.append(ev)
    return out


def test_clock_fault_through_the_local_backend_jumping_the_active_controller_fences_no_broker(tmp_path):
    """The same rule through the harness: the reference db on the local
    backend (three brokers, one controller, the harness's timings), and the
    cluster contract's clock control (``cluster.clock.set_offset``, what the
    clock nemesis calls) jumping the active controller's wall clock by twice
    broker.session.timeout.ms. One voter, as above, so the controller stays
    active through the jump and only its session clock is under test: no
    broker is fenced, and every key keeps a leader."""
    from harness.config import TestConfig
    from harness.db.reference import ReferenceDB, protocol_config
    from harness.state import RunState

    run_dir = tmp_path / "run"
    (run_dir / "nodes").mkdir(parents=True)
    state = RunState.create(tmp_path, "clock-real", run_dir)
    cfg = TestConfig(partitions=1, seed=1, controllers=1)
    session_ms = protocol_config(cfg).broker_session_timeout_ms
    db = ReferenceDB(cfg, run_dir, state)
    try:
        db.setup()
        c = db.cluster
        assert c is not None
        _wait(lambda: c.active_controller() is not None and all(c.leader_of(k) for k in c.keys()), 30,
              "an active controller and a leader for every key")
        ctrl = c.active_controller()
        controllers = c.controllers()
        before = sum(len(_trace(run_dir, n, "broker_fenced")) for n in controllers)
        c.clock.set_offset(ctrl, 2 * session_ms)
        assert int((c.status(ctrl) or {}).get("clock_offset_ms", 0)) == 2 * session_ms
        time.sleep(3 * session_ms / 1000)
        assert sum(len(_trace(run_dir, n, "broker_fenced")) for n in controllers) == before
        assert c.active_controller() == ctrl and all(c.leader_of(k) for k in c.keys())
    finally:
        db.teardown()
        state.remove()
