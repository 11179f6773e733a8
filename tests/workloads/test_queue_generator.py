"""The queue workload's generator under ``sub_via=subscribe``: a
resubscription every 16th consumer operation (Jepsen's interleave-subscribes,
workloads/queue_gen.py), counted on completions, so an op asked for and not
dispatched (an interpreter asks again when a completion comes before the op
is due) takes no resubscription with it."""

from __future__ import annotations

import random

import generator as g
from workloads.queue_gen import SUBSCRIBE_EVERY, Poll, observe

KEYS = ["t0-0", "t0-1"]


def ctx(state: dict) -> g.Context:
    return g.Context(time=0, rng=random.Random(1), free=frozenset({0}), process_of={0: 0},
                     threads=frozenset({0}), state=state)


def test_a_resubscription_asked_again_before_any_consumer_op_completes_is_still_a_resubscription() -> None:
    poll, state = Poll(KEYS, "subscribe"), {}
    assert [poll(ctx(state))["f"] for _ in range(5)] == ["subscribe"] * 5  # asked five times, never dispatched
    observe(state, {"f": "subscribe", "type": "ok", "value": KEYS})
    assert poll(ctx(state))["f"] == "poll"


def test_every_sixteenth_consumer_op_done_resubscribes_whatever_its_outcome_and_final_reads_do_not_count() -> None:
    poll, state = Poll(KEYS, "subscribe"), {}
    fs = []
    for n in range(3 * SUBSCRIBE_EVERY):
        op = poll(ctx(state))
        fs.append(op["f"])
        observe(state, {**op, "type": ("ok", "info", "fail")[n % 3]})
        observe(state, {"f": "poll", "type": "ok", "final": True, "value": [["poll", {}]]})
        observe(state, {"f": "send", "type": "ok", "value": [["send", "t0-0", [n, n]]]})
    assert [i for i, f in enumerate(fs) if f == "subscribe"] == [0, SUBSCRIBE_EVERY, 2 * SUBSCRIBE_EVERY]


def test_assigning_consumers_never_subscribe() -> None:
    poll, state = Poll(KEYS, "assign"), {}
    assert {poll(ctx(state))["f"] for _ in range(2 * SUBSCRIBE_EVERY)} == {"poll"}
