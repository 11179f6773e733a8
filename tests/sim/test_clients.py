"""The simulated producers decide ok / fail / info like librdkafka
(notes/kafka-wire.md, "Client behaviour that decides ok / fail / info")."""

from __future__ import annotations

from reference_impl.core.messages import Errors
from reference_impl.sim.clients import ClientConfig, Workload, sim_history
from reference_impl.sim.script import Scenario


def _workload(s: Scenario, tps: list, **cfg: int) -> Workload:
    return Workload(s.sim, sim_history(s.sim), tps, ClientConfig(**cfg))


def _leader_alone_in_isr(seed: int) -> tuple[Scenario, object]:
    """Broker 1 leads a partition (RF 3, min ISR 2) whose ISR has shrunk to
    itself: it is cut from 2 and 3, and an acks=1 write made it notice."""
    s = Scenario(seed=seed)
    (tp,) = s.start(replicas=(1, 2, 3))
    s.isolate(1, from_=[2, 3])
    assert s.produce(1, tp, [0], acks=1).error == Errors.NONE
    s.wait(lambda: s.leader_isr(1, tp) == ([1], "committed"), what="ISR below min ISR")
    return s, tp


def test_not_enough_replicas_without_retries_is_a_definite_fail() -> None:
    s, tp = _leader_alone_in_isr(seed=11)
    wl = _workload(s, [tp], retries=0)
    p = wl.add_producer("all")
    done: list = []
    p.send(tp, 7, done=lambda t, v: done.append((t, v)))
    s.wait(lambda: bool(done), what="the send completing")
    assert done == [("fail", "NOT_ENOUGH_REPLICAS")]
    ops = wl.history.ops
    assert [(o.type, o.f, o.extra["acks"]) for o in ops] == [("invoke", "send", "all"), ("fail", "send", "all")]


def test_not_enough_replicas_retried_until_the_delivery_timeout_is_fail_when_never_ambiguous() -> None:
    s, tp = _leader_alone_in_isr(seed=12)
    wl = _workload(s, [tp], retries=3)
    p = wl.add_producer("all")
    done: list = []
    p.send(tp, 8, done=lambda t, v: done.append((t, v)))
    s.wait(lambda: bool(done), what="the send completing")
    assert done == [("fail", "NOT_ENOUGH_REPLICAS")]


def test_unreachable_cluster_ends_in_info_after_the_delivery_timeout_and_a_new_process() -> None:
    s = Scenario(seed=13)
    (tp,) = s.start(replicas=(1, 2, 3))
    wl = _workload(s, [tp], delivery_timeout_ms=4000, request_timeout_ms=1000)
    p = wl.add_producer("all")
    wl.add_consumer()
    s.sim.cut({(p.name, b) for b in s.sim.broker_ids})
    done: list = []
    t0 = s.sim.now
    p.send(tp, 9, done=lambda t, v: done.append((t, v)))
    s.wait(lambda: bool(done), what="the send completing")
    assert done[0][0] == "info" and s.sim.now - t0 >= 4000
    assert p.process == 2, "an info op retires the process id (stride = client slots)"
    s.sim.heal()
    done.clear()
    p.send(tp, 10, done=lambda t, v: done.append((t, v)))
    s.wait(lambda: bool(done), what="the next send")
    assert done[0][0] == "ok" and wl.history.ops[-1].process == 2


def test_acked_sends_are_read_back_by_a_final_read() -> None:
    s = Scenario(seed=14)
    (tp,) = s.start(replicas=(1, 2, 3))
    wl = _workload(s, [tp])
    p = wl.add_producer("1")
    for v in range(5):
        done: list = []
        p.send(tp, v, done=lambda t, x: done.append(t))
        s.wait(lambda: bool(done), what="send")
        assert done == ["ok"]
    r = wl.add_final_reader()
    got: list = []
    r.poll(tps=[tp], final=True, from_start=True, until=dict(wl.max_acked), deadline_ms=5000, done=got.append)
    s.wait(lambda: bool(got), what="final read")
    assert [v for _, v in got[0][str(tp)]] == [0, 1, 2, 3, 4]
    last = wl.history.ops[-1]
    assert last.type == "ok" and last.extra == {"final": True} and last.process >= 1_000_000


def test_an_arrival_goes_to_the_idle_producer_random_choice_would_pick() -> None:
    """Arrivals picks among the idle producers without building their list;
    the pick, and the generator's state after it, must be Random.choice's
    over that list, or a seed's schedule would change."""
    import random

    from reference_impl.sim.clients import Arrivals

    s = Scenario(seed=21)
    (tp,) = s.start(replicas=(1, 2, 3))
    wl = _workload(s, [tp])
    producers = [wl.add_producer("all") for _ in range(23)]
    arrivals = Arrivals(s.sim, producers, 100.0)
    arrivals.running = True
    mask = random.Random(5)
    picks = 0
    for _ in range(60):
        for p in producers:  # a fresh mix of busy and idle producers
            p.busy = mask.random() < 0.6
        idle = [p for p in producers if not p.busy]
        mirror = random.Random()
        mirror.setstate(s.sim.rng.getstate())
        want = mirror.choice(idle) if idle else None
        before = {p.name for p in producers if p.busy}
        arrivals._arrive()
        got = [p for p in producers if p.busy and p.name not in before]
        if want is None:
            assert got == []
        else:
            assert [p.name for p in got] == [want.name]
            picks += 1
    assert picks > 40 and arrivals.skipped == 60 - picks
