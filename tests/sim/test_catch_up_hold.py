"""A simulated broker serves no client before its initial metadata catch-up
(``reference_impl/sim/host.py``), as Kafka 4.4's ``BrokerServer.startup``
enables request processing only after it (``BrokerServer.scala`` lines
548-551, 587) and the reference server holds a client's frames until then
(``tests/server/test_catch_up.py``).

Every test restarts broker 2 while every controller is down, so it cannot
re-register and stays behind its own registration until they return."""

from __future__ import annotations

from typing import Any

from reference_impl.core.messages import (
    Errors,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from reference_impl.sim.network import TRANSPORT, ConnectionLost
from reference_impl.sim.script import Scenario

BROKER = 2


def _restarted_without_controllers() -> tuple[Scenario, TopicPartition]:
    """Broker 2 restarted while every controller is down: up, not caught up."""
    s = Scenario(seed=3)
    (tp,) = s.start(replicas=(1, 2, 3))
    sim = s.sim
    sim.kill(BROKER)
    for c in sim.controller_ids:
        sim.kill(c)
    sim.restart(BROKER)
    sim.run_for(500)
    assert sim.is_up(BROKER) and not _caught_up(s)
    return s, tp


def _caught_up(s: Scenario) -> bool:
    node = s.sim.host(BROKER).node
    return node is not None and node.broker is not None and node.broker.metadata_caught_up


def _controllers_return(s: Scenario) -> None:
    for c in s.sim.controller_ids:
        s.sim.restart(c)


def _ask(s: Scenario, make: Any, timeout_ms: int = 60_000) -> list[Any]:
    """Send one request to broker 2; its answer (if any) lands in the list,
    with whether the broker had caught up when it arrived."""
    box: list[Any] = []
    s.client.request(BROKER, make, lambda m: box.append((m, _caught_up(s))), timeout_ms)
    return box


def _produce(tp: TopicPartition, value: int) -> Any:
    return lambda ref: ProduceRequest(ref, tp, 1, 1, (value,), timeout_ms=5000)



def _answers_nothing_held_then_serves(s: Scenario, to_client: list[Any]) -> None:
    """Once the controllers return and the broker has caught up, what it
    dropped stays unanswered, and a new request is served."""
    _controllers_return(s)
    s.wait(lambda: _caught_up(s), 30_000, "broker 2 caught up")
    s.sim.run_for(5000)
    assert to_client == []
    meta = _ask(s, lambda ref: MetadataRequest(ref, None))
    s.wait(lambda: bool(meta), 1000, "a metadata answer once caught up")
    assert isinstance(meta[0][0], MetadataResponse)

def test_a_restarted_broker_answers_no_client_request_before_it_has_replayed_its_own_registration():
    s, tp = _restarted_without_controllers()
    meta = _ask(s, lambda ref: MetadataRequest(ref, None))
    prod = _ask(s, _produce(tp, 7))
    s.sim.run_for(10_000)
    assert meta == [] and prod == [], "a broker behind its registration answered a client"
    assert len(s.sim.host(BROKER).held) == 2

    _controllers_return(s)
    s.wait(lambda: bool(meta) and bool(prod), 30_000, "the held requests' answers")
    (m, m_caught_up), = meta
    (p, p_caught_up), = prod
    assert isinstance(m, MetadataResponse) and isinstance(p, ProduceResponse)
    assert m_caught_up and p_caught_up
    assert s.sim.host(BROKER).held == []


def test_held_client_requests_are_answered_in_the_order_they_arrived():
    s, tp = _restarted_without_controllers()
    answers: list[str] = []
    for i, make in enumerate([lambda ref: MetadataRequest(ref, None), _produce(tp, 1),
                              lambda ref: MetadataRequest(ref, (tp.topic,)), _produce(tp, 2)]):
        s.client.request(BROKER, make, lambda m, i=i: answers.append(f"{i}:{type(m).__name__}"), 60_000)
        s.sim.run_for(50)
    s.sim.run_for(2000)
    assert answers == []

    _controllers_return(s)
    s.wait(lambda: len(answers) == 4, 30_000, "the four answers")
    assert answers == ["0:MetadataResponse", "1:ProduceResponse", "2:MetadataResponse", "3:ProduceResponse"]


def test_a_broker_killed_while_holding_client_requests_drops_them():
    s, tp = _restarted_without_controllers()
    to_client = s.tap_messages(lambda src, dst, m: src == BROKER and dst == "script")
    prod = _ask(s, _produce(tp, 7))
    s.sim.run_for(1000)
    assert prod == [] and len(s.sim.host(BROKER).held) == 1

    s.sim.kill(BROKER)
    s.wait(lambda: bool(prod), 1000, "the client to hear the close")
    assert prod == [(ConnectionLost(TRANSPORT), False)]
    assert s.sim.host(BROKER).held == []

    _controllers_return(s)
    s.sim.restart(BROKER)
    s.wait(lambda: _caught_up(s), 30_000, "broker 2 caught up again")
    s.sim.run_for(5000)
    assert [type(m).__name__ for _, _, m in to_client] == ["ConnectionLost"], "a dropped request was answered"


def test_a_client_that_gave_up_on_a_held_request_is_never_answered_for_it():
    """Its request timed out, so it closed the connection: the broker forgets
    what that connection held, as the server skips a closed session."""
    s, tp = _restarted_without_controllers()
    to_client = s.tap_messages(lambda src, dst, m: src == BROKER and dst == "script")
    prod = _ask(s, _produce(tp, 7), timeout_ms=2000)
    s.wait(lambda: bool(prod), 3000, "the request's timeout")
    assert prod == [(None, False)] and s.sim.host(BROKER).held == []

    _answers_nothing_held_then_serves(s, to_client)


def test_a_client_process_that_dies_takes_its_held_requests_with_it():
    """``--crash-clients``: its connections die with it, so the broker never
    handles what it held of them, though the fresh process is served."""
    s, tp = _restarted_without_controllers()
    to_client = s.tap_messages(lambda src, dst, m: src == BROKER and dst == "script")
    _ask(s, _produce(tp, 7))
    s.sim.run_for(500)
    assert len(s.sim.host(BROKER).held) == 1
    s.client.cancel_all()
    assert s.sim.host(BROKER).held == []

    _answers_nothing_held_then_serves(s, to_client)


def test_a_paused_broker_behind_its_registration_still_holds_what_it_queued():
    """SIGSTOP/SIGCONT: the kernel queues the request while paused; resumed
    and still not caught up, the broker holds it rather than answering."""
    s, tp = _restarted_without_controllers()
    s.sim.pause(BROKER)
    meta = _ask(s, lambda ref: MetadataRequest(ref, None))
    s.sim.run_for(1000)
    s.sim.resume(BROKER)
    s.sim.run_for(1000)
    assert meta == [] and len(s.sim.host(BROKER).held) == 1

    _controllers_return(s)
    s.wait(lambda: bool(meta), 30_000, "the held answer")
    assert isinstance(meta[0][0], MetadataResponse) and meta[0][1]


def test_a_caught_up_broker_answers_clients_at_once():
    s = Scenario(seed=3)
    (tp,) = s.start(replicas=(1, 2, 3))
    assert _caught_up(s) and not s.sim.host(BROKER).holding
    meta = _ask(s, lambda ref: MetadataRequest(ref, None))
    s.sim.run_for(50)
    assert meta and isinstance(meta[0][0], MetadataResponse) and meta[0][0].topics
    assert Errors.NONE == meta[0][0].topics[0].partitions[0].error
