"""A controlled shutdown of a node that runs a controller (seed 004, KRaft
graceful shutdown): a leading controller resigns with EndQuorumEpoch before
the node halts, so another voter is elected at once instead of after the
fetch timeout. In combined mode the broker finishes its controlled shutdown
first (leadership moves away through the still-active controller), then the
controller resigns, as Kafka shuts the broker down before the controller."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import Halt, Send
from reference_impl.core.messages import ControlledShutdownRequest, EndQuorumEpochRequest
from reference_impl.core.raft.testkit import Loop
from reference_impl.core.storage import CLEAN_SHUTDOWN, CleanShutdown

from tests.core.test_node_cluster import TP, build, create_and_produce

FETCH_TIMEOUT = ProtocolConfig().controller_quorum_fetch_timeout_ms


def _active(loop: Loop, voters) -> int | None:
    act = [v for v in voters if v not in loop.down and loop.nodes[v].controller.is_active]
    return act[0] if len(act) == 1 else None


def test_controller_only_node_resigns_before_halting_and_a_new_controller_is_active_quickly():
    loop = Loop(latency=2)
    voters = (101, 102, 103)
    for v in voters:
        loop.add(v, build(v, {"controller"}, voters))
    assert loop.run_until_true(lambda: _active(loop, voters) is not None, limit_ms=30_000)
    old = _active(loop, voters)
    effects = loop.deliver(old, ControlledShutdownRequest())
    assert isinstance(effects[-1], Halt) and loop.nodes[old].halted
    resign = [e for e in effects if isinstance(e, Send) and isinstance(e.msg, EndQuorumEpochRequest)]
    assert {e.dst for e in resign} == set(voters) - {old}
    loop.crash(old)
    t0 = loop.now
    assert loop.run_until_true(lambda: _active(loop, voters) not in (None, old), limit_ms=10_000)
    assert loop.now - t0 < FETCH_TIMEOUT


def test_combined_node_moves_its_leaderships_then_resigns_then_halts():
    loop = Loop(latency=2)
    voters = (1, 2, 3)
    for v in voters:
        loop.add(v, build(v, {"broker", "controller"}, voters))
    create_and_produce(loop, voters, entry=1)
    old = _active(loop, voters)
    node = loop.nodes[old]
    epoch = node.broker.broker_epoch
    n = len(loop.sent)
    loop.deliver(old, ControlledShutdownRequest())
    assert loop.run_until_true(lambda: node.halted, limit_ms=30_000)
    t_halt = loop.now
    # the broker half finished first: clean-shutdown marker, no leadership left on it
    assert loop.disks[old].durable.files.get(CLEAN_SHUTDOWN) == CleanShutdown(epoch)
    assert node.controller.image.partitions[TP].leader != old
    # then the controller half resigned, in the same step as the halt
    resigns = [(t, d) for (t, s, d, m) in loop.sent[n:] if s == old and isinstance(m, EndQuorumEpochRequest)]
    assert {d for _t, d in resigns} == set(voters) - {old} and all(t == t_halt for t, _d in resigns)
    loop.crash(old)
    assert loop.run_until_true(lambda: _active(loop, voters) not in (None, old), limit_ms=10_000)
    assert loop.now - t_halt < FETCH_TIMEOUT
