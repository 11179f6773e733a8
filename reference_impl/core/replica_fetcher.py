"""Follower fetching: one replica fetcher per leader broker, long-polling,
and the OffsetsForLeaderEpoch follow-ups of truncation (seed 000, seed 001
§2.2.2; Kafka's ReplicaFetcherManager, ReplicaFetcherThread and
AbstractFetcherThread in core/src/main/scala/kafka/server/).

A fetcher sends one ``ReplicaFetchRequest`` at a time to its leader, for
every partition it follows from that leader that is ready to fetch (not
backing off, not waiting for an OffsetsForLeaderEpoch answer, not fenced).
Each partition applies its part of the answer
(:meth:`~.partition.Partition.handle_fetch_response`); the fetcher then
sends again. An unanswered fetch is given up after :attr:`fetch_timeout_ms`
(the simulator drops what TCP would only delay).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from .broker_context import BrokerContext
from .config import ProtocolConfig
from .effects import Effect, Send
from .messages import (
    NO_LEADER,
    Errors,
    FetchPartitionRequest,
    NodeId,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)
from .partition import FOLLOWER, TRUNCATING, Partition


@dataclass
class Fetcher:
    """One replica fetcher: this broker fetching from one leader broker."""

    leader: NodeId
    inflight: int | None = None
    sent_at: int = 0
    #: the partitions of the fetch in flight, as sent: each names the
    #: leader epoch it was sent in (``current_leader_epoch``), which its
    #: answer is checked against. The request's own tuple, where a dict of
    #: partition -> epoch was built for every fetch and looked up for every
    #: partition answered
    sent: tuple[FetchPartitionRequest, ...] = ()
    backoff_until: int = 0
    #: the partitions this broker follows from ``leader``, sorted by
    #: partition (the order a fetch names them in), kept with the manager's
    #: ``_following``: the fetcher an answer came back to sends the next
    #: fetch from them, with no lookup of the leader's members
    members: list[Partition] = field(default_factory=list)


# sort keys as module functions: a lambda inside a method makes the compiled
# method allocate a closure environment on every call, used or not
def _partition_tp(p: Partition) -> TopicPartition:
    return p.tp


def _only(sent: tuple[FetchPartitionRequest, ...], req: FetchPartitionRequest) -> bool:
    """``sent == (req,)``, by identity. A function of its own: compiled,
    ``len(sent) == 1`` narrows a tuple variable to a one-item tuple, which
    is unboxed, and boxed again into a new tuple where it is used next."""
    return len(sent) == 1 and sent[0] is req


class ReplicaFetcherManager:
    def __init__(self, config: ProtocolConfig, partitions: dict[TopicPartition, Partition], ctx: BrokerContext) -> None:
        self.config = config
        self.partitions = partitions
        self.ctx = ctx
        self.fetchers: dict[NodeId, Fetcher] = {}
        #: follower partitions in fetch backoff or waiting for OffsetsForLeaderEpoch
        self._attention: set[TopicPartition] = set()
        #: leader -> partitions this broker follows from it (the fetcher's members)
        self._following: dict[NodeId, set[TopicPartition]] = {}
        self._follow_of: dict[TopicPartition, NodeId] = {}
        # each leader's partitions, sorted, are its fetcher's ``members``: a
        # fetch answered is followed by the next one, which walked the set,
        # looked each partition up and sorted them every time

    @property
    def fetch_timeout_ms(self) -> int:
        """How long a replica fetch may stay unanswered before it is resent.

        The simulator drops messages that TCP would only delay, so a lost
        fetch must not stall a follower for request.timeout.ms: allow the
        long-poll wait plus one second."""
        return min(self.config.request_timeout_ms, self.config.replica_fetch_wait_max_ms + 1000)

    def update_following(self, p: Partition) -> None:
        """Keep the fetcher membership index in step with the partition's role."""
        old = self._follow_of.pop(p.tp, None)
        if old is not None:
            members = self._following.get(old)
            if members is not None:
                members.discard(p.tp)
                if not members:
                    del self._following[old]
            self._sort_members(old)
        if p.role == FOLLOWER and p.leader_id != NO_LEADER:
            self._follow_of[p.tp] = p.leader_id
            self._following.setdefault(p.leader_id, set()).add(p.tp)
            self._sort_members(p.leader_id)

    def _sort_members(self, leader: NodeId) -> None:
        """Rebuild ``leader``'s fetcher's sorted partitions from its members
        (a fetcher is made with its first member)."""
        members = self._following.get(leader)
        f = self.fetchers.get(leader)
        if members:
            if f is None:
                f = self.fetchers[leader] = Fetcher(leader)
            f.members = sorted((self.partitions[tp] for tp in members), key=_partition_tp)
        elif f is not None:
            f.members = []

    def deadlines(self, now: int) -> list[int]:
        """When the fetchers next need the broker: an unanswered fetch's
        timeout, a fetcher's or a partition's backoff, an unanswered
        OffsetsForLeaderEpoch (wall clock). Partitions that no longer need
        attention are forgotten."""
        c: list[int] = []
        ft = self.fetch_timeout_ms
        for f in self.fetchers.values():
            if f.inflight is not None:
                c.append(f.sent_at + ft)
            elif f.backoff_until > now:
                c.append(f.backoff_until)
        for tp in list(self._attention):
            p = self.partitions.get(tp)
            if p is None or p.role != FOLLOWER:
                self._attention.discard(tp)
            elif p.fetch_state == TRUNCATING:
                c.append(p.truncation_request_at + ft)
            elif p.fetch_backoff_until > now:
                c.append(p.fetch_backoff_until)
            else:
                self._attention.discard(tp)
        return c

    def tick(self, now: int) -> list[Effect]:
        """Give up on unanswered fetches, ask again for unanswered
        truncation offsets, and fetch from every leader that is free."""
        effects: list[Effect] = []
        for f in self.fetchers.values():
            if f.inflight is not None and now - f.sent_at >= self.fetch_timeout_ms:
                f.inflight = None
        for tp in sorted(self._attention):
            p = self.partitions.get(tp)
            if (p is not None and p.role == FOLLOWER and p.fetch_state == TRUNCATING
                    and now - p.truncation_request_at >= self.fetch_timeout_ms):
                p.truncation_request_at = now
                effects += self._send_offsets_for_leader_epoch(p, now)
        effects += self.maybe_fetch(now)
        return effects

    def maybe_fetch(self, now: int, only_leader: NodeId | None = None) -> list[Effect]:
        """Send a fetch to every leader we follow (or just ``only_leader``)
        that has no fetch in flight, for the partitions ready to fetch."""
        effects: list[Effect] = []
        self.fetch_into(now, effects, only_leader)
        return effects

    def fetch_into(self, now: int, effects: list[Effect], only_leader: NodeId | None = None) -> None:
        """:meth:`maybe_fetch`, appended to ``effects``: a fetch answered is
        followed by the next one, so no list is made to be concatenated."""
        if only_leader is not None:
            # an answered fetch's next one (every replica fetch round trip):
            # the one leader, with no generic loop over a tuple or a dict
            self._fetch_from(only_leader, now, effects)
            return
        for leader in list(self._following):
            self._fetch_from(leader, now, effects)

    def _fetch_from(self, leader: NodeId, now: int, effects: list[Effect]) -> None:
        """Send ``leader``'s fetcher's next fetch, if it is free and any
        partition it serves is ready."""
        f = self.fetchers.get(leader)
        if f is not None:
            self._fetch_next(f, now, effects)

    def _fetch_next(self, f: Fetcher, now: int, effects: list[Effect]) -> None:
        """:meth:`_fetch_from`, given the fetcher (the one an answer just
        reached: no lookup by leader)."""
        members = f.members
        if not members or f.inflight is not None or now < f.backoff_until:
            return
        if len(members) == 1:
            # one partition from this leader (the common case: a leader per
            # partition): its request in a tuple, no list made to be copied
            # into one; the tuple sent last time if it holds the same request
            # (Partition.fetch_request keeps it while nothing in it moved)
            p = members[0]
            if p.wants_fetch(now):
                req = p.fetch_request()
                sent = f.sent
                if not _only(sent, req):
                    sent = (req,)
                effects.append(self._send_fetch(f, sent, now))
            return
        # the ready partitions' requests, in partition order (the members are
        # sorted already); each names its leader epoch now (Partition.fetch_request)
        reqs: list[FetchPartitionRequest] = []
        for p in members:
            if p.wants_fetch(now):
                reqs.append(p.fetch_request())
        if reqs:
            effects.append(self._send_fetch(f, tuple(reqs), now))

    def _send_fetch(self, f: Fetcher, sent: tuple[FetchPartitionRequest, ...], now: int) -> Send:
        ctx = self.ctx
        corr = ctx.next_correlation_id()
        f.inflight = corr
        f.sent_at = now
        f.sent = sent
        ctx.note_deadline(now + self.fetch_timeout_ms)
        return Send(
            f.leader,
            ReplicaFetchRequest(
                replica_id=ctx.node_id,
                broker_epoch=ctx.broker_epoch,
                correlation_id=corr,
                partitions=sent,
                max_wait_ms=self.config.replica_fetch_wait_max_ms,
                min_bytes=self.config.replica_fetch_min_bytes,
            ),
        )

    def handle_response(self, msg: ReplicaFetchResponse, now: int) -> list[Effect]:
        f = self.fetchers.get(msg.leader_id)
        if f is None:
            return []
        # narrowed to ints before comparing: compiled, an Optional compared
        # with an int is a generic comparison of boxed values
        inflight = f.inflight
        if inflight is None or inflight != msg.correlation_id:
            return []  # a late answer to a fetch we gave up on
        f.inflight = None
        effects: list[Effect] = []
        if msg.error != Errors.NONE:
            f.backoff_until = now + self.config.replica_fetch_backoff_ms
            self.ctx.note_deadline(f.backoff_until)
            return effects
        sent = f.sent
        for resp in msg.partitions:
            tp = resp.tp
            p = self.partitions.get(tp)
            if p is None or p.role != FOLLOWER or p.leader_id != msg.leader_id:
                continue  # the partition moved on while the fetch was out
            # the epoch it was asked for in: a scan of the few partitions
            # sent, by identity first (the answer names the request's own)
            asked = False
            for req in sent:
                if req.tp is tp or req.tp == tp:
                    asked = req.current_leader_epoch == p.leader_epoch
                    break
            if not asked:
                continue  # not asked for, or its leader epoch changed meanwhile
            follow_up = p.handle_fetch_response_into(resp, now, effects)
            if follow_up == "offsets_for_leader_epoch":
                self._attention.add(p.tp)
                effects += self._send_offsets_for_leader_epoch(p, now)
            elif follow_up == "backoff":
                self._attention.add(p.tp)
                self.ctx.note_deadline(p.fetch_backoff_until)
        self._fetch_next(f, now, effects)  # fetch_into(now, effects, msg.leader_id), on the fetcher in hand
        return effects

    def _send_offsets_for_leader_epoch(self, p: Partition, now: int) -> list[Effect]:
        self.ctx.note_deadline(now + self.fetch_timeout_ms)
        return [
            Send(
                p.leader_id,
                OffsetForLeaderEpochRequest(
                    ref=None,
                    tp=p.tp,
                    leader_epoch=p.leader_epoch,
                    current_leader_epoch=p.leader_epoch,
                    replica_id=self.ctx.node_id,
                ),
            )
        ]

    def handle_offset_for_leader_epoch_response(self, msg: OffsetForLeaderEpochResponse, src: NodeId | None,
                                                now: int) -> list[Effect]:
        """The leader's end of our epoch: truncate to it, then fetch again."""
        p = self.partitions.get(msg.tp)
        if p is None or p.role != FOLLOWER or p.leader_id != src:
            return []
        effects = p.handle_offset_for_leader_epoch_response(msg.error, msg.leader_epoch, msg.end_offset, now)
        return effects + self.maybe_fetch(now)
