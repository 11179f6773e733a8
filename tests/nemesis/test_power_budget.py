"""A power loss of the generic mix is one unclean failure at a time: it
waits while a broker of an earlier kill or power loss is not back in every
ISR, and refuses to take a majority of a partition's replicas unless its
target asks for a majority (under Kafka's default flush policy both lose
acknowledged writes by design)."""

from __future__ import annotations

import random

from harness.lifecycle.runner import sim_run
from harness.config import TestConfig
from nemesis.faults import expand, make_faults


def _cluster():
    run = sim_run(TestConfig(backend="sim", partitions=2, seed=1), 1)
    assert run.setup()
    return run


def test_a_power_loss_waits_until_an_earlier_kill_is_back_in_every_isr():
    run = _cluster()
    try:
        fs = make_faults(expand(["kill:primaries", "lose-unfsynced:one"]), run.cluster, random.Random(3))
        killed = fs["kill:primaries"].start()["nodes"]
        assert len(killed) == 1
        refused = fs["lose-unfsynced:one"].start()
        assert refused["nodes"] == [] and killed[0] in refused["skipped"]
        fs["kill:primaries"].stop()
        run.sim.run_for(30_000)
        again = fs["lose-unfsynced:one"].start()
        assert "skipped" not in again and len(again["nodes"]) == 1
    finally:
        run.release()


def test_a_power_loss_applies_as_soon_as_the_killed_broker_s_own_metadata_has_it_back_in_every_isr():
    """One look, at the restarted broker's own metadata: no second look a
    few session timeouts later, which in a 15 s run refused every power
    loss drawn after a kill. Before the broker is back it is refused."""
    run = _cluster()
    try:
        fs = make_faults(expand(["kill:primaries", "lose-unfsynced:one"]), run.cluster, random.Random(3))
        (killed,) = fs["kill:primaries"].start()["nodes"]
        run.sim.run_for(1_000)
        fs["kill:primaries"].stop()
        obs, waited = run.cluster.observer, 0
        early = fs["lose-unfsynced:one"].start()
        assert early["nodes"] == [] and killed in early["skipped"]
        while not all(killed in isr for isr in (obs.own_isrs(killed) or {"-": []}).values()):
            run.sim.run_for(100)
            waited += 100
            assert waited < 30_000, "the restarted broker never rejoined its ISRs"
        on_time = fs["lose-unfsynced:one"].start()
        assert "skipped" not in on_time and len(on_time["nodes"]) == 1
    finally:
        run.release()


def test_a_power_loss_takes_a_majority_of_replicas_only_when_asked():
    run = _cluster()
    try:
        fs = make_faults(expand(["lose-unfsynced:isr-followers", "lose-unfsynced:majority"]), run.cluster, random.Random(3))
        refused = fs["lose-unfsynced:isr-followers"].start()
        assert refused["nodes"] == [] and "majority" in refused["skipped"]
        assert len(fs["lose-unfsynced:majority"].start()["nodes"]) == 4
    finally:
        run.release()


def test_a_clean_shutdown_may_not_leave_an_isr_to_a_broker_whose_power_loss_is_not_back_in_sync():
    """Seed 002's "last replica standing": until the controller fences a
    broker that lost power, or its next incarnation registers (refused while
    the old session lives), the ISR still counts its lost log. Terminating
    the other ISR members would leave the partition to it alone, to be
    elected with nothing; so that clean shutdown waits, as a kill does, while
    one that leaves another in-sync member goes ahead."""
    run = _cluster()
    try:
        fs = make_faults(expand(["lose-unfsynced:one", "terminate:minority"]), run.cluster, random.Random(3))
        lost = "n1"
        assert fs["lose-unfsynced:one"]._signal("one", [lost])["nodes"] == [lost]
        fs["lose-unfsynced:one"].stop()
        others = sorted(b for b in run.cluster.nodes.brokers() if b != lost)
        term = fs["terminate:minority"]
        refused = term._signal("minority", others)
        assert refused["nodes"] == [] and lost in refused["skipped"] and "ISR" in refused["skipped"]
        one = term._signal("minority", others[:1])
        assert one["nodes"] == others[:1]
    finally:
        run.release()
