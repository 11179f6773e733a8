"""A SIGTERM is a clean shutdown only if it ends as one. A controlled
shutdown still running when the grace period ends is killed before it wrote
its clean-shutdown marker (Kafka's ``LogManager.shutdown`` writes
``.kafka_cleanshutdown``; the next start reads it for the registration's
previous broker epoch), so the controller counts the restart as an unclean
shutdown (KIP-966) and the nemesis's budget of one unclean failure at a time
must count it too: a power loss waits until that broker is back in sync."""

from __future__ import annotations

import random

from harness.lifecycle.runner import sim_run
from harness.config import TestConfig
from nemesis import partition as grudges
from nemesis.faults import expand, make_faults
from reference_impl.sim.control import SHUTDOWN_GRACE_MS


def _cluster():
    run = sim_run(TestConfig(backend="sim", partitions=2, seed=1), 1)
    assert run.setup()
    return run


def test_a_grace_kill_that_ends_a_stuck_clean_shutdown_counts_as_an_unclean_shutdown_kip966():
    run = _cluster()
    try:
        c = run.cluster
        fs = make_faults(expand(["terminate:one", "lose-unfsynced:one"]), c, random.Random(3))
        stuck = "n1"
        # cut from every controller, its controlled shutdown is never answered
        c.net.cut(grudges.complete_grudge([[stuck], c.nodes.controllers()]))
        assert fs["terminate:one"]._signal("one", [stuck])["nodes"] == [stuck]
        run.sim.run_for(SHUTDOWN_GRACE_MS + 1_000)
        c.net.cut([])
        assert stuck in c.nodes.dead_nodes()
        assert not run.sim.hosts[1].halted  # killed by the grace, not halted by its own shutdown
        assert c.nodes.last_shutdown_clean(stuck) is False
        refused = fs["lose-unfsynced:one"]._signal("one", ["n2"])
        assert refused["nodes"] == [] and stuck in refused["skipped"] and "unclean" in refused["skipped"]
    finally:
        run.release()


def test_a_clean_shutdown_that_wrote_its_marker_leaves_the_power_loss_budget_alone():
    """While it runs, a controlled shutdown may still end in the grace's
    kill, so a power loss waits; once the broker went down with its marker
    it is not an unclean shutdown, and the power loss goes ahead."""
    run = _cluster()
    try:
        c = run.cluster
        fs = make_faults(expand(["terminate:one", "lose-unfsynced:one"]), c, random.Random(3))
        assert fs["terminate:one"]._signal("one", ["n1"])["nodes"] == ["n1"]
        waiting = fs["lose-unfsynced:one"]._signal("one", ["n2"])
        assert waiting["nodes"] == [] and "n1" in waiting["skipped"] and "grace" in waiting["skipped"]
        run.sim.run_for(5_000)
        assert "n1" in c.nodes.dead_nodes() and run.sim.hosts[1].halted
        assert c.nodes.last_shutdown_clean("n1") is True
        assert fs["lose-unfsynced:one"]._signal("one", ["n2"])["nodes"] == ["n2"]
    finally:
        run.release()


def test_a_rolling_restarts_grace_kill_counts_as_an_unclean_shutdown_kip966():
    """The roll sends its SIGTERMs through the same ledger: one stuck past the
    grace is killed and counted, so a power loss waits for it."""
    run = _cluster()
    try:
        c = run.cluster
        fs = make_faults(expand(["rolling-restart:brokers", "lose-unfsynced:one"]), c, random.Random(3))
        c.net.cut(grudges.complete_grudge([["n1"], c.nodes.controllers()]))
        fs["rolling-restart:brokers"].roll.start(["n1"])
        run.sim.run_for(SHUTDOWN_GRACE_MS + 1_000)
        assert c.nodes.last_shutdown_clean("n1") is False
        refused = fs["lose-unfsynced:one"]._signal("one", ["n2"])
        assert refused["nodes"] == [] and "n1" in refused["skipped"] and "unclean" in refused["skipped"]
    finally:
        run.release()
