"""A crash of the reference implementation is a finding, not a harness
error: the simulator records the node's exception with its traceback, takes
that node down, the invariant monitor counts a ``node-crash`` violation, and
the rest of the cluster runs on.

The crash is a real one: a forged fetch answer asks a KRaft follower to
truncate committed metadata entries, which the replica refuses (seed 004,
Leader Completeness; Kafka's Raft client refuses it the same way)."""

from __future__ import annotations

from reference_impl.core.messages import Errors, RaftFetchRequest, RaftFetchResponse
from reference_impl.sim.host import DOWN, UP
from reference_impl.sim.script import Scenario


def test_core_exception_is_recorded_as_a_node_crash_and_the_cluster_runs_on() -> None:
    s = Scenario(seed=5)
    (tp,) = s.start(replicas=(1, 2, 3))
    leader = s.sim.controller_leader[1]
    follower = next(c for c in s.sim.controller_ids if c != leader)
    fetches = s.tap_messages(lambda src, dst, m: src == follower and isinstance(m, RaftFetchRequest))
    s.sim.run_for(1500)
    assert fetches, "the follower fetches from the leader"
    req = fetches[-1][2]
    assert req.fetch_offset > 0  # it holds committed metadata entries
    s.sim.net.send(leader, follower, RaftFetchResponse(leader, req.epoch, Errors.NONE, req.correlation_id,
                                                      req.fetch_offset, diverging_epoch=(req.last_fetched_epoch, 0)))
    s.sim.run_for(100)

    (crash,) = s.sim.crashes
    assert crash.node == follower
    assert crash.error.startswith("CommittedTruncation: diverging-epoch truncation to offset 0 is below the high watermark")
    assert "_truncate_to" in crash.traceback  # the node's own frames, not the harness's
    assert s.sim.host(follower).state == DOWN
    assert s.monitor.counts.get("node-crash") == 1
    assert [e["node"] for e in s.trace("node_crash")] == [follower]

    # two controllers of three still form the quorum: writes go on
    assert all(s.sim.host(n).state == UP for n in s.sim.node_ids if n != follower)
    r = s.produce(1, tp, [7], acks=-1)
    assert r.error == Errors.NONE
