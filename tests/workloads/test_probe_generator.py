"""The final phase's probe writes (workloads.queue.Probes): acks=all sends to
each key from the heal on, one at a time per thread, again after a pause
while they fail, until each key took one or the deadline passed; the
availability checker reads them (checkers/availability)."""

from __future__ import annotations

import random

import generator as g
from workloads.probes import PROBE_BASE, PROBE_PAUSE_S, Probes, probe_generator

NS = g.NS


def ctx(t_s: float, free=(0,), process_of=None) -> g.Context:
    return g.Context(time=int(t_s * NS), rng=random.Random(1), free=frozenset(free),
                     process_of=process_of or {0: 0}, threads=frozenset(process_of or {0: 0}))


def test_a_probe_is_an_acks_all_send_marked_probe_and_a_key_that_took_one_is_done() -> None:
    p = Probes(("t0-0", "t0-1"), PROBE_BASE, deadline_s=10)
    op, p = p.op(ctx(0))
    assert op["f"] == "send" and op["acks"] == "all" and op["probe"] is True
    assert op["value"] == [["send", "t0-0", PROBE_BASE]]
    assert p.op(ctx(0.1, free=()))[0] == g.PENDING  # one at a time
    p = p.update(ctx(0.2, free=()), {**op, "type": "ok"})
    op, p = p.op(ctx(0.2))
    assert op["value"] == [["send", "t0-1", PROBE_BASE + 1]]
    p = p.update(ctx(0.3), {**op, "type": "ok"})
    assert p.op(ctx(0.3)) is None


def test_a_failed_probe_is_sent_again_after_the_pause_with_a_fresh_value() -> None:
    p = Probes(("t0-0",), PROBE_BASE, deadline_s=10)
    op, p = p.op(ctx(0))
    p = p.update(ctx(1.0), {**op, "type": "fail", "error": "NOT_ENOUGH_REPLICAS"})
    again, p = p.op(ctx(1.0))
    assert again["time"] == int((1.0 + PROBE_PAUSE_S) * NS)
    assert again["value"] == [["send", "t0-0", PROBE_BASE + 1]]


def test_an_info_completion_that_reaches_no_generator_counts_as_failed() -> None:
    """An info completion moves the thread to a new process, whose events the
    thread's generator never hears of: a free thread with a probe in flight
    means it ended without word."""
    p = Probes(("t0-0",), PROBE_BASE, deadline_s=10)
    _, p = p.op(ctx(0))
    op, p = p.op(ctx(3.0, process_of={0: 4}))
    assert op["process"] == 4 and op["value"] == [["send", "t0-0", PROBE_BASE + 1]]


def test_no_probe_starts_once_the_deadline_passed() -> None:
    p = Probes(("t0-0",), PROBE_BASE, deadline_s=2)
    op, p = p.op(ctx(0))
    p = p.update(ctx(1.9), {**op, "type": "info"})
    assert p.op(ctx(1.9)) is None  # the pause would end past the deadline


def test_keys_are_spread_over_the_acks_all_threads_with_value_ranges_of_their_own() -> None:
    gen = probe_generator(["a-0", "a-1", "a-2"], [0, 2], deadline_s=5)
    c = g.Context(time=0, rng=random.Random(1), free=frozenset({0, 1, 2}), process_of={0: 0, 1: 1, 2: 2},
                  threads=frozenset({0, 1, 2}))
    seen = {}
    for _ in range(2):
        op, gen = gen.op(c)
        seen[op["process"]] = op["value"][0]
        c = g.Context(time=0, rng=c.rng, free=c.free - {op["process"]}, process_of=c.process_of, threads=c.threads)
    assert seen == {0: ["send", "a-0", PROBE_BASE], 2: ["send", "a-1", PROBE_BASE + (1 << 20)]}
    assert probe_generator(["a-0"], [], deadline_s=5) is None
