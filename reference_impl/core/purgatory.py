"""The broker's purgatories: produces waiting for the high watermark and
fetches waiting for data (seed 000, "The acks=all produce path"; Kafka's
DelayedProduce.scala and DelayedFetch.scala in
core/src/main/scala/kafka/server/, kept by ReplicaManager in a
DelayedOperationPurgatory each).

* :class:`ProducePurgatory` — an acks=all produce whose batch is appended
  waits until the HW passes it (then checkEnoughReplicasReachOffset
  answers), until the partition's leadership moves
  (NOT_LEADER_OR_FOLLOWER), or until its timeout (REQUEST_TIMED_OUT).
* :class:`FetchPurgatory` — a fetch with nothing to return long-polls until
  data arrives (a replica fetch: the leader's LEO passes its offset; a
  consumer fetch: the HW does), until the partition's role changes, or
  until its max wait.

Deadlines are monotonic, as the purgatories' timers are. Each purgatory is
told of changes by the replica manager (an append, a HW move, a role
change) and reads the partitions itself.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass
from typing import Any, Final

from .broker_context import BrokerContext
from .effects import Effect, ProduceTrace, Reply, Send
from .messages import (
    ClientFetchResponse,
    Errors,
    FetchPartitionRequest,
    FetchPartitionResponse,
    NodeId,
    ProduceResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)
from .metadata import MetadataImage
from .partition import Partition

#: a delayed fetch of a follower (waits for the LEO) or of a consumer (for the HW)
FROM_FOLLOWER: Final = "replica"
FROM_CONSUMER: Final = "client"


@dataclass(slots=True, init=False)
class DelayedProduce:
    ref: Any
    tp: TopicPartition
    acks: int
    base_offset: int
    count: int
    required_offset: int
    deadline: int

    def __init__(
        self, ref: Any, tp: TopicPartition, acks: int, base_offset: int, count: int, required_offset: int,
        deadline: int,
    ) -> None:
        self.ref = ref
        self.tp = tp
        self.acks = acks
        self.base_offset = base_offset
        self.count = count
        self.required_offset = required_offset
        self.deadline = deadline


@dataclass(slots=True, init=False)
class DelayedFetch:
    kind: str  # CLIENT | REPLICA
    msg: Any
    src: NodeId | None
    deadline: int
    #: the request's partitions, typed: read on every append to a watched
    #: partition (compiled, ``msg.partitions`` on an untyped msg is a lookup by name)
    parts: tuple[FetchPartitionRequest, ...]

    def __init__(self, kind: str, msg: Any, src: NodeId | None, deadline: int,
                 parts: tuple[FetchPartitionRequest, ...]) -> None:
        self.kind = kind
        self.msg = msg
        self.src = src
        self.deadline = deadline
        self.parts = parts


# sort keys as module functions: a lambda inside a method makes the compiled
# method allocate a closure environment on every call, used or not
def _required_offset(d: DelayedProduce) -> int:
    return d.required_offset


def produce_done(partitions: dict[TopicPartition, Partition], ref: Any, tp: TopicPartition, acks: int,
                 error: int, base: int, count: int) -> list[Effect]:
    """A produce's end: its trace event, and its answer (none for acks=0)."""
    out: list[Effect] = []
    produce_done_into(out, partitions.get(tp), ref, tp, acks, error, base, count)
    return out


def produce_done_into(out: list[Effect], p: Partition | None, ref: Any, tp: TopicPartition, acks: int, error: int,
                      base: int, count: int) -> None:
    """:func:`produce_done`, appended to ``out`` and given ``tp``'s
    partition as the broker holds it (``partitions.get(tp)``): the hot paths
    (an acks=all produce settled by the HW) add to the effects they already
    hold rather than make a list to concatenate, and have the partition in
    hand (no lookup, its name spelt already: ``str(tp)`` is a generic call)."""
    out.append(ProduceTrace(str(tp) if p is None else p._tp_name, acks, error, base, count))
    if acks == 0:
        return  # Kafka sends no response to acks=0
    log_start = p.log.log_start_offset if p is not None else -1
    out.append(Reply(ProduceResponse(ref, tp, error, base if error == Errors.NONE else -1, log_start)))


def client_fetch_partition(partitions: dict[TopicPartition, Partition], image: MetadataImage,
                           req: FetchPartitionRequest) -> FetchPartitionResponse:
    """One partition of a consumer fetch, as the leader reads it."""
    p = partitions.get(req.tp)
    if p is None:
        err = Errors.NOT_LEADER_OR_FOLLOWER if req.tp in image.partitions else Errors.UNKNOWN_TOPIC_OR_PARTITION
        return FetchPartitionResponse(req.tp, err)
    return p.serve_client_fetch(req)


def client_fetch_answers(partitions: dict[TopicPartition, Partition], image: MetadataImage,
                         reqs: tuple[FetchPartitionRequest, ...]) -> tuple[tuple[FetchPartitionResponse, ...], bool]:
    """Every partition of a consumer fetch as the leader reads it, and
    whether the fetch is answered now (some data, or an error or a diverging
    epoch to report) rather than parked. One loop: a generator into a tuple
    and two ``any()`` over it made three generator objects a poll."""
    if len(reqs) == 1:
        # one partition: its answer in a tuple, no list made to be copied into one
        r = client_fetch_partition(partitions, image, reqs[0])
        return (r,), bool(r.batches) or r.error != Errors.NONE or r.diverging_epoch is not None
    answered: list[FetchPartitionResponse] = []
    now = False
    for req in reqs:
        r = client_fetch_partition(partitions, image, req)
        answered.append(r)
        if r.batches or r.error != Errors.NONE or r.diverging_epoch is not None:
            now = True
    return tuple(answered), now


class ProducePurgatory:
    def __init__(self, partitions: dict[TopicPartition, Partition], ctx: BrokerContext) -> None:
        self.partitions = partitions
        self.ctx = ctx
        #: per partition, ordered by required offset (``expire`` answers in
        #: the order they were made); a partition's list, once made, stays
        #: when emptied
        self.waiting: dict[TopicPartition, list[DelayedProduce]] = {}

    def park(self, d: DelayedProduce) -> None:
        """Wait for the HW (the deadline is monotonic, as the purgatory's timer)."""
        # kept ordered by required offset (appends arrive in offset order;
        # a duplicate may need an earlier one), so completion pops a prefix
        # not setdefault(tp, []): that makes a list on every park
        waiting = self.waiting.get(d.tp)
        if waiting is None:
            waiting = self.waiting[d.tp] = []
        if waiting and waiting[-1].required_offset > d.required_offset:
            insort(waiting, d, key=_required_offset)
        else:
            waiting.append(d)
        self.ctx.note_deadline(d.deadline + self.ctx.skew)

    def deadlines(self) -> list[int]:
        """The earliest monotonic deadline of each partition's waiting
        produces (a partition's list is never empty: it goes when emptied).
        A native loop: compiled, ``min`` over a generator is a generic call
        comparing boxed ints, on every tick."""
        out: list[int] = []
        for waiting in self.waiting.values():
            if not waiting:
                continue  # settled: kept for the partition's next produce
            m = waiting[0].deadline
            for d in waiting:
                if d.deadline < m:
                    m = d.deadline
            out.append(m)
        return out

    def complete(self, tp: TopicPartition) -> list[Effect]:
        """The HW moved or the leadership did: answer every produce it settles."""
        effects: list[Effect] = []
        self.complete_into(tp, effects)
        return effects

    def complete_into(self, tp: TopicPartition, effects: list[Effect], p: Partition | None = None) -> None:
        """:meth:`complete`, appended to ``effects``; ``p``: ``tp``'s
        partition as the caller holds it (``partitions.get(tp)``, looked up
        when None), so a HW move on a leader looks it up no more."""
        waiting = self.waiting.get(tp)
        if not waiting:
            return
        if p is None:
            p = self.partitions.get(tp)
        if p is None or not p.is_leader:
            n = len(waiting)
        else:
            # checkEnoughReplicasReachOffset for every parked produce the HW has passed
            hw = p.log.hw
            n = 0
            while n < len(waiting) and waiting[n].required_offset <= hw:
                n += 1
        # by index: a slice of the settled ones was a list made and freed per HW move
        for i in range(n):
            d = waiting[i]
            if p is None:
                err = Errors.NOT_LEADER_OR_FOLLOWER
            else:
                _, err = p.check_enough_replicas_reach_offset(d.required_offset)
            produce_done_into(effects, p, d.ref, tp, d.acks, err, d.base_offset, d.count)
        if n == len(waiting):
            # emptied, but kept: the partition's next produce parks in it
            # (a list and a dict entry made and dropped per produce otherwise)
            waiting.clear()
        elif n:
            del waiting[:n]

    def expire(self, mono: int) -> list[Effect]:
        """REQUEST_TIMED_OUT for every produce whose deadline passed."""
        effects: list[Effect] = []
        for tp in list(self.waiting):
            waiting = self.waiting[tp]
            expired = [d for d in waiting if mono >= d.deadline]
            if not expired:
                continue
            rest = [d for d in waiting if mono < d.deadline]
            if rest:
                self.waiting[tp] = rest
            else:
                del self.waiting[tp]
            for d in expired:
                effects += produce_done(self.partitions, d.ref, tp, d.acks, Errors.REQUEST_TIMED_OUT, d.base_offset,
                                        d.count)
        return effects


class FetchPurgatory:
    def __init__(self, partitions: dict[TopicPartition, Partition], image: MetadataImage, ctx: BrokerContext) -> None:
        self.partitions = partitions
        self.image = image
        self.ctx = ctx
        #: parked fetch id -> the fetch. The ids are ints, typed ``Any`` here
        #: and in :attr:`watch` so that compiled code passes the id object
        #: it holds on as it is: typed ``int``, an id read from a set or a
        #: dict was unboxed and boxed again (a fresh int object past 256)
        #: for each lookup, delete and discard, ~5 a parked fetch answered
        self.delayed: dict[Any, DelayedFetch] = {}
        #: partition -> the parked fetches that read it (a partition's set,
        #: once made, stays: emptied, it is cleared)
        self.watch: dict[TopicPartition, set[Any]] = {}
        self._ids = 0

    def park(self, kind: str, msg: Any, src: NodeId | None, deadline: int,
             parts: tuple[FetchPartitionRequest, ...]) -> None:
        """Park a fetch request (``parts``: its partitions) until data or
        ``deadline`` (monotonic, as the fetch purgatory's timer)."""
        self._ids += 1
        fid: Any = self._ids  # boxed once (see ``delayed``)
        self.delayed[fid] = DelayedFetch(kind, msg, src, deadline, parts)
        self.ctx.note_deadline(deadline + self.ctx.skew)
        watch = self.watch
        for req in parts:
            # not setdefault(tp, set()): that makes a set on every park
            ids = watch.get(req.tp)
            if ids is None:
                ids = watch[req.tp] = set()
            ids.add(fid)

    def deadlines(self) -> list[int]:
        return [d.deadline for d in self.delayed.values()]

    def check(self, tp: TopicPartition, now: int, only_kind: str | None = None) -> list[Effect]:
        """Answer the parked fetches of ``tp`` that can now return something
        (or whose partition stopped being led here)."""
        effects: list[Effect] = []
        self.check_into(tp, now, effects, only_kind)
        return effects

    def check_into(self, tp: TopicPartition, now: int, effects: list[Effect], only_kind: str | None = None,
                   p: Partition | None = None) -> None:
        """:meth:`check`, appended to ``effects``: every append and HW move
        on a leader asks, so no list is made to be concatenated. ``p``:
        ``tp``'s partition as the caller holds it (``partitions.get(tp)``,
        looked up when None: an append or HW move has it in hand)."""
        ids = self.watch.get(tp)
        # len(), not truth: compiled, a set's truth is a generic call, its length a field
        if ids is None or len(ids) == 0:
            return
        if p is None:
            p = self.partitions.get(tp)
        # which are ready, then answer them: answering changes nothing a
        # readiness test reads (it reads the partitions, only its own entries
        # go), so this is the one pass over a copy of ``ids`` it was, minus
        # the copy (every produce on a leader asks)
        delayed = self.delayed
        ready: list[Any] | None = None
        for fid in ids:
            d = delayed.get(fid)
            if d is None:
                continue
            if only_kind is not None and d.kind != only_kind:
                continue
            if self._ready(d, tp, p):
                if ready is None:
                    ready = [fid]
                else:
                    ready.append(fid)
        if ready is not None:
            for fid in ready:
                self.complete_into(fid, now, effects)

    @staticmethod
    def _ready(d: DelayedFetch, tp: TopicPartition, p: Partition | None) -> bool:
        if p is None or not p.is_leader:
            return True
        for req in d.parts:
            if req.tp is not tp and req.tp != tp:  # identity first: mostly the same object
                continue
            upto = p.log.leo if d.kind == FROM_FOLLOWER else p.log.hw
            if upto > req.fetch_offset:
                return True
        return False

    def complete(self, fid: Any, now: int) -> list[Effect]:
        """Answer one parked fetch with what its partitions hold now."""
        effects: list[Effect] = []
        self.complete_into(fid, now, effects)
        return effects

    def complete_into(self, fid: Any, now: int, effects: list[Effect]) -> None:
        """:meth:`complete`, appended to ``effects``."""
        # a lookup and a delete: compiled, dict.pop(k, None) is a method call by name
        delayed = self.delayed
        d = delayed.get(fid)
        if d is None:
            return
        del delayed[fid]
        for req in d.parts:
            s = self.watch.get(req.tp)
            if s is not None:
                s.discard(fid)
                if len(s) == 0:
                    # kept for the partition's next parked fetch, cleared: a
                    # cleared set's table is a new set's (CPython's
                    # set_clear_internal), so its ids iterate in the order a
                    # new set's would; a set deleted and made again per
                    # parked fetch was ~300 instructions
                    s.clear()
        if d.kind == FROM_CONSUMER:
            effects.append(Reply(ClientFetchResponse(
                d.msg.ref, tuple(client_fetch_partition(self.partitions, self.image, req) for req in d.parts))))
            return
        msg = d.msg
        # parked by handle_replica_fetch, which answers peers only; the
        # isinstance also lets the compiled code read msg's fields natively
        assert d.src is not None and isinstance(msg, ReplicaFetchRequest)
        parts = d.parts
        if len(parts) == 1:
            # one partition (the common case): its answer in a tuple, no
            # list made to be copied into one
            answers: tuple[FetchPartitionResponse, ...] = (self._serve_parked(parts[0], msg, now, effects),)
        else:
            responses = []
            for req in parts:
                responses.append(self._serve_parked(req, msg, now, effects))
            answers = tuple(responses)
        effects.append(Send(d.src, ReplicaFetchResponse(self.ctx.node_id, msg.correlation_id, Errors.NONE, answers)))

    def _serve_parked(self, req: FetchPartitionRequest, msg: ReplicaFetchRequest, now: int,
                      effects: list[Effect]) -> FetchPartitionResponse:
        """One partition of a parked replica fetch, as the leader reads it
        now (the follower's progress was recorded when it was parked)."""
        p = self.partitions.get(req.tp)
        if p is None:
            return FetchPartitionResponse(req.tp, Errors.NOT_LEADER_OR_FOLLOWER)
        resp, _ = p.serve_replica_fetch_into(req, msg.replica_id, msg.broker_epoch, now, effects, record=False)
        return resp

    def expire(self, mono: int, now: int) -> list[Effect]:
        """Answer every parked fetch whose monotonic deadline passed."""
        effects: list[Effect] = []
        for fid, parked in list(self.delayed.items()):
            if mono >= parked.deadline:
                self.complete_into(fid, now, effects)
        return effects
