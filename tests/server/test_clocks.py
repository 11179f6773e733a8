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
