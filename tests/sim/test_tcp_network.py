"""The simulated network answers each fault as TCP does
(``reference_impl/sim/network.py``): a message that meets a cut is held on
its connection and delivered after the heal, in order, at the connection's
next retransmission; a connection its owner gives up on (a request timeout,
a reset, a dead process) loses what it held, and a client's requests on it
fail at once, as Kafka's NetworkClient and librdkafka fail them."""

from __future__ import annotations

import random

from reference_impl.core.messages import (
    BrokerHeartbeatRequest,
    Errors,
    ProduceResponse,
    RaftFetchRequest,
    RaftFetchResponse,
)
from reference_impl.core.raft.replica import FETCH_RESEND_MS
from reference_impl.sim.events import EventLoop
from reference_impl.sim.network import (
    TIMED_OUT,
    TRANSPORT,
    ConnectionLost,
    LinkProfile,
    Network,
    first_retransmission,
)
from reference_impl.sim.script import Scenario


def _net(min_ms: int = 1) -> tuple[EventLoop, Network, dict[object, list]]:
    loop = EventLoop()
    net = Network(loop, random.Random(1), LinkProfile(min_ms, 0.0))
    inbox: dict[object, list] = {1: [], 2: [], "c0": []}
    for ep in inbox:
        net.attach(ep, lambda src, msg, ep=ep: inbox[ep].append(msg))
    return loop, net, inbox


def _fetch(corr: int) -> RaftFetchRequest:
    return RaftFetchRequest(1, 1, 0, 0, corr)


# -- the network alone -------------------------------------------------------------------------------


def test_an_arrival_goes_to_the_receiver_attached_when_it_arrives():
    """Each link keeps its destination's receiver (network._Fifo), and
    attach updates every link to the endpoint: a message reaches whoever is
    attached when it arrives, as a lookup by endpoint at arrival did; one
    sent before its endpoint was attached at all arrives once it is."""
    loop, net, inbox = _net(min_ms=5)
    net.send(1, 2, "first")
    loop.run_until(5)
    late: list = []
    net.send(1, 2, "sent to the old receiver")
    net.attach(2, lambda src, msg: late.append((src, msg)))  # a restart re-attaches, say
    net.send(1, "c9", "to nobody yet")
    net.send(2, "c9", "from another link")
    net.attach("c9", lambda src, msg: late.append((src, msg)))
    loop.run_until(20)
    assert inbox[2] == ["first"]
    assert late == [(1, "sent to the old receiver"), (1, "to nobody yet"), (2, "from another link")]
    net.send(1, "c8", "never attached")
    loop.run_until(40)
    assert net.dropped == 1 and net.delivered == 4


def test_a_hosts_sends_by_node_id_share_the_networks_link_and_its_fifo_order():
    """A host keeps its links to other nodes by node id (``Host._links``),
    each the network's own link (``Network.link``): what the host sends
    queues behind what was sent on the link another way (``Network.send``,
    as a dead node's FIN is), so the link stays one FIFO, as one TCP
    connection per peer is (the module docstring)."""
    from reference_impl.core.config import ProtocolConfig
    from reference_impl.core.effects import Send
    from reference_impl.sim.env import NodeEnv, TraceSink
    from reference_impl.sim.host import Host

    loop, net, inbox = _net()
    host = Host(frozenset({"broker"}), NodeEnv(1, loop, net, ProtocolConfig(), (100,), random.Random(2), TraceSink()))
    host.apply([Send(2, "by id, first")])
    net.set_link(1, 2, LinkProfile(50, 0.0))
    net.send(1, 2, "slow")  # due at 50
    net.set_link(1, 2, LinkProfile(1, 0.0))
    host.apply([Send(2, "by id, after the slow one")])  # due at 1 on its own: FIFO keeps it behind
    loop.run_until(49)
    assert inbox[2] == ["by id, first"]
    loop.run_until(50)
    assert inbox[2] == ["by id, first", "slow", "by id, after the slow one"]


def test_retransmissions_wait_the_minimum_rto_and_then_twice_the_last_wait():
    assert [first_retransmission(0, t) for t in (0, 200, 201, 601, 1401)] == [200, 200, 600, 1400, 3000]
    assert first_retransmission(0, 10**9) - first_retransmission(0, 10**9 - 130_000) <= 120_000


def test_a_message_held_by_a_cut_arrives_after_the_heal_at_the_next_retransmission_in_order():
    loop, net, inbox = _net()
    net.cut({(1, 2)})
    for i in range(3):
        net.send(1, 2, i)  # arrives at 1: the cut holds it from then
    loop.run_until(1000)
    net.heal()
    net.send(1, 2, "after the heal")  # queues behind what the connection holds
    loop.run_until(1 + 1400)  # retransmissions at 1 + 200, + 600, + 1400
    assert inbox[2] == []
    loop.run_until(1 + 1400 + 1)  # and the link's latency
    assert inbox[2] == [0, 1, 2, "after the heal"] and net.dropped == 0 and net.held() == 0


def test_a_link_cut_again_before_its_retransmission_holds_on_until_the_next_heal():
    loop, net, inbox = _net()
    net.cut({(1, 2)})
    net.send(1, 2, "x")
    loop.run_until(100)
    net.heal()  # the retransmission is due at 201
    net.cut({(1, 2)})
    loop.run_until(700)
    assert inbox[2] == [] and net.held() == 1
    net.heal()
    loop.run_until(1 + 1400 + 1)
    assert inbox[2] == ["x"]


def test_a_connection_held_past_its_request_timeout_loses_what_it_held_and_later_sends_go_on_a_new_one():
    """The quorum's channel lives the raft client's request timeout: a fetch
    held longer than that is gone with its connection (the core sends it
    again on its own timer), while a message of the other channel held as
    long is delivered; the fetch sent after the first connection ended is,
    each connection at its own next retransmission (the second fetch's at
    1501 + 600, the other channel's at 1 + 3000)."""
    loop, net, inbox = _net()
    net.cut({(1, 2)})
    net.send(1, 2, _fetch(1))
    net.send(1, 2, "rpc")
    loop.run_until(FETCH_RESEND_MS + 500)
    net.send(1, 2, _fetch(2))
    loop.run_until(FETCH_RESEND_MS + 800)
    net.heal()
    loop.run_until(60_000)
    assert [m if isinstance(m, str) else m.correlation_id for m in inbox[2]] == [2, "rpc"]
    assert net.dropped == 1


def test_a_heartbeat_held_by_a_cut_is_given_up_after_the_heartbeat_interval_so_the_first_one_after_the_heal_arrives_at_once():
    """Kafka's broker sends registrations and heartbeats on a connection of
    their own whose request timeout is ``broker.heartbeat.interval.ms``
    (Kafka 4.4.0: ``BrokerServer.scala`` line 449,
    ``NodeToControllerChannelManagerImpl.java`` line 126): every heartbeat
    of a 15 s cut is gone with its connection, and the first one sent after
    the heal arrives at the link's latency, while an RPC message held as
    long waits for its connection's next retransmission (1 + 25,400)."""
    loop = EventLoop()
    net = Network(loop, random.Random(1), LinkProfile(1, 0.0), heartbeat_interval_ms=500)
    inbox: list = []
    net.attach(2, lambda src, msg: inbox.append(msg))
    net.cut({(1, 2)})
    net.send(1, 2, "rpc")
    for t in range(0, 15_000, 1000):
        loop.run_until(t)
        net.send(1, 2, BrokerHeartbeatRequest(1, 7, t))
    loop.run_until(15_000)
    net.heal()
    net.send(1, 2, BrokerHeartbeatRequest(1, 7, 15_000))
    loop.run_until(15_001)
    assert inbox == [BrokerHeartbeatRequest(1, 7, 15_000)] and net.dropped == 15
    loop.run_until(1 + 25_400 + 1)
    assert inbox[-1] == "rpc" and net.held() == 0


def test_a_connection_whose_request_timeout_comes_before_its_retransmission_ends_after_the_heal():
    loop, net, inbox = _net()
    net.cut({(1, 2)})
    net.send(1, 2, _fetch(1))  # held from 1; retransmissions at 201, 601, 1401; ended at 1001
    loop.run_until(700)
    net.heal()
    net.send(1, 2, _fetch(2))  # behind it on the same connection, so ended with it
    loop.run_until(1001)
    net.send(1, 2, _fetch(3))  # a new connection
    loop.run_until(3000)
    assert [m.correlation_id for m in inbox[2]] == [3] and net.dropped == 2


def test_a_connections_request_timeout_runs_on_its_owners_wall_clock():
    """Seed 59: node 1 sent a fetch across a cut with its clock 54.9 s ahead,
    and the heal came with the clock set back. Kafka's NetworkClient times
    the request out on the wall clock, so the connection lives on and the
    fetch is delivered at its retransmission; a clock jumped forward ends
    the connection at once. An answer travels on the connection of the
    endpoint it answers, so its owner's clock is the receiver's."""
    offsets = {1: 0, 2: 0}
    loop = EventLoop()
    net = Network(loop, random.Random(1), LinkProfile(1, 0.0), wall=lambda ep: loop.now + offsets.get(ep, 0))
    inbox: dict[object, list] = {1: [], 2: []}
    for ep in inbox:
        net.attach(ep, lambda src, msg, ep=ep: inbox[ep].append(msg))
    offsets[1] = 54_912
    net.cut({(1, 2), (2, 1)})
    net.send(1, 2, _fetch(1))  # held from 1 on node 1's clock
    loop.run_until(FETCH_RESEND_MS - 40)
    offsets[1] = 0  # set back just before the heal
    net.heal()
    loop.run_until(FETCH_RESEND_MS + 2_000)
    assert [m.correlation_id for m in inbox[2]] == [1]
    net.cut({(1, 2), (2, 1)})
    net.send(1, 2, _fetch(2))
    net.send(2, 1, RaftFetchResponse(2, 1, 0, 2, 0))  # node 1's connection: its clock
    loop.run_until(loop.now + 100)
    offsets[1] = 10_000  # node 1's clock jumps: its requests on the wire have timed out
    net.heal()
    loop.run_until(loop.now + 5_000)
    assert [m.correlation_id for m in inbox[2]] == [1] and inbox[1] == [] and net.dropped == 2


def test_a_closed_connection_never_delivers_what_it_held_either_way():
    loop, net, inbox = _net()
    net.cut({("c0", 1), (1, "c0")})
    net.send("c0", 1, "request")
    net.send(1, "c0", "answer")
    loop.run_until(500)
    net.close("c0", 1)
    net.heal()
    net.send("c0", 1, "on a new connection")
    loop.run_until(5000)
    assert inbox[1] == ["on a new connection"] and inbox["c0"] == [] and net.dropped == 2


def test_a_reject_cut_resets_the_connection_and_its_sender_hears_it_at_once():
    loop, net, inbox = _net()
    heard: list[tuple[object, str, int]] = []
    net.watch("c0", lambda peer: True, lambda peer, error: heard.append((peer, error, loop.now)))
    net.reject = True
    net.cut({("c0", 1)})
    net.send("c0", 1, "request")
    loop.run_until(1000)
    net.heal()
    loop.run_until(5000)
    assert heard == [(1, TRANSPORT, 1)] and inbox[1] == [] and net.held() == 0


def test_a_dead_process_loses_what_its_connections_held_and_its_clients_get_its_fin():
    loop, net, inbox = _net()
    net.watch("c0", lambda peer: peer == 1, lambda peer, error: None)
    net.cut({(2, 1)})
    net.send(2, 1, "held for 1")
    loop.run_until(10)
    net.send(1, "c0", "sent before it died")
    net.endpoint_down(1)
    net.heal()
    loop.run_until(5000)
    assert inbox[1] == [] and inbox["c0"] == ["sent before it died", ConnectionLost(TRANSPORT)]


# -- clients and nodes -------------------------------------------------------------------------------


def _started() -> tuple[Scenario, object]:
    s = Scenario(seed=3)
    tp = s.start()[0]
    return s, tp


def test_a_request_in_flight_across_a_cut_is_delivered_after_the_heal():
    """A produce sent while the client is cut from the leader is not lost:
    the leader appends it once the link heals and the client hears the
    answer long before its request timeout."""
    s, tp = _started()
    leader = s.sim.leader_of(tp)
    s.sim.cut({("script", leader), (leader, "script")})
    box = s.produce_async(leader, tp, [7], acks=1, timeout_ms=9000)
    s.sim.run_for(2000)
    assert box == []
    healed = s.sim.now
    s.sim.heal()
    s.wait(lambda: bool(box), 10_000, "the produce's answer")
    assert isinstance(box[0], ProduceResponse) and box[0].error == Errors.NONE
    assert s.sim.now - healed <= first_retransmission(0, 2000) - 2000 + 10


def test_a_reset_connection_fails_its_requests_at_once():
    """--net-cut reject: the client's produce meets the cut, the connection
    is reset, and the request fails then with librdkafka's transport error,
    not after its timeout."""
    s, tp = _started()
    leader = s.sim.leader_of(tp)
    s.sim.net.reject = True
    s.sim.cut({("script", leader), (leader, "script")})
    sent = s.sim.now
    box = s.produce_async(leader, tp, [7], acks=1, timeout_ms=9000)
    s.wait(lambda: bool(box), 10_000, "the produce's failure")
    assert box == [ConnectionLost(TRANSPORT)] and s.sim.now - sent < 10


def test_a_killed_node_fails_the_requests_in_flight_to_it_at_once():
    """An acks=all produce parked at the leader (its followers cut off) fails
    as the leader's process dies: its kernel closes the connection."""
    s, tp = _started()
    leader = s.sim.leader_of(tp)
    followers = [b for b in s.sim.broker_ids if b != leader]
    s.sim.cut({(f, leader) for f in followers} | {(leader, f) for f in followers})
    box = s.produce_async(leader, tp, [7], acks=-1, timeout_ms=9000)
    s.sim.run_for(500)
    assert box == []
    killed = s.sim.now
    s.sim.kill(leader)
    s.wait(lambda: bool(box), 10_000, "the produce's failure")
    assert box == [ConnectionLost(TRANSPORT)] and s.sim.now - killed < 10


def test_a_timed_out_request_closes_its_connection_so_what_it_held_never_arrives():
    """The client gives up on a produce held by a cut: its connection is
    closed, so the produce is not appended when the link heals, and a
    second request in flight to the node fails with the timeout's error."""
    s, tp = _started()
    leader = s.sim.leader_of(tp)
    produced = s.tap_messages(lambda src, dst, msg: dst == leader and type(msg).__name__ == "ProduceRequest")
    s.sim.cut({("script", leader), (leader, "script")})
    first = s.produce_async(leader, tp, [7], acks=1, timeout_ms=500)  # its request times out at 1.5 s
    s.sim.run_for(100)
    second = s.produce_async(leader, tp, [8], acks=1, timeout_ms=9000)
    s.wait(lambda: bool(first), 5000, "the timeout")
    assert first == [None] and second == [ConnectionLost(TIMED_OUT)]
    s.sim.heal()
    s.sim.run_for(5000)
    assert len(produced) == 2 and s.leo(leader, tp) <= 0 and s.sim.net.held() == 0


def test_a_crashed_clients_held_request_dies_with_its_connections():
    """A client process that dies mid-request (``--crash-clients``) takes its
    connections with it: the produce a cut held is not appended after the
    heal, though the fresh process on the same endpoint is served."""
    s, tp = _started()
    leader = s.sim.leader_of(tp)
    s.sim.cut({("script", leader), (leader, "script")})
    box = s.produce_async(leader, tp, [7], acks=1, timeout_ms=9000)
    s.sim.run_for(300)
    s.client.cancel_all()
    s.sim.heal()
    s.sim.run_for(3000)
    assert box == [] and s.leo(leader, tp) <= 0 and s.sim.net.held() == 0
    r = s.produce(leader, tp, [8], acks=1)
    assert r.error == Errors.NONE and r.base_offset == 0
