"""The clock nemesis against real node processes: a forward jump of twice the
broker session timeout on the active controller fences no broker, because
broker sessions are judged on the monotonic clock (Kafka 4.4's
BrokerHeartbeatTracker reads ``time.nanoseconds()``), and the jump moves
only the wall clock (docs/architecture.md, "Clocks").
"""

from __future__ import annotations

import time

import pytest

from checkers.invariants import iter_trace_dir
from tests.server.test_integration import wait_for

pytestmark = pytest.mark.integration


def _fenced(run_dir) -> int:
    """broker_fenced events in the run's node traces (a partial last line of
    a running node is skipped by the reader)."""
    return sum(1 for ev in iter_trace_dir(run_dir) if ev.get("kind") == "broker_fenced")


def test_clock_fault_through_the_local_backend_jumping_the_active_controller_fences_no_broker(tmp_path):
    """Through the harness: the reference db on the local backend (three
    brokers, one controller, the harness's timings), and the cluster
    contract's clock control (``cluster.clock.set_offset``, what the clock
    nemesis calls) jumping the active controller's wall clock by twice
    broker.session.timeout.ms. One voter (a single voter never resigns by
    check quorum), so the controller stays active through the jump and only
    its session clock is under test: no broker is fenced, and every key
    keeps a leader."""
    from harness.config import TestConfig
    from harness.dbs.reference.db import ReferenceDB, protocol_config
    from harness.rundir.state import RunState

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
        obs, status = c.observer, db.endpoints.status
        wait_for(lambda: obs.active_controller() is not None and all(obs.leader_of(k) for k in obs.keys()), 30,
              "an active controller and a leader for every key")
        ctrl = obs.active_controller()
        before = _fenced(run_dir)
        c.clock.set_offset(ctrl, 2 * session_ms)
        # a status read on a loaded machine may time out (None): ask again
        wait_for(lambda: int((status(ctrl) or {}).get("clock_offset_ms", 0)) == 2 * session_ms, 10,
              "the controller's clock offset")
        time.sleep(3 * session_ms / 1000)
        assert _fenced(run_dir) == before
        wait_for(lambda: obs.active_controller() == ctrl and all(obs.leader_of(k) for k in obs.keys()), 10,
              "the same controller active and a leader for every key")
    finally:
        db.teardown()
        state.remove()
