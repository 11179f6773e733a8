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


def test_observe_keeps_the_highest_acknowledged_offset_per_key_from_lists_and_other_sequences() -> None:
    """The acknowledged offsets of ``ok`` sends, txns and ctp rounds, read
    through typed lists (the clients' values) or any other sequence of
    micro-ops (copied into one): the highest per key, never lowered, and
    nothing from a send not acknowledged or without an offset."""
    state: dict = {}
    observe(state, {"f": "send", "type": "ok", "value": [["send", "a", [5, 1]]]})
    observe(state, {"f": "txn", "type": "ok", "value": (("send", "a", [3, 2]), ["send", "b", [7, 3]], ["poll", {}])})
    observe(state, {"f": "ctp", "type": "ok", "value": [("send", "b", [9, 4]), ["send", "c", [None, 5]]]})
    observe(state, {"f": "send", "type": "info", "value": [["send", "c", [11, 6]]]})
    observe(state, {"f": "send", "type": "ok", "value": [["send", "c", (12, 7)]]})  # not a list: no offset read
    assert state["acked"] == {"a": 5, "b": 9}


def test_a_send_carries_the_asks_time_as_its_last_field_as_the_generator_would_give_it() -> None:
    """``Send`` sets the op's ``time`` to the ask's itself (what
    ``generator.core._fill`` gives an op without one, as its last key), so
    the copy of its template has room for it; the op a rate hands out is
    the same, field for field and in the same order."""
    from workloads.queue_gen import Send

    c = g.Context(time=1234, rng=random.Random(1), free=frozenset({0}), process_of={0: 7},
                  threads=frozenset({0}), state={})
    op = Send(KEYS, lambda t: "all", None)(c)
    assert list(op) == ["f", "process", "value", "acks", "idempotent", "time"] and op["time"] == 1234
    assert op["process"] == 7 and op["value"] == [["send", op["value"][0][1], 0]]
    filled, _ = g.rate(10, g.mix(Send(KEYS, lambda t: "all", None))).op(c)
    assert list(filled) == list(op) and filled["process"] == 7
