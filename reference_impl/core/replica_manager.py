"""The broker role: Kafka's ReplicaManager plus the broker lifecycle.

Seed 000 ("Becoming leader or follower: applyDelta", "The acks=all produce
path", the isr-expiration and highwatermark-checkpoint tasks,
DefaultAlterPartitionManager) and seed 001 §1.2.2 / §2.10; seed 002 for the
clean-shutdown marker.

What lives here (and not in :mod:`.partition`) is everything that spans
partitions or talks to other nodes:

* metadata: committed metadata-log entries enter through
  :meth:`BrokerRole.apply_committed` (the single entry point a KRaft observer
  or a co-located controller calls) and become makeLeader / makeFollower;
* the replica fetchers (one per leader broker, long-polling) and the
  OffsetsForLeaderEpoch follow-ups;
* the produce purgatory (acks=all waits for HW >= offset) and the delayed
  fetch purgatory (long polls);
* the AlterPartition channel: at most one request in flight per broker,
  batching every partition's pending proposal (its queue and answers in
  :mod:`.alter_partition`);
* registration (carrying the previous broker epoch from the clean-shutdown
  marker), heartbeats and controlled shutdown;
* producer-id allocation, Metadata, ListOffsets, GetReplicaLogInfo and the
  forwarding of CreateTopics / IncrementalAlterConfigs, in
  :mod:`.broker_requests`.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Final, Iterable

from .config import ProtocolConfig
from .effects import Effect, FileDelete, FileWrite, Fsync, Halt, Reply, Send, TraceEvent
from . import broker_requests
from .alter_partition import AlterPartitionChannel
from .broker_requests import AdminForwarder
from .errors import UnroutableMessage
from .log import PartitionLog
from .messages import (
    NO_LEADER,
    AlterPartitionItem,
    AlterPartitionResponse,
    BrokerEndpoint,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ClientFetchRequest,
    ClientFetchResponse,
    ControlledShutdownRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
    Errors,
    FetchPartitionRequest,
    FetchPartitionResponse,
    GetReplicaLogInfoRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataEntry,
    MetadataRequest,
    NodeId,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)
from .metadata import Delta, MetadataImage
from .partition import FOLLOWER, TRUNCATING, Partition
from .raft import Rng
from .storage import (
    CLEAN_SHUTDOWN,
    HW_CHECKPOINT,
    METADATA_LOG,
    RECOVERY_POINT_CHECKPOINT,
    CleanShutdown,
    LeaderEpochCheckpoint,
    OffsetCheckpoint,
    StoredState,
    epoch_checkpoint,
)

NO_DEADLINE: Final = 1 << 62


def parse_log_name(name: str) -> TopicPartition | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return TopicPartition(topic, int(part))


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
    kind: str  # "client" | "replica"
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


@dataclass
class Fetcher:
    """One replica fetcher: this broker fetching from one leader broker."""

    leader: NodeId
    inflight: int | None = None
    sent_at: int = 0
    epochs: dict[TopicPartition, int] = field(default_factory=dict)
    backoff_until: int = 0


# sort keys as module functions: a lambda inside a method makes the compiled
# method allocate a closure environment on every call, used or not
def _required_offset(d: DelayedProduce) -> int:
    return d.required_offset


def _partition_tp(p: Partition) -> TopicPartition:
    return p.tp


class BrokerRole:
    """Sans-IO broker. See the module docstring; the node API is in :mod:`.node`."""

    def __init__(
        self,
        node_id: NodeId,
        config: ProtocolConfig,
        voters: tuple[NodeId, ...],
        stored: StoredState,
        rng: Rng,
        incarnation_id: str,
        endpoint: BrokerEndpoint,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.voters = tuple(voters)
        self.stored = stored
        self.rng = rng
        self.incarnation_id = incarnation_id
        self.endpoint = endpoint
        self.image = MetadataImage()
        self.partitions: dict[TopicPartition, Partition] = {}
        self.broker_epoch = -1
        self.previous_broker_epoch = -1
        self.is_fenced = True
        self.controller_hint: NodeId | None = None
        self._controller_rr = 0
        self._corr = 0
        # lifecycle
        self.registration_sent_at: int | None = None
        #: a refused registration is sent again at this monotonic time (not a
        #: timeout): BrokerLifecycleManager schedules its next communication
        #: on System.nanoTime, so a wall-clock jump cannot postpone it
        self.registration_retry_at: int | None = None
        self.next_heartbeat_at = 0
        self.heartbeat_sent_at: int | None = None
        self.shutting_down = False
        self.shutdown_deadline = 0
        self.halted = False
        # periodic tasks
        self.next_isr_expiry_at = 0
        self.next_hw_checkpoint_at = 0
        self._last_hw_checkpoint: tuple | None = None
        # purgatories
        self.delayed_produce: dict[TopicPartition, list[DelayedProduce]] = {}
        self.delayed_fetches: dict[int, DelayedFetch] = {}
        self.fetch_watch: dict[TopicPartition, set[int]] = {}
        self._fetch_ids = 0
        # channels
        self.fetchers: dict[NodeId, Fetcher] = {}
        self.alter = AlterPartitionChannel()
        #: forwarded admin requests (CreateTopics, IncrementalAlterConfigs)
        self.forwarder = AdminForwarder()
        self.next_producer_seq = 0
        #: follower partitions in fetch backoff or waiting for OffsetsForLeaderEpoch
        self._attention: set[TopicPartition] = set()
        #: leader -> partitions this broker follows from it (the fetcher's members)
        self._following: dict[NodeId, set[TopicPartition]] = {}
        self._follow_of: dict[TopicPartition, NodeId] = {}
        self._soonest = NO_DEADLINE
        #: replayed but not yet applied (waiting for the initial catch-up)
        self._unpublished = Delta()
        #: the monotonic time of the current call, and wall minus monotonic.
        #: Kafka's scheduler and purgatories run on monotonic time (heartbeat
        #: interval, isr-expiration and HW-checkpoint schedules, delayed
        #: produce and fetch, controlled-shutdown wait); replica lag and
        #: request timeouts read the wall clock (docs/architecture.md, "Clocks")
        self.mono = 0
        self.skew = 0

    def set_clock(self, now: int, mono: int | None) -> None:
        """Take the current call's clocks (``mono=None``: the two agree)."""
        m = now if mono is None else mono
        self.mono = m
        self.skew = now - m

    # ======================================================================
    # dispatch
    # ======================================================================

    def handle(self, msg: Any, now: int, src: NodeId | None, mono: int | None = None) -> list[Effect]:
        """Route one message addressed to the broker role."""
        if self.halted:
            return []
        self.set_clock(now, mono)
        # the three messages of every replicated write are dispatched here,
        # directly (compiled, a type test and a native call; the table's
        # lambdas go through generic Python calls); the rest by the table
        kind = type(msg)
        if kind is ReplicaFetchRequest:
            effects = self.handle_replica_fetch(msg, src, now)
        elif kind is ReplicaFetchResponse:
            effects = self.handle_replica_fetch_response(msg, src, now)
        elif kind is ProduceRequest:
            effects = self.handle_produce(msg, now)
        else:
            handler = self._HANDLERS.get(kind)
            if handler is None:
                raise UnroutableMessage(f"the broker role does not handle {kind.__name__}")
            effects = handler(self, msg, src, now)
        alter = self.alter
        if alter.pending and alter.inflight is None:
            effects += alter.maybe_send(self, now)
        return effects

    # ======================================================================
    # timing
    # ======================================================================

    @property
    def fetch_timeout_ms(self) -> int:
        """How long a replica fetch may stay unanswered before it is resent.

        The simulator drops messages that TCP would only delay, so a lost
        fetch must not stall a follower for request.timeout.ms: allow the
        long-poll wait plus one second."""
        return min(self.config.request_timeout_ms, self.config.replica_fetch_wait_max_ms + 1000)

    @property
    def controller_rpc_timeout_ms(self) -> int:
        """Resend registration / heartbeats / AlterPartition not answered in time."""
        return max(1000, 2 * self.config.broker_heartbeat_interval_ms)

    def note_deadline(self, at: int) -> None:
        """Remember that a deadline was just created (see :meth:`soonest_new_deadline`)."""
        if at < self._soonest:
            self._soonest = at

    def soonest_new_deadline(self) -> int | None:
        """The earliest deadline created since the last call (cheap; the node
        arms a timer only when this is earlier than the one already armed,
        and recomputes everything with :meth:`next_wakeup` on each tick)."""
        at, self._soonest = self._soonest, NO_DEADLINE
        return None if at == NO_DEADLINE else at

    def next_wakeup(self, now: int) -> int | None:
        """The earliest future time some deadline of this broker falls due.

        Computed from the state itself (not from a list of scheduled times),
        so deadlines that stopped mattering (a long poll answered early) do
        not cause wake-ups."""
        if self.halted:
            return None
        skew = self.skew
        c = [self.next_isr_expiry_at + skew, self.next_hw_checkpoint_at + skew]
        rpc = self.controller_rpc_timeout_ms
        if self.broker_epoch < 0:
            if self.registration_retry_at is not None:
                c.append(self.registration_retry_at + skew)
            elif self.registration_sent_at is not None:
                c.append(self.registration_sent_at + rpc)
        elif self.heartbeat_sent_at is not None:
            c.append(self.heartbeat_sent_at + rpc)
        else:
            c.append(self.next_heartbeat_at + skew)
        if self.shutting_down:
            c.append(self.shutdown_deadline + skew)
        for waiting in self.delayed_produce.values():
            c.append(min(d.deadline for d in waiting) + skew)
        for d in self.delayed_fetches.values():
            c.append(d.deadline + skew)
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
        c += self.alter.deadlines(rpc)
        c += self.forwarder.deadlines()
        future = [x for x in c if x > now]
        return min(future) if future else None

    def next_correlation_id(self) -> int:
        self._corr += 1
        return self._corr

    # -- controller addressing -----------------------------------------------

    def set_controller_hint(self, controller_id: NodeId | None) -> None:
        if controller_id is not None and controller_id >= 0:
            self.controller_hint = controller_id

    def controller_id(self) -> NodeId:
        if self.controller_hint is not None:
            return self.controller_hint
        return self.voters[self._controller_rr % len(self.voters)]

    def controller_failed(self) -> None:
        """NOT_CONTROLLER or silence: try the next voter."""
        self.controller_hint = None
        self._controller_rr += 1

    # ======================================================================
    # start-up
    # ======================================================================

    def start(self, now: int, mono: int | None = None) -> list[Effect]:
        """Open the partition logs that survived, read and delete the
        clean-shutdown marker (seed 002: its broker epoch goes into the
        registration), and register with the controller."""
        self.set_clock(now, mono)
        effects: list[Effect] = []
        marker = self.stored.files.get(CLEAN_SHUTDOWN)
        self.previous_broker_epoch = marker.broker_epoch if isinstance(marker, CleanShutdown) else -1
        if marker is not None:
            effects += [FileDelete(CLEAN_SHUTDOWN), Fsync(None)]
        hw_cp = self.stored.files.get(HW_CHECKPOINT)
        hws = dict(hw_cp.offsets) if isinstance(hw_cp, OffsetCheckpoint) else {}
        for name in sorted(self.stored.logs):
            if name == METADATA_LOG:
                continue
            tp = parse_log_name(name)
            if tp is None:
                continue
            ep = self.stored.files.get(epoch_checkpoint(tp))
            log, log_effects = PartitionLog.load(
                tp,
                list(self.stored.logs[name]),
                self.stored.log_start_offsets.get(name),
                ep if isinstance(ep, LeaderEpochCheckpoint) else None,
                hws.get(tp),
                flush_interval_messages=self.config.log_flush_interval_messages,
            )
            p = Partition(tp=tp, ctx=self, log=log)
            self.partitions[tp] = p
            effects += log_effects
            effects.append(p.loaded_trace())
        self.next_isr_expiry_at = self.mono + self.config.replica_lag_time_max_ms // 2
        self.next_hw_checkpoint_at = self.mono + self.config.replica_high_watermark_checkpoint_interval_ms
        effects += self._send_registration(now)
        return effects

    def _send_registration(self, now: int) -> list[Effect]:
        self.registration_sent_at = now
        self.registration_retry_at = None
        self.note_deadline(now + self.controller_rpc_timeout_ms)
        return [
            Send(
                self.controller_id(),
                BrokerRegistrationRequest(
                    broker_id=self.node_id,
                    incarnation_id=self.incarnation_id,
                    endpoint=self.endpoint,
                    previous_broker_epoch=self.previous_broker_epoch,
                ),
            )
        ]

    # ======================================================================
    # metadata (KRaft observer / co-located controller)
    # ======================================================================

    def apply_committed(self, entries: Iterable[MetadataEntry], now: int, mono: int | None = None) -> list[Effect]:
        """Replay committed metadata records and apply the resulting delta
        (ReplicaManager.applyDelta). Entries at or below the image's offset
        are ignored, so callers may hand over overlapping batches."""
        self.set_clock(now, mono)
        delta = self._unpublished
        for e in entries:
            if e.offset <= self.image.offset:
                continue
            delta.merge(self.image.replay(e.record, e.offset))
        return self._maybe_publish(now)

    @property
    def metadata_caught_up(self) -> bool:
        """The image holds this broker's own current registration.

        Like Kafka's initial catch-up (the broker installs its metadata
        publishers only once it has replayed past its registration record), a
        restarted broker must not act on leaderships recorded before it
        re-registered: the controller moves them away when it processes the
        registration, and a broker that lost its log in a power failure would
        otherwise lead again with an empty log."""
        reg = self.image.brokers.get(self.node_id)
        return self.broker_epoch >= 0 and reg is not None and reg.broker_epoch == self.broker_epoch

    def _maybe_publish(self, now: int) -> list[Effect]:
        if not self._unpublished or not self.metadata_caught_up:
            return []
        delta, self._unpublished = self._unpublished, Delta()
        return self._apply_delta(delta, now)

    def _apply_delta(self, delta: Delta, now: int) -> list[Effect]:
        effects: list[Effect] = []
        changed_tps = set(delta.partitions)
        if delta.topics:
            # a topic config change (min.insync.replicas) may unblock the HW
            for tp, part in self.partitions.items():
                if tp.topic in delta.topics:
                    part.min_isr_changed()
                    if part.is_leader and tp not in changed_tps:
                        e, hw_changed = part.maybe_increment_leader_hw(now)
                        effects += e
                        effects += self._complete_delayed(tp, now)
        fetch_leaders: set[NodeId] = set()
        for tp in sorted(changed_tps):
            reg = self.image.partitions.get(tp)
            if reg is None:
                continue
            p = self.partitions.get(tp)
            if self.node_id not in reg.replicas:
                if p is not None and p.role != "none":
                    was_leader = p.is_leader
                    effects += p.make_offline()
                    self._update_following(p)
                    if was_leader:
                        effects += self._complete_delayed(tp, now)
                continue
            if p is None:
                p = Partition(
                    tp=tp,
                    ctx=self,
                    log=PartitionLog(tp=tp, flush_interval_messages=self.config.log_flush_interval_messages),
                )
                self.partitions[tp] = p
            if reg.leader == self.node_id:
                e, hw_changed = p.make_leader(reg, now)
                effects += e
                self._update_following(p)
                effects += self._complete_delayed(tp, now)
            else:
                was_leader = p.is_leader
                e, epoch_changed = p.make_follower(reg, now)
                effects += e
                self._update_following(p)
                if was_leader:
                    effects += self._complete_delayed(tp, now)
                if epoch_changed:
                    fetch_leaders.add(p.leader_id)
        for leader in sorted(fetch_leaders):
            effects += self._maybe_fetch(now, leader)
        return effects

    # ======================================================================
    # periodic work
    # ======================================================================

    def tick(self, now: int, mono: int | None = None) -> list[Effect]:
        if self.halted:
            return []
        self.set_clock(now, mono)
        mono_now = self.mono
        effects: list[Effect] = []
        # registration / heartbeats
        if self.broker_epoch < 0:
            if self.registration_retry_at is not None:
                if mono_now >= self.registration_retry_at:
                    effects += self._send_registration(now)
            elif self.registration_sent_at is not None and now - self.registration_sent_at >= self.controller_rpc_timeout_ms:
                self.controller_failed()  # unanswered: try the next voter
                effects += self._send_registration(now)
        else:
            if self.heartbeat_sent_at is not None and now - self.heartbeat_sent_at >= self.controller_rpc_timeout_ms:
                self.controller_failed()
                self.heartbeat_sent_at = None
            if self.heartbeat_sent_at is None and mono_now >= self.next_heartbeat_at:
                effects += self._send_heartbeat(now)
        # isr-expiration, every replica.lag.time.max.ms / 2 (scheduled on the
        # monotonic clock; the lag itself is judged on the wall clock, below)
        if mono_now >= self.next_isr_expiry_at:
            self.next_isr_expiry_at = mono_now + max(1, self.config.replica_lag_time_max_ms // 2)
            for part in self.partitions.values():
                if part.is_leader:
                    e, hw_changed = part.maybe_shrink_isr(now)
                    effects += e
                    if hw_changed:
                        effects += self.on_hw_changed(part.tp, now)
        # highwatermark-checkpoint
        if mono_now >= self.next_hw_checkpoint_at:
            self.next_hw_checkpoint_at = mono_now + max(1, self.config.replica_high_watermark_checkpoint_interval_ms)
            effects += self._checkpoint_hw(force=False)
        # purgatories
        effects += self._expire_delayed(mono_now, now)
        # fetchers and truncation requests
        for f in self.fetchers.values():
            if f.inflight is not None and now - f.sent_at >= self.fetch_timeout_ms:
                f.inflight = None
        for tp in sorted(self._attention):
            p = self.partitions.get(tp)
            if p is not None and p.role == FOLLOWER and p.fetch_state == TRUNCATING and now - p.truncation_request_at >= self.fetch_timeout_ms:
                p.truncation_request_at = now
                effects += self._send_offsets_for_leader_epoch(p, now)
        effects += self._maybe_fetch(now)
        # AlterPartition channel
        if self.alter.expire(now, self.controller_rpc_timeout_ms):
            self.controller_failed()
        effects += self.alter.maybe_send(self, now)
        # forwarded CreateTopics
        effects += self.forwarder.expire(now)
        if self.shutting_down and mono_now >= self.shutdown_deadline:
            effects += self._finish_shutdown(now)
        return effects

    def _checkpoint_hw(self, force: bool) -> list[Effect]:
        """Write the HW of every partition to replication-offset-checkpoint
        (periodic, so the on-disk HW is a lower bound; seed 000)."""
        hws = tuple(sorted((tp, p.log.hw) for tp, p in self.partitions.items()))
        if not force and hws == self._last_hw_checkpoint:
            return []
        self._last_hw_checkpoint = hws
        rps = tuple(sorted((tp, p.log.recovery_point) for tp, p in self.partitions.items()))
        return [
            FileWrite(HW_CHECKPOINT, OffsetCheckpoint(hws)),
            Fsync(HW_CHECKPOINT),
            FileWrite(RECOVERY_POINT_CHECKPOINT, OffsetCheckpoint(rps)),
            Fsync(RECOVERY_POINT_CHECKPOINT),
        ]

    # ======================================================================
    # broker lifecycle: registration, heartbeats, controlled shutdown
    # ======================================================================

    def _send_heartbeat(self, now: int) -> list[Effect]:
        self.heartbeat_sent_at = now
        self.next_heartbeat_at = self.mono + self.config.broker_heartbeat_interval_ms
        self.note_deadline(self.next_heartbeat_at + self.skew)
        return [
            Send(
                self.controller_id(),
                BrokerHeartbeatRequest(
                    broker_id=self.node_id,
                    broker_epoch=self.broker_epoch,
                    metadata_offset=self.image.offset,
                    want_fence=False,
                    want_shutdown=self.shutting_down,
                ),
            )
        ]

    def handle_registration_response(self, msg: BrokerRegistrationResponse, src: NodeId | None, now: int) -> list[Effect]:
        if self.broker_epoch >= 0 or self.halted:
            return []
        if msg.error != Errors.NONE:
            if msg.error == Errors.DUPLICATE_BROKER_REGISTRATION:
                # our previous incarnation's session is still live at the
                # (right) controller: ask it again a heartbeat interval later
                backoff = self.config.broker_heartbeat_interval_ms
            else:
                # retry with the next voter after a short backoff
                self.controller_failed()
                backoff = self.config.alter_partition_retry_backoff_ms
            self.registration_sent_at = None
            self.registration_retry_at = self.mono + backoff
            self.note_deadline(self.registration_retry_at + self.skew)
            return []
        if src is not None:
            self.controller_hint = src
        self.broker_epoch = msg.broker_epoch
        self.registration_sent_at = None
        self.registration_retry_at = None
        return self._send_heartbeat(now) + self._maybe_publish(now)

    def handle_heartbeat_response(self, msg: BrokerHeartbeatResponse, src: NodeId | None, now: int) -> list[Effect]:
        if self.halted:
            return []
        self.heartbeat_sent_at = None
        if msg.error == Errors.NOT_CONTROLLER:
            self.controller_failed()
            self.next_heartbeat_at = self.mono + self.config.alter_partition_retry_backoff_ms
            self.note_deadline(self.next_heartbeat_at + self.skew)
            return []
        if msg.error in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
            # the controller no longer knows this session: register again
            self.broker_epoch = -1
            return self._send_registration(now)
        if msg.error != Errors.NONE:
            self.next_heartbeat_at = self.mono + self.config.alter_partition_retry_backoff_ms
            self.note_deadline(self.next_heartbeat_at + self.skew)
            return []
        if src is not None:
            self.controller_hint = src
        self.is_fenced = msg.is_fenced
        if self.shutting_down and msg.should_shut_down:
            return self._finish_shutdown(now)
        return []

    def begin_controlled_shutdown(self, now: int, mono: int | None = None) -> list[Effect]:
        """Ask the controller to move leaderships away (want_shutdown in the
        heartbeat); finish with Halt once it says so, or after
        request_timeout_ms regardless."""
        if self.halted or self.shutting_down:
            return []
        self.set_clock(now, mono)
        self.shutting_down = True
        self.shutdown_deadline = self.mono + self.config.request_timeout_ms
        self.note_deadline(self.shutdown_deadline + self.skew)
        if self.broker_epoch < 0:
            return self._finish_shutdown(now)
        return self._send_heartbeat(now)

    def _finish_shutdown(self, now: int) -> list[Effect]:
        """Flush every log and checkpoint, then write the clean-shutdown
        marker with the broker epoch (seed 002), then Halt."""
        if self.halted:
            return []
        self.halted = True
        effects = self._checkpoint_hw(force=True)
        for p in self.partitions.values():
            p.log.flush()
        effects.append(Fsync(None))
        effects.append(FileWrite(CLEAN_SHUTDOWN, CleanShutdown(self.broker_epoch)))
        effects.append(Fsync(CLEAN_SHUTDOWN))
        effects.append(Halt())
        return effects

    # ======================================================================
    # produce
    # ======================================================================

    def handle_produce(self, msg: ProduceRequest, now: int) -> list[Effect]:
        if msg.acks not in (0, 1, -1):
            return self._produce_done(msg.ref, msg.tp, msg.acks, Errors.INVALID_REQUEST, -1, msg.count)
        p = self.partitions.get(msg.tp)
        if p is None or not p.is_leader:
            err = Errors.NOT_LEADER_OR_FOLLOWER if msg.tp in self.image.partitions else Errors.UNKNOWN_TOPIC_OR_PARTITION
            return self._produce_done(msg.ref, msg.tp, msg.acks, err, -1, msg.count)
        err, batch, required, effects, hw_changed = p.append_as_leader(
            msg.count, msg.payload, msg.acks, msg.producer_id, msg.producer_epoch, msg.base_sequence, now,
            msg.max_timestamp,
        )
        if err != Errors.NONE or batch is None:
            return effects + self._produce_done(msg.ref, msg.tp, msg.acks, err, -1, msg.count)
        effects += self._watch_append(msg.tp, now)
        if hw_changed:
            effects += self.on_hw_changed(msg.tp, now)
        if msg.acks == -1:
            done, derr = p.check_enough_replicas_reach_offset(required)
            if not done:
                deadline = self.mono + msg.timeout_ms  # the purgatory's timer is monotonic
                # kept ordered by required offset (appends arrive in offset order;
                # a duplicate may need an earlier one), so completion pops a prefix
                waiting = self.delayed_produce.setdefault(msg.tp, [])
                d = DelayedProduce(msg.ref, msg.tp, msg.acks, batch.base_offset, batch.count, required, deadline)
                if waiting and waiting[-1].required_offset > required:
                    insort(waiting, d, key=_required_offset)
                else:
                    waiting.append(d)
                self.note_deadline(deadline + self.skew)
                return effects
            return effects + self._produce_done(msg.ref, msg.tp, msg.acks, derr, batch.base_offset, batch.count)
        return effects + self._produce_done(msg.ref, msg.tp, msg.acks, Errors.NONE, batch.base_offset, batch.count)

    def _produce_done(self, ref, tp, acks, error, base, count) -> list[Effect]:
        trace = TraceEvent("produce", {"tp": str(tp), "acks": acks, "error": error, "base": base, "count": count})
        if acks == 0:
            return [trace]  # Kafka sends no response to acks=0
        p = self.partitions.get(tp)
        log_start = p.log.log_start_offset if p is not None else -1
        return [trace, Reply(ProduceResponse(ref, tp, error, base if error == Errors.NONE else -1, log_start))]

    def on_hw_changed(self, tp: TopicPartition, now: int) -> list[Effect]:
        """HW moved: complete acks=all produces and consumer long polls."""
        effects = self._complete_delayed_produce(tp, now)
        effects += self._check_delayed_fetches(tp, now)
        return effects

    def _complete_delayed_produce(self, tp: TopicPartition, now: int) -> list[Effect]:
        waiting = self.delayed_produce.get(tp)
        if not waiting:
            return []
        p = self.partitions.get(tp)
        effects: list[Effect] = []
        if p is None or not p.is_leader:
            n = len(waiting)
        else:
            # checkEnoughReplicasReachOffset for every parked produce the HW has passed
            hw = p.log.hw
            n = 0
            while n < len(waiting) and waiting[n].required_offset <= hw:
                n += 1
        for d in waiting[:n]:
            if p is None:
                err = Errors.NOT_LEADER_OR_FOLLOWER
            else:
                _, err = p.check_enough_replicas_reach_offset(d.required_offset)
            effects += self._produce_done(d.ref, tp, d.acks, err, d.base_offset, d.count)
        if n == len(waiting):
            del self.delayed_produce[tp]
        elif n:
            del waiting[:n]
        return effects

    def _complete_delayed(self, tp: TopicPartition, now: int) -> list[Effect]:
        """Role change: parked produces finish (NOT_LEADER_OR_FOLLOWER once
        no longer leader) and parked fetches are answered."""
        return self._complete_delayed_produce(tp, now) + self._check_delayed_fetches(tp, now)

    def _expire_delayed(self, mono: int, now: int) -> list[Effect]:
        """Expire parked produces and fetches whose monotonic deadline passed."""
        effects: list[Effect] = []
        for tp in list(self.delayed_produce):
            waiting = self.delayed_produce[tp]
            expired = [d for d in waiting if mono >= d.deadline]
            if not expired:
                continue
            rest = [d for d in waiting if mono < d.deadline]
            if rest:
                self.delayed_produce[tp] = rest
            else:
                del self.delayed_produce[tp]
            for d in expired:
                effects += self._produce_done(d.ref, tp, d.acks, Errors.REQUEST_TIMED_OUT, d.base_offset, d.count)
        for fid, parked in list(self.delayed_fetches.items()):
            if mono >= parked.deadline:
                effects += self._complete_fetch(fid, now)
        return effects

    # ======================================================================
    # fetch serving (leader side) and delayed fetches
    # ======================================================================

    def handle_replica_fetch(self, msg: ReplicaFetchRequest, src: NodeId | None, now: int) -> list[Effect]:
        if src is None:
            src = msg.replica_id  # a runtime that did not name the sender: answer the fetching replica
        effects: list[Effect] = []
        responses = []
        any_data = False
        any_error = False
        for req in msg.partitions:
            p = self.partitions.get(req.tp)
            if p is None:
                resp = FetchPartitionResponse(req.tp, Errors.NOT_LEADER_OR_FOLLOWER)
            else:
                resp, e, hw_changed = p.serve_replica_fetch(req, msg.replica_id, msg.broker_epoch, now)
                effects += e
                if hw_changed:
                    effects += self.on_hw_changed(req.tp, now)
            responses.append(resp)
            any_data = any_data or bool(resp.batches)
            any_error = any_error or resp.error != Errors.NONE or resp.diverging_epoch is not None
        if not any_data and not any_error and msg.max_wait_ms > 0 and responses:
            self._park_fetch("replica", msg, src, self.mono + msg.max_wait_ms, msg.partitions)
            return effects
        effects.append(Send(src, ReplicaFetchResponse(self.node_id, msg.correlation_id, Errors.NONE, tuple(responses))))
        return effects

    def handle_client_fetch(self, msg: ClientFetchRequest, now: int) -> list[Effect]:
        responses = tuple(self._client_fetch_partition(req) for req in msg.partitions)
        any_data = any(r.batches for r in responses)
        any_error = any(r.error != Errors.NONE or r.diverging_epoch is not None for r in responses)
        if not any_data and not any_error and msg.max_wait_ms > 0 and responses:
            self._park_fetch("client", msg, None, self.mono + msg.max_wait_ms, msg.partitions)
            return []
        return [Reply(ClientFetchResponse(msg.ref, responses))]

    def _client_fetch_partition(self, req: FetchPartitionRequest) -> FetchPartitionResponse:
        p = self.partitions.get(req.tp)
        if p is None:
            err = Errors.NOT_LEADER_OR_FOLLOWER if req.tp in self.image.partitions else Errors.UNKNOWN_TOPIC_OR_PARTITION
            return FetchPartitionResponse(req.tp, err)
        return p.serve_client_fetch(req)

    def _park_fetch(self, kind: str, msg, src, deadline: int, parts: tuple[FetchPartitionRequest, ...]) -> None:
        """Park a fetch request (``parts``: its partitions) until data or
        ``deadline`` (monotonic, as the fetch purgatory's timer)."""
        self._fetch_ids += 1
        fid = self._fetch_ids
        self.delayed_fetches[fid] = DelayedFetch(kind, msg, src, deadline, parts)
        self.note_deadline(deadline + self.skew)
        for req in parts:
            self.fetch_watch.setdefault(req.tp, set()).add(fid)

    def _watch_append(self, tp: TopicPartition, now: int) -> list[Effect]:
        """New data on a leader: parked replica fetches may complete."""
        return self._check_delayed_fetches(tp, now, only_kind="replica")

    def _check_delayed_fetches(self, tp: TopicPartition, now: int, only_kind: str | None = None) -> list[Effect]:
        ids = self.fetch_watch.get(tp)
        if not ids:
            return []
        effects: list[Effect] = []
        p = self.partitions.get(tp)
        for fid in list(ids):
            d = self.delayed_fetches.get(fid)
            if d is None:
                continue
            if only_kind is not None and d.kind != only_kind:
                continue
            if self._fetch_ready(d, tp, p):
                effects += self._complete_fetch(fid, now)
        return effects

    @staticmethod
    def _fetch_ready(d: DelayedFetch, tp: TopicPartition, p: Partition | None) -> bool:
        if p is None or not p.is_leader:
            return True
        for req in d.parts:
            if req.tp != tp:
                continue
            upto = p.log.leo if d.kind == "replica" else p.log.hw
            if upto > req.fetch_offset:
                return True
        return False

    def _complete_fetch(self, fid: int, now: int) -> list[Effect]:
        d = self.delayed_fetches.pop(fid, None)
        if d is None:
            return []
        for req in d.parts:
            s = self.fetch_watch.get(req.tp)
            if s is not None:
                s.discard(fid)
                if not s:
                    del self.fetch_watch[req.tp]
        if d.kind == "client":
            return [Reply(ClientFetchResponse(d.msg.ref, tuple(self._client_fetch_partition(req) for req in d.parts)))]
        msg = d.msg
        # parked by handle_replica_fetch, which answers peers only; the
        # isinstance also lets the compiled code read msg's fields natively
        assert d.src is not None and isinstance(msg, ReplicaFetchRequest)
        effects: list[Effect] = []
        responses = []
        for req in d.parts:
            p = self.partitions.get(req.tp)
            if p is None:
                responses.append(FetchPartitionResponse(req.tp, Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            resp, e, _ = p.serve_replica_fetch(req, msg.replica_id, msg.broker_epoch, now, record=False)
            effects += e
            responses.append(resp)
        effects.append(Send(d.src, ReplicaFetchResponse(self.node_id, msg.correlation_id, Errors.NONE, tuple(responses))))
        return effects

    # ======================================================================
    # replica fetchers (follower side)
    # ======================================================================

    def _update_following(self, p: Partition) -> None:
        """Keep the fetcher membership index in step with the partition's role."""
        old = self._follow_of.pop(p.tp, None)
        if old is not None:
            members = self._following.get(old)
            if members is not None:
                members.discard(p.tp)
                if not members:
                    del self._following[old]
        if p.role == FOLLOWER and p.leader_id != NO_LEADER:
            self._follow_of[p.tp] = p.leader_id
            self._following.setdefault(p.leader_id, set()).add(p.tp)

    def _maybe_fetch(self, now: int, only_leader: NodeId | None = None) -> list[Effect]:
        """Send a fetch to every leader we follow (or just ``only_leader``)
        that has no fetch in flight, for the partitions ready to fetch."""
        leaders = self._following if only_leader is None else (only_leader,)
        effects: list[Effect] = []
        for leader in leaders:
            members = self._following.get(leader)
            if not members:
                continue
            f = self.fetchers.get(leader)
            if f is None:
                f = self.fetchers[leader] = Fetcher(leader)
            if f.inflight is not None or now < f.backoff_until:
                continue
            parts: list[Partition] = []
            for tp in members:
                p = self.partitions[tp]
                if p.wants_fetch(now):
                    parts.append(p)
            if len(parts) > 1:
                parts.sort(key=_partition_tp)
            if parts:
                effects += self._send_fetch(f, parts, now)
        return effects

    def _send_fetch(self, f: Fetcher, parts: list[Partition], now: int) -> list[Effect]:
        corr = self.next_correlation_id()
        f.inflight = corr
        f.sent_at = now
        f.epochs = {p.tp: p.leader_epoch for p in parts}
        self.note_deadline(now + self.fetch_timeout_ms)
        return [
            Send(
                f.leader,
                ReplicaFetchRequest(
                    replica_id=self.node_id,
                    broker_epoch=self.broker_epoch,
                    correlation_id=corr,
                    partitions=tuple(p.fetch_request() for p in parts),
                    max_wait_ms=self.config.replica_fetch_wait_max_ms,
                    min_bytes=self.config.replica_fetch_min_bytes,
                ),
            )
        ]

    def handle_replica_fetch_response(self, msg: ReplicaFetchResponse, src: NodeId | None, now: int) -> list[Effect]:
        f = self.fetchers.get(msg.leader_id)
        if f is None or f.inflight != msg.correlation_id:
            return []  # a late answer to a fetch we gave up on
        f.inflight = None
        effects: list[Effect] = []
        if msg.error != Errors.NONE:
            f.backoff_until = now + self.config.replica_fetch_backoff_ms
            self.note_deadline(f.backoff_until)
            return effects
        for resp in msg.partitions:
            p = self.partitions.get(resp.tp)
            if p is None or p.role != FOLLOWER or p.leader_id != msg.leader_id or f.epochs.get(resp.tp) != p.leader_epoch:
                continue  # the partition moved on while the fetch was out
            e, follow_up = p.handle_fetch_response(resp, now)
            effects += e
            if follow_up == "offsets_for_leader_epoch":
                self._attention.add(p.tp)
                effects += self._send_offsets_for_leader_epoch(p, now)
            elif follow_up == "backoff":
                self._attention.add(p.tp)
                self.note_deadline(p.fetch_backoff_until)
        effects += self._maybe_fetch(now, msg.leader_id)
        return effects

    def _send_offsets_for_leader_epoch(self, p: Partition, now: int) -> list[Effect]:
        self.note_deadline(now + self.fetch_timeout_ms)
        return [
            Send(
                p.leader_id,
                OffsetForLeaderEpochRequest(
                    ref=None,
                    tp=p.tp,
                    leader_epoch=p.leader_epoch,
                    current_leader_epoch=p.leader_epoch,
                    replica_id=self.node_id,
                ),
            )
        ]

    def handle_offset_for_leader_epoch(self, msg: OffsetForLeaderEpochRequest, src: NodeId | None, now: int) -> list[Effect]:
        p = self.partitions.get(msg.tp)
        if p is None:
            err, epoch, end = Errors.NOT_LEADER_OR_FOLLOWER, -1, -1
        else:
            err, epoch, end = p.offset_for_leader_epoch(msg.leader_epoch, msg.current_leader_epoch)
        resp = OffsetForLeaderEpochResponse(msg.ref, msg.tp, err, epoch, end)
        if msg.ref is None and src is not None:
            return [Send(src, resp)]
        return [Reply(resp)]

    def handle_offset_for_leader_epoch_response(self, msg: OffsetForLeaderEpochResponse, src: NodeId | None, now: int) -> list[Effect]:
        p = self.partitions.get(msg.tp)
        if p is None or p.role != FOLLOWER or p.leader_id != src:
            return []
        effects = p.handle_offset_for_leader_epoch_response(msg.error, msg.leader_epoch, msg.end_offset, now)
        return effects + self._maybe_fetch(now)

    # ======================================================================
    # AlterPartition channel (DefaultAlterPartitionManager)
    # ======================================================================

    def submit_alter_partition(self, partition: Partition, item: AlterPartitionItem, not_before: int = 0) -> None:
        """Queue a proposal on the AlterPartition channel
        (:mod:`.alter_partition`); :meth:`handle` / :meth:`tick` send it
        before returning."""
        self.alter.submit(partition, item, not_before)
        self.note_deadline(not_before)

    def handle_alter_partition_response(self, msg: AlterPartitionResponse, src: NodeId | None, now: int) -> list[Effect]:
        return self.alter.handle_response(self, msg, now)

    # ======================================================================
    # client requests
    # ======================================================================

    _HANDLERS: ClassVar[dict[type, Callable[[Any, Any, NodeId | None, int], list[Effect]]]] = {
        ClientFetchRequest: lambda self, m, src, now: self.handle_client_fetch(m, now),
        ListOffsetsRequest: lambda self, m, src, now: broker_requests.list_offsets(self, m),
        MetadataRequest: lambda self, m, src, now: broker_requests.metadata(self, m),
        InitProducerIdRequest: lambda self, m, src, now: broker_requests.init_producer_id(self, m),
        CreateTopicsRequest: lambda self, m, src, now: self.forwarder.forward(self, m, now),
        CreateTopicsResponse: lambda self, m, src, now: self.forwarder.answer(self, m, now),
        IncrementalAlterConfigsRequest: lambda self, m, src, now: self.forwarder.forward(self, m, now),
        IncrementalAlterConfigsResponse: lambda self, m, src, now: self.forwarder.answer(self, m, now),
        AlterPartitionReassignmentsRequest: lambda self, m, src, now: self.forwarder.forward(self, m, now),
        AlterPartitionReassignmentsResponse: lambda self, m, src, now: self.forwarder.answer(self, m, now),
        ListPartitionReassignmentsRequest: lambda self, m, src, now: self.forwarder.forward(self, m, now),
        ListPartitionReassignmentsResponse: lambda self, m, src, now: self.forwarder.answer(self, m, now),
        UnregisterBrokerRequest: lambda self, m, src, now: self.forwarder.forward(self, m, now),
        UnregisterBrokerResponse: lambda self, m, src, now: self.forwarder.answer(self, m, now),
        OffsetForLeaderEpochRequest: lambda self, m, src, now: self.handle_offset_for_leader_epoch(m, src, now),
        OffsetForLeaderEpochResponse: lambda self, m, src, now: self.handle_offset_for_leader_epoch_response(m, src, now),
        BrokerRegistrationResponse: lambda self, m, src, now: self.handle_registration_response(m, src, now),
        BrokerHeartbeatResponse: lambda self, m, src, now: self.handle_heartbeat_response(m, src, now),
        AlterPartitionResponse: lambda self, m, src, now: self.handle_alter_partition_response(m, src, now),
        ControlledShutdownRequest: lambda self, m, src, now: self.begin_controlled_shutdown(now),
        GetReplicaLogInfoRequest: lambda self, m, src, now: broker_requests.replica_log_info(self, m, src),
    }
