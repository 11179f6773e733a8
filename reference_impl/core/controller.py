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

    role.start(now, mono) / role.handle(msg, now, src, mono) / role.tick(now, mono) -> list[Effect]
    role.begin_shutdown(now, mono)  # resign quorum leadership before halting

``now`` is the node's wall clock (the KRaft timers read it, as Kafka's
Raft client reads ``time.milliseconds()``), ``mono`` its monotonic clock
(broker sessions, recovery deadlines, the quorum leader's parked fetches);
``mono=None`` means the two agree.
    role.leader_id              # the quorum leader (-1 unknown)
    role.is_active              # this node is the active controller
    role.committed_entries(after_offset) -> list[MetadataEntry]
    role.image                  # committed MetadataImage

``handle`` takes the KRaft messages (:data:`~.raft.RAFT_MESSAGES`) and the
controller requests :data:`CONTROLLER_REQUESTS`. Replies go back with
``Send(src, ...)``; a request with ``src=None`` (a client talking to a
controller-only node) is answered with ``Reply``.

Unclean recovery (seed 002, KIP-966)
------------------------------------
With ``unclean.recovery.manager.enabled`` (and KIP-966 on), a partition that
the election rules of :mod:`.partition_change` hand to unclean recovery is
not given an arbitrary live replica. The active controller sends
``GetReplicaLogInfoRequest`` to every active replica (and to replicas that
become active while it waits, re-sending to the silent ones), then elects
the one with the longest log: highest last leader epoch, then highest log
end offset, then assignment order. It elects when

* ``Aggressive``: every asked replica has answered, or
  ``unclean.recovery.timeout.ms`` has passed and some replica answered (so
  after the timeout the first answer elects);
* ``Balanced``: as Aggressive, and in any case not before every LastKnownELR
  member has answered (the rules start a Balanced recovery only once they
  are all active; if one is fenced again the recovery is dropped).

Answers are checked the seed's way: the broker epoch must still be the
broker's registered one (a reboot since makes its answer stale), and the
leader epoch the replica's metadata holds must not be newer than the one the
recovery started from. The election record says ``election:recovery`` (trace
``election`` with ``data_kind="recovery"``); the ISR is the new leader alone
and the partition is ``RECOVERING``. Nothing about a recovery in progress is
written to the metadata log: a new active controller starts over, since on
activation it looks at every leaderless partition.

LastKnownLeader (seed 002, "Delivery plan")
-------------------------------------------
With the recovery manager off (Kafka's default) the builder records the last
ISR member when a fence, controlled shutdown or unclean-shutdown registration
empties the ISR, and elects it once it is unfenced if no ISR or ELR member is
left. The controller needs nothing more than what it already does: every
unfencing builds every leaderless partition again (``_elect_leaderless``), so
when all replicas of a partition were SIGKILLed and came back after unclean
shutdowns, the partition leads again as soon as its LastKnownLeader is
unfenced (trace ``election`` with ``data_kind="last-known-leader"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Iterable

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
    AlterConfigsResource,
    AlterConfigsResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    ReassignmentResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    CONFIG_DELETE,
    CONFIG_SET,
    RESOURCE_TOPIC,
    ConfigRecord,
    Errors,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
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
    UnregisterBrokerRecord,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from .errors import LocalProtocolError, UnroutableMessage
from .metadata import RECOVERED, RECOVERING, MetadataImage, PartitionRegistration
from .partition_change import BALANCED, PartitionChangeBuilder, reassignment_replicas, revert_reassignment
from .raft import RAFT_MESSAGES, RaftReplica, Rng
from .storage import StoredState
from .topic_names import topic_name_error

CONTROLLER_REQUESTS: Final = (
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    AlterPartitionRequest,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    AllocateProducerIdsRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    UnregisterBrokerRequest,
)

#: the topic configs the reference implementation reads (the rest of Kafka's are refused)
ALTERABLE_TOPIC_CONFIGS: Final = ("min.insync.replicas", "unclean.leader.election.enable")

#: producer ids handed out per AllocateProducerIds (Kafka's block size)
PRODUCER_ID_BLOCK: Final = 1000


@dataclass
class _Recovery:
    """One unclean recovery in progress (seed 002). Kept only in the active
    controller's memory: a failover starts it again."""

    tp: TopicPartition
    strategy: str
    #: the partition's leader epoch when the recovery began
    leader_epoch: int
    correlation_id: int
    #: unclean.recovery.timeout.ms after the start
    deadline: int
    #: broker -> the broker epoch it had when asked
    asked: dict[NodeId, int]
    #: broker -> (last written leader epoch, log end offset)
    answers: dict[NodeId, tuple[int, int]]
    next_resend: int


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
        rng: Rng,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.raft = RaftReplica(node_id, tuple(voters), stored or StoredState(), config, rng)
        self.image = MetadataImage()
        self._work: MetadataImage | None = None
        self._active_epoch: int | None = None
        self._waiting: list[_Waiting] = []
        self._sessions: dict[NodeId, int] = {}
        #: the metadata offset each broker last reported in a heartbeat, and
        #: for a broker in controlled shutdown the offset of the last record
        #: that moved its leaderships (BrokerHeartbeatManager; in memory only)
        self._metadata_offsets: dict[NodeId, int] = {}
        self._shutdown_offsets: dict[NodeId, int] = {}
        self._assign_cursor = 0
        self._now = 0
        #: monotonic time of the current call, and wall minus monotonic: the
        #: broker sessions and the recovery deadlines are monotonic, as
        #: Kafka's BrokerHeartbeatManager and controller event queue read
        #: ``time.nanoseconds()`` (docs/architecture.md, "Clocks")
        self._mono = 0
        self._skew = 0
        #: unclean recoveries in progress (active controller only)
        self._recoveries: dict[TopicPartition, _Recovery] = {}
        self._recovery_ids = 0
        #: messages to brokers produced while handling something else
        self._outbox: list[Effect] = []
        #: look at every leaderless partition once this controller is active
        self._scan_pending = False

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

    def _clock(self, now: int, mono: int | None) -> None:
        self._now = now
        self._mono = now if mono is None else mono
        self._skew = now - self._mono

    def start(self, now: int, mono: int | None = None) -> list[Effect]:
        self._clock(now, mono)
        return self._finish(self.raft.start(now, mono), now)

    def handle(self, msg: Any, now: int, src: NodeId | None = None, mono: int | None = None) -> list[Effect]:
        self._clock(now, mono)
        if isinstance(msg, RAFT_MESSAGES):
            return self._finish(self.raft.handle(msg, now, src, mono), now)
        out: list[Effect] = []
        if isinstance(msg, BrokerRegistrationRequest):
            out += self._on_register(msg, now, src)
        elif isinstance(msg, BrokerHeartbeatRequest):
            out += self._on_heartbeat(msg, now, src)
        elif isinstance(msg, AlterPartitionRequest):
            out += self._on_alter_partition(msg, now, src)
        elif isinstance(msg, CreateTopicsRequest):
            out += self._on_create_topics(msg, now, src)
        elif isinstance(msg, IncrementalAlterConfigsRequest):
            out += self._on_incremental_alter_configs(msg, src)
        elif isinstance(msg, AllocateProducerIdsRequest):
            out += self._on_allocate_producer_ids(msg, now, src)
        elif isinstance(msg, AlterPartitionReassignmentsRequest):
            out += self._on_alter_reassignments(msg, src)
        elif isinstance(msg, ListPartitionReassignmentsRequest):
            out += self._on_list_reassignments(msg, src)
        elif isinstance(msg, UnregisterBrokerRequest):
            out += self._on_unregister_broker(msg, src)
        elif isinstance(msg, GetReplicaLogInfoResponse):
            self._on_replica_log_info(msg)
        else:
            raise UnroutableMessage(f"ControllerRole cannot handle {type(msg).__name__}")
        return self._finish(out, now)

    def begin_shutdown(self, now: int, mono: int | None = None) -> list[Effect]:
        """A controlled shutdown of this controller: if it leads the quorum it
        resigns (EndQuorumEpoch), so the others elect at once instead of
        waiting for the fetch timeout. Call before halting the node."""
        self._clock(now, mono)
        return self._after(self.raft.resign(now, mono), now)

    def tick(self, now: int, mono: int | None = None) -> list[Effect]:
        self._clock(now, mono)
        out = self.raft.tick(now, mono)
        out = self._finish(out, now)
        if self._work is not None:
            mono_now = self._mono
            # BrokerHeartbeatManager: a session is judged on the monotonic
            # clock, so a wall-clock jump on the controller fences no broker
            expired = sorted(
                b for b, deadline in self._sessions.items()
                if deadline <= mono_now and b in self._work.brokers and not self._work.brokers[b].fenced
            )
            for b in expired:
                # seed 001 §1.2.2: no heartbeat within the session timeout -> fenced
                self._fence(b, "session expired")
            for b in [b for b, d in self._sessions.items() if d <= mono_now]:
                del self._sessions[b]
            if expired:
                out = self._finish(out, now)
        return out

    @property
    def recovering_partitions(self) -> list[TopicPartition]:
        """Partitions with an unclean recovery in progress (Kafka's
        unclean_recovery_partitions_count gauge counts these)."""
        return sorted(self._recoveries)

    # ------------------------------------------------------------------
    # replay, activation, replies
    # ------------------------------------------------------------------

    def _finish(self, out: list[Effect], now: int) -> list[Effect]:
        """:meth:`_after`, then the work that follows any event on the active
        controller: a first look at leaderless partitions after activation,
        and unclean recoveries moving on (new answers, brokers fenced or
        unfenced, deadlines). Their appends are drained by a second pass."""
        out = self._after(out, now)
        if self._work is not None and (self._scan_pending or self._recoveries):
            if self._scan_pending:
                self._scan_pending = False
                self._elect_leaderless("controller activated")
            self._drive_recoveries(self._mono)
            out = self._after(out, now)
        return out

    def _after(self, out: list[Effect], now: int) -> list[Effect]:
        """Collect append effects, replay what committed, (de)activate, and
        release replies whose records committed."""
        out = self.raft.drain_effects() + out
        committed = self.raft.take_committed()
        for e in committed:
            out += self._replay(e)
        out += self._check_leadership(now)
        out += self._release()
        if self._outbox:
            out += self._outbox
            self._outbox = []
        # Timer takes wall time: a monotonic deadline is moved by the skew
        if self._work is not None and self._sessions:
            out.append(Timer(min(self._sessions.values()) + self._skew))
        if self._work is not None and self._recoveries:
            # a deadline already passed is not a wake-up any more (the first answer elects)
            mono = self._mono
            out.append(
                Timer(min(min(r.next_resend, r.deadline) if r.deadline > mono else r.next_resend
                          for r in self._recoveries.values()) + self._skew)
            )
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
        elif isinstance(rec, UnregisterBrokerRecord):
            if before_b is not None and rec.broker_id not in self.image.brokers:
                out.append(TraceEvent("broker_unregistered", {"broker": rec.broker_id, "broker_epoch": rec.broker_epoch}))
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
            # seed 002: a recovery is not in the metadata log, so a new active
            # controller looks at every leaderless partition afresh
            self._scan_pending = True
            # every live broker gets a fresh session: we cannot know when it last heartbeated
            self._sessions = {
                b: self._mono + self.config.broker_session_timeout_ms
                for b, reg in self.image.brokers.items()
                if not reg.fenced
            }
        return []

    def _deactivate(self) -> list[Effect]:
        out: list[Effect] = []
        self._work = None
        self._active_epoch = None
        self._sessions.clear()
        self._metadata_offsets.clear()
        self._shutdown_offsets.clear()
        self._recoveries.clear()
        self._outbox.clear()
        self._scan_pending = False
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
            raise LocalProtocolError("append refused on the active controller")
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
            recovery_strategy=self.config.recovery_strategy_for(topic_cfg),
        )

    def _commit_change(self, b: PartitionChangeBuilder) -> bool:
        change = b.build()
        if b.needs_recovery and b.tp not in self._recoveries:
            # the leader epoch after this change (going leaderless bumps it)
            self._start_recovery(b, change.after.leader_epoch if change is not None else b.current.leader_epoch)
        if change is None:
            return False
        self._write(change.record)
        return True

    # ------------------------------------------------------------------
    # unclean recovery (seed 002, KIP-966)
    # ------------------------------------------------------------------

    @property
    def _recovery_resend_ms(self) -> int:
        """Ask a silent replica again after this long: the simulator drops
        what TCP would only delay, and a fenced broker leaves the wait anyway."""
        return max(1000, 2 * self.config.broker_heartbeat_interval_ms)

    def _start_recovery(self, b: PartitionChangeBuilder, epoch: int) -> None:
        assert b.recovery_strategy is not None
        self._recovery_ids += 1
        now = self._mono
        self._recoveries[b.tp] = _Recovery(
            tp=b.tp,
            strategy=b.recovery_strategy,
            leader_epoch=epoch,
            correlation_id=self._recovery_ids,
            deadline=now + self.config.unclean_recovery_timeout_ms,
            asked={},
            answers={},
            next_resend=now + self._recovery_resend_ms,
        )

    def _ask(self, rec: _Recovery, broker: NodeId) -> None:
        self._outbox.append(Send(broker, GetReplicaLogInfoRequest(broker, (rec.tp,), rec.correlation_id)))

    def _on_replica_log_info(self, msg: GetReplicaLogInfoResponse) -> None:
        if self._work is None:
            return
        reg = self._work.brokers.get(msg.broker_id)
        for info in msg.partitions:
            rec = self._recoveries.get(info.tp)
            if rec is None or rec.correlation_id != msg.correlation_id or msg.broker_id not in rec.asked:
                continue  # no such recovery (any more): a late answer
            if reg is None or msg.broker_epoch != reg.broker_epoch or msg.broker_epoch != rec.asked[msg.broker_id]:
                continue  # seed 002: the broker rebooted since it was asked
            if info.error != Errors.NONE:
                continue  # no log to offer yet: asked again at the next resend
            if info.current_leader_epoch > rec.leader_epoch:
                continue  # seed 002: a leader epoch newer than this recovery's fences it
            rec.answers[msg.broker_id] = (info.last_written_leader_epoch, info.log_end_offset)

    def _drive_recoveries(self, mono: int) -> None:
        """Move every recovery on: keep the set of asked replicas equal to the
        active ones, drop recoveries the rules no longer call for, and elect
        the longest log once the strategy's wait is over."""
        assert self._work is not None
        for tp in sorted(self._recoveries):
            rec = self._recoveries[tp]
            p = self._work.partitions.get(tp)
            if p is None or p.leader != NO_LEADER:
                del self._recoveries[tp]
                continue
            b = self._builder(tp, "unclean recovery")
            change = b.build()
            if change is not None and change.election is not None:
                # an ISR or ELR member came back: a clean election instead
                del self._recoveries[tp]
                self._write(change.record)
                continue
            if not b.needs_recovery:
                del self._recoveries[tp]  # e.g. Balanced: a LastKnownELR member was fenced again
                continue
            for r in list(rec.asked):
                reg = self._work.brokers.get(r)
                if not self._is_active_broker(r) or reg is None or reg.broker_epoch != rec.asked[r]:
                    del rec.asked[r]
                    rec.answers.pop(r, None)
            for r in p.replicas:
                if r not in rec.asked and self._is_active_broker(r):
                    rec.asked[r] = self._work.brokers[r].broker_epoch
                    self._ask(rec, r)
            leader = self._recovery_choice(rec, p, mono)
            if leader is not None:
                del self._recoveries[tp]
                # the answers go into the record's reason: the metadata log shows why this leader
                heard = " ".join(f"{r}:{e}/{leo}" for r, (e, leo) in sorted(rec.answers.items()))
                reason = f"unclean recovery ({rec.strategy}; epoch/leo {heard})"
                change = self._builder(tp, reason).set_recovery_leader(leader).build()
                if change is not None:
                    self._write(change.record)
                continue
            if mono >= rec.next_resend:
                for r in rec.asked:
                    if r not in rec.answers:
                        self._ask(rec, r)
                rec.next_resend = mono + self._recovery_resend_ms

    def _recovery_choice(self, rec: _Recovery, p: PartitionRegistration, mono: int) -> NodeId | None:
        """The longest log once the strategy's wait is over, else None."""
        if not rec.answers:
            return None
        if rec.strategy == BALANCED and not all(r in rec.answers for r in p.last_known_elr):
            return None
        if mono < rec.deadline and not all(r in rec.answers for r in rec.asked):
            return None
        order = {r: i for i, r in enumerate(p.replicas)}
        # seed 002: the highest leader epoch, then the longest log end offset
        return max(rec.answers, key=lambda r: (rec.answers[r][0], rec.answers[r][1], -order.get(r, 0)))

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
            if self._sessions.get(req.broker_id, self._mono) > self._mono:
                # ClusterControlManager.registerBroker: another incarnation
                # still holds a live session (a broker restarted within the
                # session timeout, or a second process with the same id); it
                # registers once that session has expired and it is fenced
                return [self._addressed(dst, BrokerRegistrationResponse(Errors.DUPLICATE_BROKER_REGISTRATION))]
            # the session is over but the fencing timer has not run yet
            self._fence(req.broker_id, "re-registered after its session expired")
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
        self._sessions[req.broker_id] = self._mono + self.config.broker_session_timeout_ms
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
        self._sessions[req.broker_id] = self._mono + self.config.broker_session_timeout_ms
        self._metadata_offsets[req.broker_id] = req.metadata_offset
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
                should_shut_down = self._controlled_shutdown(bid, reg.broker_epoch, reg.in_controlled_shutdown)
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

    def _controlled_shutdown(self, bid: NodeId, broker_epoch: int, already: bool) -> bool:
        """One heartbeat of a broker asking to shut down; True when it may
        (BrokerHeartbeatManager.calculateNextBrokerState, CONTROLLED_SHUTDOWN).

        Its leaderships move away and it leaves every ISR (it may join the
        ELR: a clean shutdown keeps its data). It may stop only once it leads
        nothing *and* every active broker has reported (in its heartbeats) a
        metadata offset at or past the last record that moved those
        leaderships, so the new leaders lead before the old one halts; then it
        is fenced."""
        assert self._work is not None
        end = self.raft.end_offset
        if not already:
            self._write(BrokerRegistrationChangeRecord(bid, broker_epoch, in_controlled_shutdown=True))
        self._remove_from_isrs(bid, f"controlled shutdown of {bid}")
        if self.raft.end_offset != end or bid not in self._shutdown_offsets:
            self._shutdown_offsets[bid] = self.raft.end_offset - 1
        if any(p.leader == bid for p in self._work.partitions.values()):
            return False
        active = [b for b in self._work.brokers if b != bid and self._is_active_broker(b)]
        lowest = min((self._metadata_offsets.get(b, -1) for b in active), default=None)
        if lowest is not None and self._shutdown_offsets[bid] > lowest:
            return False
        self._write(BrokerRegistrationChangeRecord(bid, broker_epoch, fenced=True))
        self._shutdown_offsets.pop(bid, None)
        return True

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
                b.set_target_isr([m for m, _ in item.new_isr]).set_recovery_state(item.leader_recovery_state)
                self._commit_change(b)
            p = self._work.partitions.get(item.tp)
            if err == Errors.NONE and p is not None and p.leader != req.broker_id:
                # ReplicationControlManager.alterPartition: the change completed
                # a reassignment that removed the sender, whose leadership moved
                # (KIP-455); it hears NEW_LEADER_ELECTED and waits for metadata
                err = Errors.NEW_LEADER_ELECTED
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
        """Seed 000 (ReplicationControlManager) and seed 001 §2.9.2, checked in
        the order Kafka's ``validateAlterPartitionData`` checks them (the seeds
        list the conditions but not their order):

        1. epochs *ahead* of ours: this controller is behind the metadata log
           the broker saw, NOT_CONTROLLER (the broker retries);
        2. an older leader epoch, FENCED_LEADER_EPOCH (a zombie leader);
        3. a sender that is not the leader, INVALID_REQUEST;
        4. an older partition epoch, INVALID_UPDATE_VERSION (optimistic
           concurrency: the proposal was built on a state that has since moved
           on, e.g. a controller-side ISR change in the same leader epoch);
        5. the proposed ISR itself, then each member's eligibility."""
        assert self._work is not None
        p = self._work.partitions.get(item.tp)
        if p is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if item.leader_epoch > p.leader_epoch or item.partition_epoch > p.partition_epoch:
            return Errors.NOT_CONTROLLER
        if item.leader_epoch < p.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if broker != p.leader:
            return Errors.INVALID_REQUEST
        if item.partition_epoch < p.partition_epoch:
            return Errors.INVALID_UPDATE_VERSION
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

    # ------------------------------------------------------------------
    # partition reassignment (KIP-455)
    # ------------------------------------------------------------------

    def _on_alter_reassignments(self, req: AlterPartitionReassignmentsRequest, src: NodeId | None) -> list[Effect]:
        """AlterPartitionReassignments (KIP-455; Kafka's
        ReplicationControlManager.alterPartitionReassignments): each partition
        is checked and changed on its own (one refused partition does not stop
        the others), its record written through the quorum, and the answer
        sent once everything has committed. A target list moves the partition
        (:meth:`_change_reassignment`); ``None`` cancels the reassignment in
        progress (:meth:`_cancel_reassignment`)."""
        if self._work is None:
            return [self._addressed(src, AlterPartitionReassignmentsResponse(req.ref, tuple(
                ReassignmentResult(r.tp, Errors.NOT_CONTROLLER, "not the active controller") for r in req.partitions)))]
        results: list[ReassignmentResult] = []
        for r in req.partitions:
            p = self._work.partitions.get(r.tp)
            if p is None:
                err, message = Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {r.tp.topic}:{r.tp.partition}."
            elif r.replicas is None:
                err, message = self._cancel_reassignment(r.tp, p)
            elif not req.allow_replication_factor_change and len(r.replicas) != len(p.replicas) - len(p.removing_replicas):
                # KIP-860: the replication factor is the target's of any reassignment in progress
                err, message = Errors.INVALID_REPLICATION_FACTOR, (
                    f"The replication factor is changed from {len(p.replicas) - len(p.removing_replicas)} to "
                    f"{len(r.replicas)} but AllowReplicationFactorChange is false.")
            else:
                err, message = self._change_reassignment(r.tp, p, tuple(r.replicas))
            results.append(ReassignmentResult(r.tp, err, message))
        failover = tuple(ReassignmentResult(x.tp, Errors.NOT_CONTROLLER if x.error == Errors.NONE else x.error, x.message)
                         for x in results)
        self._answer_after_commit(src, AlterPartitionReassignmentsResponse(req.ref, tuple(results)),
                                  AlterPartitionReassignmentsResponse(req.ref, failover))
        return []

    def _change_reassignment(self, tp: TopicPartition, p: PartitionRegistration,
                             target: tuple[NodeId, ...]) -> tuple[int, str]:
        """ReplicationControlManager.changePartitionReassignment: the target
        is validated as a manual assignment (registered brokers, no
        duplicates, one active broker at least), then the replica list
        becomes the union of the current list and the target, with adding
        and removing recorded (PartitionReassignmentReplicas). The builder
        completes it in the same record when the ISR already holds the
        whole target (a reorder or a pure removal)."""
        bad = self._check_assignment(target, len(target), tp.partition)
        if bad:
            return Errors.INVALID_REPLICA_ASSIGNMENT, bad
        replicas, adding, removing = reassignment_replicas(p.replicas, target)
        b = self._builder(tp, f"reassignment to {list(target)}")
        if replicas != p.replicas:
            b.set_target_replicas(replicas)
        b.set_target_adding(adding).set_target_removing(removing)
        self._commit_change(b)
        return Errors.NONE, ""

    def _cancel_reassignment(self, tp: TopicPartition, p: PartitionRegistration) -> tuple[int, str]:
        """ReplicationControlManager.cancelPartitionReassignment: only a
        partition being reassigned, back to its original replicas
        (PartitionReassignmentRevert); a revert that needs an unclean
        election is refused unless the topic allows one."""
        assert self._work is not None
        if not p.is_reassigning:
            return Errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
        replicas, isr, unclean = revert_reassignment(p)
        if unclean and not self.config.unclean_allowed(self._work.topics.get(tp.topic, {})):
            return Errors.INVALID_REPLICA_ASSIGNMENT, (
                f"Unable to revert partition assignment for {tp.topic}:{tp.partition} because it would "
                "require an unclean leader election.")
        b = self._builder(tp, "reassignment cancelled" + (" (unclean: no original replica in the ISR)" if unclean else ""))
        b.set_target_isr(isr).set_target_replicas(replicas).set_target_adding(()).set_target_removing(())
        if unclean:
            b.set_recovery_state(RECOVERING)  # the leader recovers alone, as after an unclean election
        self._commit_change(b)
        return Errors.NONE, ""

    def _on_list_reassignments(self, req: ListPartitionReassignmentsRequest, src: NodeId | None) -> list[Effect]:
        """ListPartitionReassignments (KIP-455): every partition being
        reassigned (or those asked for that are), as the committed image has
        them (Kafka reads it at the last committed offset): its replica list,
        adding and removing replicas."""
        if self._work is None:
            return [self._addressed(src, ListPartitionReassignmentsResponse(req.ref, Errors.NOT_CONTROLLER))]
        tps = sorted(self.image.partitions) if req.tps is None else list(req.tps)
        ongoing = []
        for tp in tps:
            p = self.image.partitions.get(tp)
            if p is not None and p.is_reassigning:
                ongoing.append(OngoingReassignment(tp, p.replicas, p.adding_replicas, p.removing_replicas))
        return [self._addressed(src, ListPartitionReassignmentsResponse(req.ref, Errors.NONE, tuple(ongoing)))]

    # ------------------------------------------------------------------
    # broker removal (KIP-631 UnregisterBroker)
    # ------------------------------------------------------------------

    def _on_unregister_broker(self, req: UnregisterBrokerRequest, src: NodeId | None) -> list[Effect]:
        """UnregisterBroker (KIP-631; Kafka's ReplicationControlManager
        .unregisterBroker and handleBrokerUnregistered): a broker that is not
        registered is BROKER_ID_NOT_REGISTERED; else every partition with it
        in its ISR or ELR changes as for a fencing, with the broker no
        acceptable leader, and an UnregisterBrokerRecord removes the
        registration. Its assigned replicas stay where they are: an operator
        moves them first (reassignment). A broker still running registers
        again at its next heartbeat (BROKER_ID_NOT_REGISTERED), as a new one."""
        if self._work is None:
            return [self._addressed(src, UnregisterBrokerResponse(req.ref, Errors.NOT_CONTROLLER))]
        bid = req.broker_id
        reg = self._work.brokers.get(bid)
        if reg is None:
            return [self._addressed(src, UnregisterBrokerResponse(
                req.ref, Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {bid} is not currently registered"))]
        for tp in sorted(self._work.partitions):
            p = self._work.partitions[tp]
            if bid in p.isr or bid in p.elr or p.leader == bid:
                self._commit_change(self._builder(tp, f"unregister broker {bid}").remove_broker(bid))
        self._write(UnregisterBrokerRecord(bid, reg.broker_epoch))
        self._sessions.pop(bid, None)
        self._metadata_offsets.pop(bid, None)
        self._shutdown_offsets.pop(bid, None)
        self._answer_after_commit(src, UnregisterBrokerResponse(req.ref, Errors.NONE),
                                  UnregisterBrokerResponse(req.ref, Errors.NOT_CONTROLLER))
        return []

    def _on_create_topics(self, req: CreateTopicsRequest, now: int, src: NodeId | None) -> list[Effect]:
        if self._work is None:
            results = tuple(CreateTopicResult(t.name, Errors.NOT_CONTROLLER, "not the active controller") for t in req.topics)
            return [self._addressed(src, CreateTopicsResponse(req.ref, results))]
        results_l: list[CreateTopicResult] = []
        seen: set[str] = set()
        for t in req.topics:
            err, message = self._create_topic(t, seen, req.internal)
            seen.add(t.name)
            results_l.append(CreateTopicResult(t.name, err, message))
        results = tuple(results_l)
        failed = tuple(
            CreateTopicResult(r.name, Errors.NOT_CONTROLLER if r.error == Errors.NONE else r.error, r.message)
            for r in results
        )
        self._answer_after_commit(src, CreateTopicsResponse(req.ref, results), CreateTopicsResponse(req.ref, failed))
        return []

    def _create_topic(self, t: NewTopic, seen: set[str], internal: bool = False) -> tuple[int, str]:
        assert self._work is not None
        bad_name = topic_name_error(t.name, internal)  # ReplicationControlManager validates names first
        if bad_name is not None:
            return Errors.INVALID_TOPIC_EXCEPTION, bad_name
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
        live = sorted(b for b in self._work.brokers if self._is_active_broker(b))
        if t.assignments is not None:
            # ReplicationControlManager.validateManualPartitionAssignment, and
            # createTopic's refusal of a partition with no active replica
            assignments = [tuple(a) for a in t.assignments]
            if not assignments:
                return Errors.INVALID_PARTITIONS, "no partitions"
            for i, a in enumerate(assignments):
                err = self._check_assignment(a, len(assignments[0]), i)
                if err:
                    return Errors.INVALID_REPLICA_ASSIGNMENT, err
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
            isr = tuple(r for r in replicas if self._is_active_broker(r))  # never empty (checked above)
            self._write(PartitionRecord(TopicPartition(t.name, p), replicas, isr, isr[0]))
        return Errors.NONE, ""

    def _on_incremental_alter_configs(self, req: IncrementalAlterConfigsRequest, src: NodeId | None) -> list[Effect]:
        """IncrementalAlterConfigs for topic configs (Kafka's
        ConfigurationControlManager): each resource is validated whole, then
        written as ``ConfigRecord``s through the quorum and answered once
        they commit. A change of min.insync.replicas (or of
        unclean.leader.election.enable) rebuilds every partition of the topic
        (QuorumController's min-ISR config update): seed 002, "When updating
        the config min.insync.replicas, if the new min ISR <= current ISR, the
        ELR will be removed"; a leaderless partition may elect."""
        if self._work is None:
            failed = tuple(AlterConfigsResult(r.resource_type, r.name, Errors.NOT_CONTROLLER, "not the active controller")
                           for r in req.resources)
            return [self._addressed(src, IncrementalAlterConfigsResponse(req.ref, failed))]
        results: list[AlterConfigsResult] = []
        for res in req.resources:
            err, message = self._check_config_resource(res)
            if err == Errors.NONE and not req.validate_only:
                for op in res.ops:
                    self._write(ConfigRecord(res.name, op.name, op.value if op.op == CONFIG_SET else None))
                for tp in self._work.topic_partitions(res.name):
                    self._commit_change(self._builder(tp, f"topic config {', '.join(o.name for o in res.ops)} changed"))
            results.append(AlterConfigsResult(res.resource_type, res.name, err, message))
        failover = tuple(AlterConfigsResult(r.resource_type, r.name, Errors.NOT_CONTROLLER if r.error == Errors.NONE
                                            else r.error, r.message) for r in results)
        self._answer_after_commit(src, IncrementalAlterConfigsResponse(req.ref, tuple(results)),
                                  IncrementalAlterConfigsResponse(req.ref, failover))
        return []

    def _check_config_resource(self, res: AlterConfigsResource) -> tuple[int, str]:
        """Why a resource's changes are refused (Kafka's error and words), or (NONE, "")."""
        assert self._work is not None
        if res.resource_type != RESOURCE_TOPIC:
            return Errors.INVALID_REQUEST, "only topic configs can be altered in the reference implementation"
        if res.name not in self._work.topics:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.name!r} does not exist."
        for op in res.ops:
            if op.name not in ALTERABLE_TOPIC_CONFIGS:
                return Errors.INVALID_CONFIG, f"config {op.name!r} is not supported by the reference implementation"
            if op.op not in (CONFIG_SET, CONFIG_DELETE):
                return Errors.INVALID_CONFIG, f"config {op.name!r} is not a list: only SET and DELETE apply"
            if op.op == CONFIG_DELETE:
                continue
            v = op.value or ""
            if op.name == "min.insync.replicas" and not (v.strip().isdigit() and int(v) >= 1):
                return Errors.INVALID_CONFIG, "min.insync.replicas must be a positive integer"
            if op.name == "unclean.leader.election.enable" and v.lower() not in ("true", "false"):
                return Errors.INVALID_CONFIG, "unclean.leader.election.enable must be true or false"
        return Errors.NONE, ""

    def _check_assignment(self, replicas: tuple[NodeId, ...], rf: int, partition: int) -> str:
        """Why a manually assigned replica list is refused ("" if it is not),
        in Kafka's words."""
        assert self._work is not None
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        seen: set[NodeId] = set()
        for b in sorted(replicas):
            if b not in self._work.brokers:
                return f"The manual partition assignment includes broker {b}, but no such broker is registered."
            if b in seen:
                return f"The manual partition assignment includes the broker {b} more than once."
            seen.add(b)
        if len(replicas) != rf:
            return (f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                    f"but this is not consistent with previous partitions, which have {rf} replica(s).")
        if not any(self._is_active_broker(r) for r in replicas):
            return (f"All brokers specified in the manual partition assignment for partition {partition} "
                    "are fenced or in controlled shutdown.")
        return ""

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
        "last_known_leader": p.last_known_leader,
        "recovery_state": p.leader_recovery_state,
        "adding_replicas": list(p.adding_replicas),
        "removing_replicas": list(p.removing_replicas),
    }


__all__ = ["ControllerRole", "CONTROLLER_REQUESTS", "PRODUCER_ID_BLOCK"]
