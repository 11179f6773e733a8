"""The queue workload's generators (``workloads.queue``'s client is the real
one): what every run of the queue workload asks of its clients, on both
runtimes. Sends and polls mixed 3:1 with unique increasing values to random
keys, resubscriptions under ``sub_via=subscribe``, the final reads; and
:func:`observe`, which keeps the highest acknowledged offset per key for
them.

No client library here, and the op builders are small classes rather than
closures: the simulator asks for an op on every operation it plays, and
this module is compiled with it (reference_impl.accel).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Final

import generator as g
from generator.core import OpFn, randbelow

#: with sub_via="subscribe", the share of polls that subscribe again instead
#: (Jepsen's interleave-subscribes, whose default is 1/64 of all operations)
SUBSCRIBE_SHARE = 1 / 16
#: ... taken as every 16th consumer operation, the first one included
SUBSCRIBE_EVERY = round(1 / SUBSCRIBE_SHARE)
#: the generators' state key (``Context.state``, kept by :func:`observe`) of
#: how many of the workload's consumer operations (polls and subscribes, not
#: the final reads) have completed
CONSUMER_OPS = "consumer_ops"


def _choose(rng: random.Random, seq: list[Any] | tuple[Any, ...]) -> Any:
    """``rng.choice(seq)``, the same draws, compiled (``generator.core.randbelow``)."""
    return seq[randbelow(rng, len(seq))]


#: a send's fields in their order: each send is a copy of this whose values
#: are then set (a copy of a small dict's table, where a dict built key by
#: key cost about twice as much, once an operation). ``time`` is the ask's
#: (what ``generator.core._fill`` gives an op without one, as the last
#: key): set here, the copy's table has room for it, where adding a sixth
#: key to a copy of five grew the table anew on every send
_SEND: Final[dict[str, Any]] = {"f": "send", "process": None, "value": None, "acks": None, "idempotent": None,
                                "time": None}


class Send(OpFn):
    """A send of the next value to a random key by a random free thread,
    with that thread's acks and idempotence (``idempotent``: the checker
    judges a duplicated value by it; a non-idempotent producer's internal
    retry may append a record twice). The value counter is the one piece
    of state a generator of this workload keeps outside its value, as the
    real workload always has: a value asked for but never dispatched is
    skipped, so values stay unique.

    Its ops are ``placed`` (``generator.core.OpFn``): a free thread's
    process and the ask's time, as filling them would give."""

    def __init__(self, keys: list[str], acks_for_thread: Callable[[Any], str],
                 idempotent_for_thread: Callable[[Any], bool] | None) -> None:
        self.placed = True
        self.keys = tuple(keys)
        self.acks_for_thread = acks_for_thread
        self.idempotent_for_thread = idempotent_for_thread
        self.next_value = 0
        #: thread -> its sends' template: :data:`_SEND` with the thread's
        #: acks and idempotence (asked of the test once per thread) set, so
        #: a send sets the three fields that change, not five
        self.of_thread: dict[Any, dict[str, Any]] = {}

    def _thread(self, t: Any) -> dict[str, Any]:
        got = self.of_thread.get(t)
        if got is None:
            idem = self.idempotent_for_thread
            got = _SEND.copy()
            got["acks"] = self.acks_for_thread(t)
            got["idempotent"] = bool(idem(t)) if idem is not None else False
            self.of_thread[t] = got
        return got

    def __call__(self, ctx: g.Context) -> dict[str, Any] | None:
        t = _choose(ctx.rng, ctx.free_threads())
        k = _choose(ctx.rng, self.keys)
        v = self.next_value
        self.next_value = v + 1
        op = self._thread(t).copy()
        op["process"] = ctx.process_of[t]
        op["value"] = [["send", k, v]]
        op["time"] = ctx.time
        return op


class Poll(OpFn):
    """A poll of the process's keys (each op a new dict: an :class:`OpFn`);
    under ``sub_via=subscribe`` a :data:`SUBSCRIBE_SHARE` of them subscribe
    again instead: the consumer
    operation asked for while the count of completed ones
    (:data:`CONSUMER_OPS`) is a multiple of :data:`SUBSCRIBE_EVERY`, the
    first one included, so a run that polls at all resubscribes at least once
    however slowly its clients go.

    The count is of completions, not of asks: an interpreter asks again for
    an op it did not dispatch (one due later, when a completion comes first),
    and a count of asks, advanced by the op thrown away, left the
    resubscription on an ask that was never dispatched, so a short run on a
    busy machine resubscribed not at all. Asked again with nothing completed
    meanwhile, the answer is the same."""

    def __init__(self, keys: list[str], sub_via: str) -> None:
        self.keys = list(keys)
        self.subscribe = sub_via == "subscribe"

    def __call__(self, ctx: g.Context) -> dict[str, Any] | None:
        if self.subscribe and ctx.state.get(CONSUMER_OPS, 0) % SUBSCRIBE_EVERY == 0:
            return {"f": "subscribe", "value": list(self.keys)}
        return {"f": "poll", "value": [["poll"]]}


def workload_generator(keys: list[str], acks_for_thread: Callable[[Any], str], send_weight: int = 3,
                       idempotent_for_thread: Callable[[Any], bool] | None = None,
                       sub_via: str = "assign") -> g.Gen:
    """Sends and polls mixed ``send_weight``:1 (:class:`Send`, :class:`Poll`)."""
    send = Send(keys, acks_for_thread, idempotent_for_thread)
    return g.mix(*([send] * send_weight), Poll(keys, sub_via))


def observe(state: dict[str, Any], op: dict[str, Any]) -> None:
    """Keep the highest acknowledged offset per key (for the final reads):
    the sends of ``ok`` send, txn and ctp operations (a ctp round's
    sends are its outputs); and count the workload's consumer operations
    done, whatever their outcome (:class:`Poll` resubscribes by it)."""
    # str-typed (a name that is not a str is none of these): compiled, the
    # comparisons are the str's own, where an untyped one went through
    # Python's comparison protocol, six times a completion
    f_: Any = op.get("f")
    f: str = f_ if isinstance(f_, str) else ""
    if (f == "poll" or f == "subscribe") and not op.get("final"):
        state[CONSUMER_OPS] = state.get(CONSUMER_OPS, 0) + 1
    type_: Any = op.get("type")
    if not (isinstance(type_, str) and type_ == "ok"):
        return
    if f != "send" and f != "txn" and f != "ctp":
        return
    acked: dict[Any, Any] | None = state.get("acked")
    if acked is None:
        acked = state["acked"] = {}
    mops_: Any = op.get("value")
    if not mops_:
        return
    # typed lists (what the clients hand back; anything else is copied into
    # one): compiled, an untyped value was iterated and indexed through
    # Python's protocols, several times a completion
    mops: list[Any] = mops_ if isinstance(mops_, list) else list(mops_)
    for mop_ in mops:
        mop: list[Any] = mop_ if isinstance(mop_, list) else list(mop_)
        name: Any = mop[0]
        if isinstance(name, str) and name == "send":
            sent_: Any = mop[2]
            if isinstance(sent_, list):
                sent: list[Any] = sent_
                off: Any = sent[0]
                if off is not None:
                    key = mop[1]
                    cur: Any = acked.get(key, -1)
                    if isinstance(off, int) and isinstance(cur, int):
                        if off > cur:  # two ints: compared natively
                            acked[key] = off
                    elif off > cur:
                        acked[key] = off


class _FinalRead:
    """One final read of ``key``, asking for coverage up to the highest
    offset acknowledged so far."""

    def __init__(self, key: str, output: bool, read_timeout: float) -> None:
        self.key = key
        self.output = output
        self.read_timeout = read_timeout

    def __call__(self, ctx: g.Context) -> dict[str, Any] | None:
        op: dict[str, Any] = {"output": True} if self.output else {}
        op.update({
            "f": "poll",
            "value": [["poll"]],
            "final": True,
            "key": self.key,
            "upto": ctx.state.get("acked", {}).get(self.key, -1),
            "_timeout": self.read_timeout + 10,  # the read has its own deadline
        })
        return op


def final_generator(keys: list[str], concurrency: int, read_timeout: float = 30.0,
                    output_keys: tuple[str, ...] = ()) -> g.Gen:
    """Final reads, spread over the client threads (keys[t::concurrency] for
    thread t). Each thread first records an ``assign`` of nothing — its own
    consumer drops its positions — so the checkers see the read from offset 0
    as a fresh start, not a poll going backwards; then one final read per key,
    asking for coverage up to the highest offset acknowledged so far.
    ``output_keys`` (consume-transform-produce's output topic) are read
    the same way, those reads marked ``"output": true``: they are the
    processing checker's, not the queue checker's."""
    outputs = frozenset(output_keys)
    every = list(keys) + [k for k in output_keys if k not in keys]

    def for_thread(t: Any) -> g.Gen | None:
        mine = every[t::concurrency] if isinstance(t, int) else []
        if not mine:
            return None
        reads = tuple(g.limit(1, _FinalRead(k, k in outputs, read_timeout)) for k in mine)
        return g.Seq((g.Once({"f": "assign", "value": [], "final": True}),) + reads)

    return g.clients(g.each_thread(for_thread))
