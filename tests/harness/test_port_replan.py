"""A port chosen for a run and taken by someone else before the run's proxy
binds it (a parallel run planned the same free port a moment earlier): the
proxy says so by errno, and the run plans again with fresh ports instead of
failing. Real proxy processes, real sockets; the test only takes the port
at the moment a parallel run would."""

from __future__ import annotations

import socket

import pytest

from harness.config import TestConfig
from harness.dbs.reference import db as reference_db
from harness.dbs.reference.db import ReferenceDB
from harness.dbs.reference.local import PortTaken, ProxiedCluster
from harness.errors import HarnessError
from harness.rundir.state import RunState

pytestmark = pytest.mark.integration


def _take(port: int) -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def _state(tmp_path, name: str):
    run_dir = tmp_path / name
    (run_dir / "nodes").mkdir(parents=True)
    return run_dir, RunState.create(tmp_path, name, run_dir)


def test_a_planned_port_taken_before_the_proxy_binds_it_is_reported_as_taken(tmp_path):
    run_dir, state = _state(tmp_path, "taken")
    cfg = TestConfig(partitions=1, seed=1, controllers=1)
    c = ProxiedCluster.for_run(cfg.layout(), run_dir, state)
    sock = _take(c.client_ports["n2"])
    try:
        with pytest.raises(PortTaken, match="address already in use"):
            c.start_proxy()
        assert c.proxy_proc is not None and c.proxy_proc.poll() is not None  # nothing left running
    finally:
        sock.close()
        c.teardown()
        state.remove()


def test_a_run_whose_port_was_taken_meanwhile_plans_again_and_comes_up(tmp_path, monkeypatch):
    """The first plan's client port of n1 is taken right after planning, as
    a parallel run's proxy would take it; the run comes up on a second plan
    that avoids it."""
    run_dir, state = _state(tmp_path, "replan")
    taken: list[socket.socket] = []
    plan = ProxiedCluster.for_run.__func__  # the real planning, bound to the class below

    def plan_then_lose_a_port(cls, *a, **kw):
        c = plan(cls, *a, **kw)
        if not taken:
            taken.append(_take(c.client_ports["n1"]))
        return c

    monkeypatch.setattr(ProxiedCluster, "for_run", classmethod(plan_then_lose_a_port))
    db = ReferenceDB(TestConfig(partitions=1, seed=1, controllers=1), run_dir, state)
    try:
        db.setup()
        assert db.local is not None
        first = taken[0].getsockname()[1]
        assert db.local.client_ports["n1"] != first
        assert first not in [int(a.rsplit(":", 1)[1]) for a in db.local.client_bootstrap().split(",")]
    finally:
        for s in taken:
            s.close()
        db.teardown()
        state.remove()


def test_a_taken_port_the_user_named_with_base_port_is_their_error_not_replanned(tmp_path, monkeypatch):
    run_dir, state = _state(tmp_path, "named")
    taken: list[socket.socket] = []
    plan = ProxiedCluster.for_run.__func__
    calls = []

    def plan_then_lose_a_port(cls, *a, **kw):
        c = plan(cls, *a, **kw)
        calls.append(c)
        taken.append(_take(c.control_port))
        return c

    monkeypatch.setattr(ProxiedCluster, "for_run", classmethod(plan_then_lose_a_port))
    base = 12_000 + (hash(str(tmp_path)) % 15_000)
    db = ReferenceDB(TestConfig(partitions=1, seed=1, controllers=1, base_port=base), run_dir, state)
    try:
        with pytest.raises(HarnessError, match="proxy failed to start"):
            db.setup()
        assert len(calls) == 1
        assert reference_db.PLAN_ATTEMPTS > 1
    finally:
        for s in taken:
            s.close()
        db.teardown()
        state.remove()
