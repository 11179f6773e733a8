"""The simulator's observer names a partition's leader as Kafka's Metadata
does: the committed partition record, so a paused or killed leader stays
named until the controller moves the leadership, as the real runtimes'
observers (``harness.dbs.parts.MetadataObserver``) read it. A state-named
target (``primaries``, ``busiest-leader``) then resolves to the same node on
every runtime (``reference_impl/sim/control.py`` ``SimObserver.leader_of``)."""

from __future__ import annotations

from reference_impl.sim.control import SimObserver
from reference_impl.sim.script import Scenario


def _leader_stopped(kill: bool) -> tuple[Scenario, SimObserver, str, int]:
    s = Scenario(seed=3)
    (tp,) = s.start(replicas=(1, 2, 3))
    key, leader = str(tp), s.sim.leader_of(tp)
    obs = SimObserver(s.sim, [key])
    assert obs.leader_of(key) == f"n{leader}"
    (s.sim.kill if kill else s.sim.pause)(leader)
    return s, obs, key, leader


def test_a_leader_stopped_stays_named_until_the_controller_moves_its_leadership() -> None:
    s, obs, key, leader = _leader_stopped(kill=False)
    s.sim.run_for(1000)  # within the broker session timeout: not fenced yet
    assert not s.sim.is_up(leader) and obs.leader_of(key) == f"n{leader}"
    s.sim.run_for(15_000)  # fenced: the controller elects another ISR member
    assert obs.leader_of(key) not in (None, f"n{leader}")


def test_a_killed_leader_stays_named_until_the_controller_moves_its_leadership() -> None:
    s, obs, key, leader = _leader_stopped(kill=True)
    s.sim.run_for(1000)
    assert obs.leader_of(key) == f"n{leader}"
    s.sim.run_for(15_000)
    assert obs.leader_of(key) not in (None, f"n{leader}")
