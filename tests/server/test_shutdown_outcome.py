"""How a SIGTERM ended, on real node processes through the local backend
(``LocalNodes.last_shutdown_clean``, what the nemesis's ledger of unclean
shutdowns reads): the judgement is the clean-shutdown marker the broker left,
and the restarted broker reads the same marker to tell the controller whether
its shutdown was clean (KIP-966: the registration's previous broker epoch,
``clean_start`` in its status). The two must agree, and an ordinary
controlled shutdown is clean."""

from __future__ import annotations


import pytest

from nemesis import partition as grudges
from tests.server.test_integration import wait_for

pytestmark = pytest.mark.integration


def _terminate_and_restart(tmp_path, cut_from_controller: bool, protocol: dict | None = None) -> tuple[bool | None, bool]:
    """SIGTERM n1 (cut from the controller if asked, so its controlled
    shutdown is never answered), then start it again: the backend's
    judgement of the shutdown, and the restarted broker's own."""
    from harness.config import TestConfig
    from harness.dbs.reference.db import ReferenceDB
    from harness.rundir.state import RunState

    run_dir = tmp_path / "run"
    (run_dir / "nodes").mkdir(parents=True)
    state = RunState.create(tmp_path, "shutdown-outcome", run_dir)
    db = ReferenceDB(TestConfig(partitions=1, seed=1, controllers=1, protocol=protocol or {}), run_dir, state)
    try:
        db.setup()
        c = db.cluster
        assert c is not None
        status = db.endpoints.status
        wait_for(lambda: c.observer.broker_epoch("n1") is not None, 30, "n1 registered")
        if cut_from_controller:
            c.net.cut(grudges.complete_grudge([["n1"], c.nodes.controllers()]))
        c.nodes.terminate("n1")  # returns at once; the grace runs beside (as in the simulator)
        wait_for(lambda: c.nodes.last_shutdown_clean("n1") is not None, 45, "n1's shutdown judged")
        judged = c.nodes.last_shutdown_clean("n1")
        c.net.cut([])
        c.nodes.start("n1")
        wait_for(lambda: (status("n1") or {}).get("clean_start") is not None, 30, "n1's status after restart")
        return judged, bool(status("n1")["clean_start"])
    finally:
        db.teardown()
        state.remove()


def test_a_controlled_shutdown_that_wrote_its_marker_is_judged_clean_as_the_broker_reads_it(tmp_path):
    judged, read = _terminate_and_restart(tmp_path, cut_from_controller=False)
    assert judged is True and read is True


@pytest.mark.slow
def test_a_controlled_shutdown_stuck_past_the_grace_is_judged_unclean_as_the_broker_reads_it_kip966(tmp_path):
    """Cut from the controller, with a request timeout (the controlled
    shutdown's own limit) longer than the server's 30 s grace: the grace
    ends the shutdown before the marker is written, the backend judges it
    unclean, and the restarted broker reads no marker either (about 35 s)."""
    judged, read = _terminate_and_restart(tmp_path, cut_from_controller=True, protocol={"request_timeout_ms": 120_000})
    assert judged is False and read is False
