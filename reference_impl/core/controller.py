"""The KRaft controller role: the quorum replica plus, on its leader, the
active controller (seed 001 §1.2, §2.8, §2.9; seed 000 "KRaft Controller";
seed 002 for ELR and unclean-shutdown handling).

Shape
-----
``ControllerRole(node_id, config, voters, stored, rng)`` owns a voting
:class:`~.raft.RaftReplica` and two metadata images:

* ``image`` — the *committed* image: every committed metadata record replayed
  in order. Every controller node keeps one (and emits the trace events
  ``partition_metadata``, ``election``, ``broker_fenced``/``broker_unfenced``
  while replaying).
* the *working* image — only on the active controller: the committed image
  plus the records it has appended but not yet seen commit. Requests are
  validated against it, so two changes in flight to one partition see each
  other (Kafka applies its own records at once and reverts on failover; we
  rebuild the working image from the committed one instead).

The active controller is the Raft leader once the NoOp of its epoch has
committed (so its committed image holds every earlier record). Others answer
``NOT_CONTROLLER``; brokers learn the leader from the quorum (``leader_id``).

Writes happen by appending records; a request is answered only when
everything appended up to and including its records has committed. If the
leader loses its epoch first, waiting requests are answered ``NOT_CONTROLLER``
and the broker retries.

Node API (``core/node.py`` calls these)::

    role.start(now) / role.handle(msg, now, src) / role.tick(now) -> list[Effect]
    role.begin_shutdown(now)    # resign quorum leadership before halting
    role.leader_id              # the quorum leader (-1 unknown)
    role.is_active              # this node is the active controller
    role.committed_entries(after_offset) -> list[MetadataEntry]
    role.image                  # committed MetadataImage

``handle`` takes the KRaft messages (:data:`~.raft.RAFT_MESSAGES`) and the
controller requests :data:`CONTROLLER_REQUESTS`. Replies go back with
``Send(src, ...)``; a request with ``src=None`` (a client talking to a
controller-only node) is answered with ``Reply``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .config import ProtocolConfig
from .effects import Effect, Reply, Send, Timer, TraceEvent
from .messages import (
    NO_LEADER,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    Errors,
    MetadataEntry,
    MetadataRecord,
    NewTopic,
    NodeId,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicPartition,
    TopicRecord,
)
from .metadata import RECOVERED, RECOVERING, MetadataImage, PartitionRegistration
from .partition_change import PartitionChangeBuilder
from .raft import RAFT_MESSAGES, RaftReplica
from .storage import StoredState

CONTROLLER_REQUESTS = (
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    AlterPartitionRequest,
    CreateTopicsRequest,
    AllocateProducerIdsRequest,
)

#: producer ids handed out per AllocateProducerIds (Kafka's block size)
PRODUCER_ID_BLOCK = 1000


@dataclass
class _Waiting:
    """A reply held until the metadata log has committed ``offset``."""

    offset: int
    dst: NodeId | None
    msg: Any
    #: what to answer instead if this controller loses leadership first
    on_failover: Any


def _clone(image: MetadataImage) -> MetadataImage:
    return MetadataImage(
        brokers=dict(image.brokers),
        topics={k: dict(v) for k, v in image.topics.items()},
        partitions=dict(image.partitions),
        cluster_configs=dict(image.cluster_configs),
        next_producer_id=image.next_producer_id,
        offset=image.offset,
    )


class ControllerRole:
    def __init__(
        self,
        node_id: NodeId,
        config: ProtocolConfig,
        voters: Iterable[NodeId],
        stored: StoredState | None,
        rng: Any,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.raft = RaftReplica(node_id, tuple(voters), stored or StoredState(), config, rng)
        self.image = MetadataImage()
        self._work: MetadataImage | None = None
        self._active_epoch: int | None = None
        self._waiting: list[_Waiting] = []
        self._sessions: dict[NodeId, int] = {}
        self._assign_cursor = 0
        self._now = 0

    # ------------------------------------------------------------------
    # node API
    # ------------------------------------------------------------------

    @property
    def leader_id(self) -> NodeId:
        return self.raft.leader_id

    @property
    def is_active(self) -> bool:
        return self._work is not None

    def committed_entries(self, after_offset: int) -> list[MetadataEntry]:
        """Committed metadata entries with offset > ``after_offset`` (for a
        co-located broker)."""
        r = self.raft
        if not r.caught_up:
            return []
        lo = max(after_offset + 1, r.log_start) - r.log_start
        hi = r.high_watermark - r.log_start
        return list(r.log[lo:hi]) if hi > lo else []

    def start(self, now: int) -> list[Effect]:
        self._now = now
        return self._after(self.raft.start(now), now)

    def handle(self, msg: Any, now: int, src: NodeId | None = None) -> list[Effect]:
        self._now = now
        if isinstance(msg, RAFT_MESSAGES):
            return self._after(self.raft.handle(msg, now, src), now)
        out: list[Effect] = []
        if isinstance(msg, BrokerRegistrationRequest):
            out += self._on_register(msg, now, src)
        elif isinstance(msg, BrokerHeartbeatRequest):
            out += self._on_heartbeat(msg, now, src)
        elif isinstance(msg, AlterPartitionRequest):
            out += self._on_alter_partition(msg, now, src)
        elif isinstance(msg, CreateTopicsRequest):
            out += self._on_create_topics(msg, now, src)
        elif isinstance(msg, AllocateProducerIdsRequest):
            out += self._on_allocate_producer_ids(msg, now, src)
        else:
            raise TypeError(f"ControllerRole cannot handle {type(msg).__name__}")
        return self._after(out, now)

    def begin_shutdown(self, now: int) -> list[Effect]:
        """A controlled shutdown of this controller: if it leads the quorum it
        resigns (EndQuorumEpoch), so the others elect at once instead of
        waiting for the fetch timeout. Call before halting the node."""
        self._now = now
        return self._after(self.raft.resign(now), now)

    def tick(self, now: int) -> list[Effect]:
        self._now = now
        out = self.raft.tick(now)
        out = self._after(out, now)
        if self._work is not None:
            expired = sorted(
                b for b, deadline in self._sessions.items()
                if deadline <= now and b in self._work.brokers and not self._work.brokers[b].fenced
            )
            for b in expired:
                # seed 001 §1.2.2: no heartbeat within the session timeout -> fenced
                self._fence(b, "session expired")
            for b in [b for b, d in self._sessions.items() if d <= now]:
                del self._sessions[b]
            if expired:
                out = self._after(out, now)
        return out

    # ------------------------------------------------------------------
    # replay, activation, replies
    # ------------------------------------------------------------------

    def _after(self, out: list[Effect], now: int) -> list[Effect]:
        """Collect append effects, replay what committed, (de)activate, and
        release replies whose records committed."""
        out = self.raft.drain_effects() + out
        committed = self.raft.take_committed()
        for e in committed:
            out += self._replay(e)
        out += self._check_leadership(now)
        out += self._release()
        if self._work is not None and self._sessions:
            out.append(Timer(min(self._sessions.values())))
        return out

    def _replay(self, e: MetadataEntry) -> list[Effect]:
        out: list[Effect] = []
        rec = e.record
        before_b = self.image.brokers.get(getattr(rec, "broker_id", -1))
        self.image.replay(rec, e.offset)
        if isinstance(rec, (PartitionRecord, PartitionChangeRecord)):
            p = self.image.partitions.get(rec.tp)
            if p is not None:
                out.append(TraceEvent("partition_metadata", _partition_trace(rec.tp, p)))
                if isinstance(rec, PartitionChangeRecord) and rec.leader is not None and rec.leader != NO_LEADER:
                    kind = rec.reason.rsplit("election:", 1)[1] if "election:" in rec.reason else "clean"
                    out.append(
                        TraceEvent(
                            # "data_kind", not "kind": a trace line's own "kind" is the event kind
                            "election",
                            {"tp": str(rec.tp), "data_kind": kind, "leader": p.leader, "leader_epoch": p.leader_epoch},
                        )
                    )
        elif isinstance(rec, (RegisterBrokerRecord, BrokerRegistrationChangeRecord)):
            after_b = self.image.brokers.get(rec.broker_id)
            was_fenced = before_b is None or before_b.fenced
            if after_b is not None and after_b.fenced != was_fenced:
                kind = "broker_fenced" if after_b.fenced else "broker_unfenced"
                out.append(TraceEvent(kind, {"broker": rec.broker_id, "broker_epoch": after_b.broker_epoch}))
        return out

    def _check_leadership(self, now: int) -> list[Effect]:
        r = self.raft
        ready = r.is_leader and r.high_watermark > r.epoch_start_offset and self.image.offset >= r.epoch_start_offset
        if self._work is not None and (not r.is_leader or r.epoch != self._active_epoch):
            return self._deactivate()
        if self._work is None and ready:
            self._work = _clone(self.image)
            self._active_epoch = r.epoch
            # every live broker gets a fresh session: we cannot know when it last heartbeated
            self._sessions = {
                b: now + self.config.broker_session_timeout_ms
                for b, reg in self.image.brokers.items()
                if not reg.fenced
            }
        return []

    def _deactivate(self) -> list[Effect]:
        out: list[Effect] = []
        self._work = None
        self._active_epoch = None
        self._sessions.clear()
        for w in self._waiting:
            out.append(self._addressed(w.dst, w.on_failover))
        self._waiting.clear()
        return out

    def _release(self) -> list[Effect]:
        out: list[Effect] = []
        done = self.image.offset
        keep: list[_Waiting] = []
        for w in self._waiting:
            if w.offset <= done:
                out.append(self._addressed(w.dst, w.msg))
            else:
                keep.append(w)
        self._waiting = keep
        return out

    @staticmethod
    def _addressed(dst: NodeId | None, msg: Any) -> Effect:
        return Reply(msg) if dst is None else Send(dst, msg)

    def _answer_after_commit(self, dst: NodeId | None, msg: Any, on_failover: Any) -> None:
        """Answer once everything appended so far has committed."""
        self._waiting.append(_Waiting(self.raft.end_offset - 1, dst, msg, on_failover))

    def _write(self, record: MetadataRecord) -> int:
        """Append one record and apply it to the working image at once."""
        assert self._work is not None
        entries = self.raft.append([record], self._now)
        if not entries:  # not leader any more: cannot happen while _work is set
            raise RuntimeError("append refused on the active controller")
        self._work.replay(record, entries[0].offset)
        return entries[0].offset

    # ------------------------------------------------------------------
    # partition changes
    # ------------------------------------------------------------------

    def _is_active_broker(self, broker: NodeId) -> bool:
        assert self._work is not None
        b = self._work.brokers.get(broker)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def _builder(self, tp: TopicPartition, reason: str) -> PartitionChangeBuilder:
        assert self._work is not None
        topic_cfg = self._work.topics.get(tp.topic, {})
        return PartitionChangeBuilder(
            tp=tp,
            current=self._work.partitions[tp],
            is_active=self._is_active_broker,
            min_isr=self.config.min_isr_for(topic_cfg),
            elr_enabled=self.config.elr_enabled(),
            unclean_allowed=self.config.unclean_allowed(topic_cfg),
            reason=reason,
        )

    def _commit_change(self, b: PartitionChangeBuilder) -> bool:
        change = b.build()
        if change is None:
            return False
        self._write(change.record)
        return True

    def _remove_from_isrs(self, broker: NodeId, reason: str) -> None:
        """Shrink every ISR holding ``broker`` and move its leaderships (seed 001 §2.8, §2.9.1)."""
        assert self._work is not None
        for tp in sorted(self._work.partitions):
            p = self._work.partitions[tp]
            if broker in p.isr or p.leader == broker:
                self._commit_change(self._builder(tp, reason).remove_from_isr(broker))

    def _elect_leaderless(self, reason: str) -> None:
        """Give a leader to every partition that has none and now can have one
        (a broker was unfenced: an ISR or ELR member may be back)."""
        assert self._work is not None
        for tp in sorted(self._work.partitions):
            if self._work.partitions[tp].leader == NO_LEADER:
                self._commit_change(self._builder(tp, reason))

    def _fence(self, broker: NodeId, reason: str) -> None:
        assert self._work is not None
        reg = self._work.brokers[broker]
        if not reg.fenced:
            self._write(BrokerRegistrationChangeRecord(broker, reg.broker_epoch, fenced=True))
        self._remove_from_isrs(broker, f"fence {broker}: {reason}")

    # ------------------------------------------------------------------
    # requests
    # ------------------------------------------------------------------

    def _on_register(self, req: BrokerRegistrationRequest, now: int, src: NodeId | None) -> list[Effect]:
        dst = src if src is not None else req.broker_id
        if self._work is None:
            return [self._addressed(dst, BrokerRegistrationResponse(Errors.NOT_CONTROLLER))]
        failover = BrokerRegistrationResponse(Errors.NOT_CONTROLLER)
        existing = self._work.brokers.get(req.broker_id)
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            # a retry of a registration we already wrote
            self._answer_after_commit(dst, BrokerRegistrationResponse(Errors.NONE, existing.broker_epoch), failover)
            return []
        if existing is not None and not existing.fenced:
            # the old incarnation is gone: act as if its session had expired
            self._fence(req.broker_id, "re-registered")
        unclean = existing is not None and req.previous_broker_epoch != existing.broker_epoch
        if unclean and self.config.elr_enabled():
            # KIP-966: an unclean shutdown may have lost data below the HW, so
            # the broker leaves ISR and ELR before its registration is written
            for tp in sorted(self._work.partitions):
                p = self._work.partitions[tp]
                if req.broker_id in p.isr or req.broker_id in p.elr:
                    self._commit_change(
                        self._builder(tp, f"unclean shutdown of {req.broker_id}").mark_unclean_shutdown(req.broker_id)
                    )
        epoch = self.raft.end_offset  # seed 001 §1.2.2: the broker epoch is the record's offset
        self._write(
            RegisterBrokerRecord(
                req.broker_id, epoch, req.incarnation_id, req.endpoint, fenced=True, unclean_shutdown=unclean
            )
        )
        self._sessions[req.broker_id] = now + self.config.broker_session_timeout_ms
        self._answer_after_commit(dst, BrokerRegistrationResponse(Errors.NONE, epoch), failover)
        return []

    def _on_heartbeat(self, req: BrokerHeartbeatRequest, now: int, src: NodeId | None) -> list[Effect]:
        dst = src if src is not None else req.broker_id
        if self._work is None:
            return [self._addressed(dst, BrokerHeartbeatResponse(Errors.NOT_CONTROLLER))]
        reg = self._work.brokers.get(req.broker_id)
        if reg is None:
            return [self._addressed(dst, BrokerHeartbeatResponse(Errors.BROKER_ID_NOT_REGISTERED))]
        if reg.broker_epoch != req.broker_epoch:
            return [self._addressed(dst, BrokerHeartbeatResponse(Errors.STALE_BROKER_EPOCH))]
        self._sessions[req.broker_id] = now + self.config.broker_session_timeout_ms
        committed = self.image.brokers.get(req.broker_id)
        registered = committed is not None and committed.broker_epoch == reg.broker_epoch
        # caught up: the broker has applied the metadata log up to its own registration
        caught_up = registered and req.metadata_offset >= reg.broker_epoch
        should_shut_down = False
        bid = req.broker_id
        if req.want_shutdown:
            if reg.fenced:
                should_shut_down = True
            else:
                # controlled shutdown: leadership moves away, the broker leaves
                # every ISR (it may join the ELR: a clean shutdown keeps its data)
                if not reg.in_controlled_shutdown:
                    self._write(BrokerRegistrationChangeRecord(bid, reg.broker_epoch, in_controlled_shutdown=True))
                self._remove_from_isrs(bid, f"controlled shutdown of {bid}")
                if not any(p.leader == bid for p in self._work.partitions.values()):
                    self._write(BrokerRegistrationChangeRecord(bid, reg.broker_epoch, fenced=True))
                    should_shut_down = True
        elif req.want_fence:
            if not reg.fenced:
                self._fence(bid, "asked to be fenced")
        elif reg.fenced and caught_up:
            self._write(BrokerRegistrationChangeRecord(bid, reg.broker_epoch, fenced=False))
            # seed 002: an unfenced ELR (or last-ISR) member may now lead a leaderless partition
            self._elect_leaderless(f"broker {bid} unfenced")
        now_reg = self._work.brokers[bid]
        resp = BrokerHeartbeatResponse(
            Errors.NONE, is_caught_up=caught_up, is_fenced=now_reg.fenced, should_shut_down=should_shut_down
        )
        self._answer_after_commit(dst, resp, BrokerHeartbeatResponse(Errors.NOT_CONTROLLER))
        return []

    def _on_alter_partition(self, req: AlterPartitionRequest, now: int, src: NodeId | None) -> list[Effect]:
        dst = src if src is not None else req.broker_id
        if self._work is None:
            return [self._addressed(dst, AlterPartitionResponse(req.correlation_id, Errors.NOT_CONTROLLER))]
        reg = self._work.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            return [self._addressed(dst, AlterPartitionResponse(req.correlation_id, Errors.STALE_BROKER_EPOCH))]
        results: list[AlterPartitionResult] = []
        for item in req.items:
            err = self._validate_alter(req.broker_id, item)
            if err == Errors.NONE:
                b = self._builder(item.tp, f"alter-partition from {req.broker_id}")
                b.set_target_isr(m for m, _ in item.new_isr).set_recovery_state(item.leader_recovery_state)
                self._commit_change(b)
            p = self._work.partitions.get(item.tp)
            if err != Errors.NONE or p is None:
                results.append(AlterPartitionResult(item.tp, err))
            else:
                results.append(
                    AlterPartitionResult(
                        item.tp, Errors.NONE, p.leader, p.leader_epoch, p.isr, p.partition_epoch, p.leader_recovery_state
                    )
                )
        resp = AlterPartitionResponse(req.correlation_id, Errors.NONE, tuple(results))
        self._answer_after_commit(dst, resp, AlterPartitionResponse(req.correlation_id, Errors.NOT_CONTROLLER))
        return []

    def _validate_alter(self, broker: NodeId, item: AlterPartitionItem) -> int:
        """Seed 000 (ReplicationControlManager) and seed 001 §2.9.2."""
        assert self._work is not None
        p = self._work.partitions.get(item.tp)
        if p is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        # optimistic concurrency: a proposal built on an older partition state
        # (a zombie leader, or a race with a controller-side change) is refused
        if item.partition_epoch != p.partition_epoch:
            return Errors.INVALID_UPDATE_VERSION
        if item.leader_epoch != p.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if broker != p.leader:
            return Errors.INVALID_REQUEST
        isr = [m for m, _ in item.new_isr]
        if len(set(isr)) != len(isr) or not set(isr) <= set(p.replicas) or p.leader not in isr:
            return Errors.INVALID_REQUEST
        if item.leader_recovery_state not in (RECOVERED, RECOVERING):
            return Errors.INVALID_REQUEST
        # after an unclean election the leader recovers alone, and a
        # recovered partition never goes back to RECOVERING
        if item.leader_recovery_state == RECOVERING and len(isr) > 1:
            return Errors.INVALID_REQUEST
        if p.leader_recovery_state == RECOVERED and item.leader_recovery_state == RECOVERING:
            return Errors.INVALID_REQUEST
        for m, epoch in item.new_isr:
            reg = self._work.brokers.get(m)
            if reg is None or reg.fenced or reg.in_controlled_shutdown:
                return Errors.INELIGIBLE_REPLICA
            if epoch != -1 and epoch != reg.broker_epoch:
                return Errors.INELIGIBLE_REPLICA
        return Errors.NONE

    def _on_create_topics(self, req: CreateTopicsRequest, now: int, src: NodeId | None) -> list[Effect]:
        if self._work is None:
            results = tuple(CreateTopicResult(t.name, Errors.NOT_CONTROLLER, "not the active controller") for t in req.topics)
            return [self._addressed(src, CreateTopicsResponse(req.ref, results))]
        results_l: list[CreateTopicResult] = []
        seen: set[str] = set()
        for t in req.topics:
            err, message = self._create_topic(t, seen)
            seen.add(t.name)
            results_l.append(CreateTopicResult(t.name, err, message))
        results = tuple(results_l)
        failed = tuple(
            CreateTopicResult(r.name, Errors.NOT_CONTROLLER if r.error == Errors.NONE else r.error, r.message)
            for r in results
        )
        self._answer_after_commit(src, CreateTopicsResponse(req.ref, results), CreateTopicsResponse(req.ref, failed))
        return []

    def _create_topic(self, t: NewTopic, seen: set[str]) -> tuple[int, str]:
        assert self._work is not None
        if not t.name or t.name in self._work.topics or t.name in seen:
            return Errors.TOPIC_ALREADY_EXISTS if t.name else Errors.INVALID_REQUEST, f"topic {t.name!r} already exists"
        configs = dict(t.configs)
        if "min.insync.replicas" in configs:
            try:
                if int(configs["min.insync.replicas"]) < 1:
                    raise ValueError
            except ValueError:
                return Errors.INVALID_CONFIG, "min.insync.replicas must be a positive integer"
        if "unclean.leader.election.enable" in configs and configs["unclean.leader.election.enable"].lower() not in (
            "true",
            "false",
        ):
            return Errors.INVALID_CONFIG, "unclean.leader.election.enable must be true or false"
        live = sorted(b for b, reg in self._work.brokers.items() if not reg.fenced and not reg.in_controlled_shutdown)
        if t.assignments is not None:
            assignments = [tuple(a) for a in t.assignments]
            if not assignments:
                return Errors.INVALID_PARTITIONS, "no partitions"
            for a in assignments:
                if not a or len(set(a)) != len(a) or any(b not in self._work.brokers for b in a):
                    return Errors.INVALID_REPLICATION_FACTOR, f"invalid replica assignment {list(a)}"
        else:
            n = t.num_partitions if t.num_partitions != -1 else self.config.num_partitions
            rf = t.replication_factor if t.replication_factor != -1 else self.config.default_replication_factor
            if n <= 0:
                return Errors.INVALID_PARTITIONS, "number of partitions must be positive"
            if rf <= 0 or rf > len(live):
                return Errors.INVALID_REPLICATION_FACTOR, f"replication factor {rf} with {len(live)} unfenced brokers"
            # spread leaders and replicas round-robin over the unfenced brokers
            start = self._assign_cursor
            self._assign_cursor += n
            assignments = [tuple(live[(start + p + i) % len(live)] for i in range(rf)) for p in range(n)]
        self._write(TopicRecord(t.name, tuple(sorted(configs.items()))))
        for p, replicas in enumerate(assignments):
            isr = tuple(r for r in replicas if self._is_active_broker(r))
            leader = isr[0] if isr else NO_LEADER
            if not isr:
                isr = replicas
            self._write(PartitionRecord(TopicPartition(t.name, p), replicas, isr, leader))
        return Errors.NONE, ""

    def _on_allocate_producer_ids(self, req: AllocateProducerIdsRequest, now: int, src: NodeId | None) -> list[Effect]:
        dst = src if src is not None else req.broker_id
        if self._work is None:
            return [self._addressed(dst, AllocateProducerIdsResponse(Errors.NOT_CONTROLLER))]
        reg = self._work.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            return [self._addressed(dst, AllocateProducerIdsResponse(Errors.STALE_BROKER_EPOCH))]
        start = self._work.next_producer_id
        self._write(ProducerIdsRecord(req.broker_id, req.broker_epoch, start + PRODUCER_ID_BLOCK))
        self._answer_after_commit(
            dst, AllocateProducerIdsResponse(Errors.NONE, start, PRODUCER_ID_BLOCK), AllocateProducerIdsResponse(Errors.NOT_CONTROLLER)
        )
        return []


def _partition_trace(tp: TopicPartition, p: PartitionRegistration) -> dict[str, Any]:
    return {
        "tp": str(tp),
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "elr": list(p.elr),
        "last_known_elr": list(p.last_known_elr),
        "recovery_state": p.leader_recovery_state,
    }


__all__ = ["ControllerRole", "CONTROLLER_REQUESTS", "PRODUCER_ID_BLOCK"]
