"""The broker role: Kafka's ReplicaManager (core/src/main/scala/kafka/server/
ReplicaManager.scala), with its purgatories, replica fetchers and the
broker's lifecycle as parts of their own.

Seed 000 ("Becoming leader or follower: applyDelta", "The acks=all produce
path", the isr-expiration and highwatermark-checkpoint tasks,
DefaultAlterPartitionManager) and seed 001 §1.2.2 / §2.10; seed 002 for the
clean-shutdown marker.

What lives here (and not in :mod:`.partition`) is everything that spans
partitions or talks to other nodes:

* metadata: committed metadata-log entries enter through
  :meth:`BrokerRole.apply_committed` (the single entry point a KRaft observer
  or a co-located controller calls) and become makeLeader / makeFollower;
* produce and fetch serving, and the periodic isr-expiration and
  highwatermark-checkpoint tasks;
* the produce and fetch purgatories (acks=all waits for HW >= offset, long
  polls wait for data), in :mod:`.purgatory`;
* the replica fetchers (one per leader broker, long-polling) and the
  OffsetsForLeaderEpoch follow-ups, in :mod:`.replica_fetcher`;
* the AlterPartition channel: at most one request in flight per broker,
  batching every partition's pending proposal (its queue and answers in
  :mod:`.alter_partition`);
* registration (carrying the previous broker epoch from the clean-shutdown
  marker), heartbeats and controlled shutdown, in :mod:`.broker_lifecycle`;
* producer-id allocation, Metadata, ListOffsets, GetReplicaLogInfo and the
  forwarding of CreateTopics / IncrementalAlterConfigs, in
  :mod:`.broker_requests`.

The parts share one :class:`~.broker_context.BrokerContext` (the call's
clocks, the earliest new deadline, the broker epoch, the correlation ids)
and the partitions; the lifecycle reads what else it needs of the broker
through a narrow protocol, never this class.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Iterable

from .config import ProtocolConfig
from .effects import Effect, FileDelete, FileWrite, Fsync, Reply, Send
from . import broker_requests
from .alter_partition import AlterPartitionChannel
from .broker_context import NO_DEADLINE, BrokerContext
from .broker_lifecycle import BrokerLifecycleManager
from .broker_requests import AdminForwarder
from .errors import UnroutableMessage
from .log import PartitionLog
from .messages import (
    AlterPartitionItem,
    AlterPartitionResponse,
    BrokerEndpoint,
    BrokerHeartbeatResponse,
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
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    TopicPartition,
)
from .metadata import Delta, MetadataImage
from .partition import Partition
from .partition_leader import NOTHING_YET
from .purgatory import (
    FROM_CONSUMER,
    FROM_FOLLOWER,
    DelayedProduce,
    FetchPurgatory,
    ProducePurgatory,
    client_fetch_answers,
    produce_done,
    produce_done_into,
)
from .raft import Rng
from .replica_fetcher import ReplicaFetcherManager
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


def parse_log_name(name: str) -> TopicPartition | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return TopicPartition(topic, int(part))


def _soonest_after(times: list[int], now: int, shift: int, best: int) -> int:
    """The earliest of ``best`` and the ``t + shift`` after ``now``
    (:meth:`BrokerRole.next_wakeup`'s fold, ``NO_DEADLINE``: none yet).
    Folded over native ints: one list of every candidate, concatenated,
    filtered and handed to ``min`` as boxed ints was ~1% of a seed, on
    every tick."""
    for t in times:
        t += shift
        if now < t < best:
            best = t
    return best


def _build_unbuilt(partitions: dict[TopicPartition, Partition], reqs: tuple[FetchPartitionRequest, ...],
                   responses: list[FetchPartitionResponse]) -> None:
    """The answers a replica fetch answered now left unbuilt (``NOTHING_YET``,
    :meth:`BrokerRole.handle_replica_fetch`), built: what each would have
    been when served, as nothing served after it (another partition's fetch,
    the fetches and produces a HW move completes) moves its partition's HW
    or log start."""
    for i in range(len(responses)):
        if responses[i] is NOTHING_YET:
            responses[i] = partitions[reqs[i].tp].empty_response()


def _replica_fetch_one(broker: "BrokerRole", msg: ReplicaFetchRequest, src: NodeId, now: int) -> list[Effect]:
    """:meth:`BrokerRole.handle_replica_fetch` of a fetch of one partition
    (nearly every one: a follower has a fetcher per leader, and a leader per
    partition), the same steps with its one answer held as it is: no list of
    answers made, and none copied into the tuple sent."""
    effects: list[Effect] = []
    req = msg.partitions[0]
    p = broker.partitions.get(req.tp)
    if p is None:
        resp = FetchPartitionResponse(req.tp, Errors.NOT_LEADER_OR_FOLLOWER)
    else:  # an empty answer is left unbuilt (NOTHING_YET), as in handle_replica_fetch
        resp, hw_changed = p.serve_replica_fetch_into(req, msg.replica_id, msg.broker_epoch, now, effects, lazy=True)
        if hw_changed:
            broker.hw_changed_into(req.tp, now, effects, p)
    any_data = bool(resp.batches)
    any_error = resp.error != Errors.NONE or resp.diverging_epoch is not None
    if not any_data and not any_error and msg.max_wait_ms > 0:
        broker.fetch_purgatory.park(FROM_FOLLOWER, msg, src, broker.context.mono + msg.max_wait_ms, msg.partitions)
        return effects
    if resp is NOTHING_YET:
        resp = broker.partitions[req.tp].empty_response()  # _build_unbuilt
    effects.append(Send(src, ReplicaFetchResponse(broker.node_id, msg.correlation_id, Errors.NONE, (resp,))))
    return effects


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
        self.is_fenced = True
        self.halted = False
        self.controller_hint: NodeId | None = None
        self._controller_rr = 0
        #: the call's clocks, the earliest new deadline, the broker epoch and
        #: the correlation ids, shared by every part
        self.context = BrokerContext(node_id)
        self.lifecycle = BrokerLifecycleManager(self, config, self.context)
        self.produce_purgatory = ProducePurgatory(self.partitions, self.context)
        self.fetch_purgatory = FetchPurgatory(self.partitions, self.image, self.context)
        self.fetcher = ReplicaFetcherManager(config, self.partitions, self.context)
        # periodic tasks
        self.next_isr_expiry_at = 0
        self.next_hw_checkpoint_at = 0
        self._last_hw_checkpoint: tuple | None = None
        # channels
        self.alter = AlterPartitionChannel()
        #: forwarded admin requests (CreateTopics, IncrementalAlterConfigs)
        self.forwarder = AdminForwarder()
        self.next_producer_seq = 0
        #: replayed but not yet applied (waiting for the initial catch-up)
        self._unpublished = Delta()

    @property
    def broker_epoch(self) -> int:
        """This broker's registration (-1 until registered)."""
        return self.context.broker_epoch

    @broker_epoch.setter
    def broker_epoch(self, epoch: int) -> None:
        self.context.broker_epoch = epoch

    @property
    def mono(self) -> int:
        """The monotonic time of the current call (Kafka's scheduler and
        purgatories run on it; docs/architecture.md, "Clocks")."""
        return self.context.mono

    @property
    def skew(self) -> int:
        """Wall minus monotonic time of the current call."""
        return self.context.skew

    @property
    def previous_broker_epoch(self) -> int:
        """The broker epoch of the clean-shutdown marker found at start (-1: none)."""
        return self.lifecycle.previous_broker_epoch

    def set_clock(self, now: int, mono: int | None) -> None:
        """Take the current call's clocks (``mono=None``: the two agree)."""
        self.context.set_clock(now, mono)

    # ======================================================================
    # dispatch
    # ======================================================================

    def handle(self, msg: Any, now: int, src: NodeId | None, mono: int | None = None) -> list[Effect]:
        """Route one message addressed to the broker role."""
        if self.halted:
            return []
        ctx, m = self.context, now if mono is None else mono  # BrokerContext.set_clock, inline: a call a message
        ctx.mono, ctx.skew = m, now - m
        # the three messages of every replicated write, and the consumers' fetches, directly (compiled, a
        # type test and a native call; the table's lambdas go through generic Python calls); the rest by the table
        kind = type(msg)
        if kind is ReplicaFetchRequest:
            effects = self.handle_replica_fetch(msg, src, now)
        elif kind is ReplicaFetchResponse:
            effects = self.fetcher.handle_response(msg, now)
        elif kind is ProduceRequest:
            effects = self.handle_produce(msg, now)
        elif kind is ClientFetchRequest:  # every consumer poll: a native call, not the table's lambda
            effects = self.handle_client_fetch(msg, now)
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
        """How long a replica fetch may stay unanswered before it is resent
        (:attr:`.replica_fetcher.ReplicaFetcherManager.fetch_timeout_ms`)."""
        return self.fetcher.fetch_timeout_ms

    @property
    def controller_rpc_timeout_ms(self) -> int:
        """Resend registration / heartbeats / AlterPartition not answered in time."""
        return self.lifecycle.controller_rpc_timeout_ms

    def note_deadline(self, at: int) -> None:
        """Remember that a deadline was just created: ``Node._arm`` reads the
        earliest after every message (``BrokerContext.soonest``) and arms a
        timer only when it is earlier than the one already armed, and
        recomputes everything with :meth:`next_wakeup` on each tick."""
        self.context.note_deadline(at)

    def next_wakeup(self, now: int) -> int | None:
        """The earliest future time some deadline of this broker falls due.

        Computed from the state itself (not from a list of scheduled times),
        so deadlines that stopped mattering (a long poll answered early) do
        not cause wake-ups."""
        if self.halted:
            return None
        skew = self.context.skew
        best = _soonest_after([self.next_isr_expiry_at, self.next_hw_checkpoint_at], now, skew, NO_DEADLINE)
        best = _soonest_after(self.lifecycle.deadlines(), now, 0, best)
        best = _soonest_after(self.produce_purgatory.deadlines(), now, skew, best)
        best = _soonest_after(self.fetch_purgatory.deadlines(), now, skew, best)
        best = _soonest_after(self.fetcher.deadlines(now), now, 0, best)
        best = _soonest_after(self.alter.deadlines(self.controller_rpc_timeout_ms), now, 0, best)
        best = _soonest_after(self.forwarder.deadlines(), now, 0, best)
        return None if best == NO_DEADLINE else best

    def next_correlation_id(self) -> int:
        return self.context.next_correlation_id()

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
        self.context.set_clock(now, mono)
        effects: list[Effect] = []
        marker = self.stored.files.get(CLEAN_SHUTDOWN)
        self.lifecycle.previous_broker_epoch = marker.broker_epoch if isinstance(marker, CleanShutdown) else -1
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
        self.next_isr_expiry_at = self.context.mono + self.config.replica_lag_time_max_ms // 2
        self.next_hw_checkpoint_at = self.context.mono + self.config.replica_high_watermark_checkpoint_interval_ms
        effects += self.lifecycle.send_registration(now)
        return effects

    # ======================================================================
    # metadata (KRaft observer / co-located controller)
    # ======================================================================

    def apply_committed(self, entries: Iterable[MetadataEntry], now: int, mono: int | None = None) -> list[Effect]:
        """Replay committed metadata records and apply the resulting delta
        (ReplicaManager.applyDelta). Entries at or below the image's offset
        are ignored, so callers may hand over overlapping batches."""
        self.context.set_clock(now, mono)
        delta = self._unpublished
        for e in entries:
            if e.offset <= self.image.offset:
                continue
            delta.merge(self.image.replay(e.record, e.offset))
        return self.publish_metadata(now)

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
        epoch = self.context.broker_epoch
        return epoch >= 0 and reg is not None and reg.broker_epoch == epoch

    def publish_metadata(self, now: int) -> list[Effect]:
        """Apply what was replayed, once the broker has caught up with its
        own registration."""
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
                    self.fetcher.update_following(p)
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
                self.fetcher.update_following(p)
                effects += self._complete_delayed(tp, now)
            else:
                was_leader = p.is_leader
                e, epoch_changed = p.make_follower(reg, now)
                effects += e
                self.fetcher.update_following(p)
                if was_leader:
                    effects += self._complete_delayed(tp, now)
                if epoch_changed:
                    fetch_leaders.add(p.leader_id)
        for leader in sorted(fetch_leaders):
            effects += self.fetcher.maybe_fetch(now, leader)
        return effects

    # ======================================================================
    # periodic work
    # ======================================================================

    def tick(self, now: int, mono: int | None = None) -> list[Effect]:
        if self.halted:
            return []
        self.context.set_clock(now, mono)
        mono_now = self.context.mono
        # registration / heartbeats
        effects = self.lifecycle.tick(now)
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
            effects += self.checkpoint_hw(force=False)
        # purgatories
        effects += self.produce_purgatory.expire(mono_now)
        effects += self.fetch_purgatory.expire(mono_now, now)
        # fetchers and truncation requests
        effects += self.fetcher.tick(now)
        # AlterPartition channel
        if self.alter.expire(now, self.controller_rpc_timeout_ms):
            self.controller_failed()
        effects += self.alter.maybe_send(self, now)
        # forwarded CreateTopics
        effects += self.forwarder.expire(now)
        lifecycle = self.lifecycle
        if lifecycle.shutting_down and mono_now >= lifecycle.shutdown_deadline:
            effects += lifecycle.finish_shutdown(now)
        return effects

    def checkpoint_hw(self, force: bool) -> list[Effect]:
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

    def begin_controlled_shutdown(self, now: int, mono: int | None = None) -> list[Effect]:
        """Ask the controller to move leaderships away (:mod:`.broker_lifecycle`)."""
        if self.halted or self.lifecycle.shutting_down:
            return []
        self.context.set_clock(now, mono)
        return self.lifecycle.begin_controlled_shutdown(now)

    # ======================================================================
    # produce
    # ======================================================================

    def handle_produce(self, msg: ProduceRequest, now: int) -> list[Effect]:
        if msg.acks not in (0, 1, -1):
            return produce_done(self.partitions, msg.ref, msg.tp, msg.acks, Errors.INVALID_REQUEST, -1, msg.count)
        p = self.partitions.get(msg.tp)
        if p is None or not p.is_leader:
            err = Errors.NOT_LEADER_OR_FOLLOWER if msg.tp in self.image.partitions else Errors.UNKNOWN_TOPIC_OR_PARTITION
            return produce_done(self.partitions, msg.ref, msg.tp, msg.acks, err, -1, msg.count)
        err, batch, required, effects, hw_changed = p.append_as_leader(
            msg.count, msg.payload, msg.acks, msg.producer_id, msg.producer_epoch, msg.base_sequence, now,
            msg.max_timestamp,
        )
        if err != Errors.NONE or batch is None:
            return effects + produce_done(self.partitions, msg.ref, msg.tp, msg.acks, err, -1, msg.count)
        tp = p.tp  # the partition's own, equal to the client's: lookups below find it by identity
        # new data on a leader: parked replica fetches may complete
        self.fetch_purgatory.check_into(tp, now, effects, FROM_FOLLOWER, p)
        if hw_changed:
            self.hw_changed_into(tp, now, effects, p)
        if msg.acks == -1:  # err is NONE here, and stays so for acks 0 and 1
            done, err = p.check_enough_replicas_reach_offset(required)
            if not done:
                self.produce_purgatory.park(DelayedProduce(
                    msg.ref, tp, msg.acks, batch.base_offset, batch.count, required,
                    self.context.mono + msg.timeout_ms))  # the purgatory's timer is monotonic
                return effects
        produce_done_into(effects, p, msg.ref, tp, msg.acks, err, batch.base_offset, batch.count)
        return effects

    def on_hw_changed(self, tp: TopicPartition, now: int) -> list[Effect]:
        """HW moved: complete acks=all produces and consumer long polls."""
        effects: list[Effect] = []
        self.hw_changed_into(tp, now, effects)
        return effects

    def hw_changed_into(self, tp: TopicPartition, now: int, effects: list[Effect], p: Partition | None = None) -> None:
        """:meth:`on_hw_changed`, into the effects in hand; ``p``: ``tp``'s partition if held (else looked up)."""
        self.produce_purgatory.complete_into(tp, effects, p)
        self.fetch_purgatory.check_into(tp, now, effects, None, p)

    def _complete_delayed(self, tp: TopicPartition, now: int) -> list[Effect]:
        """Role change: parked produces finish (NOT_LEADER_OR_FOLLOWER once
        no longer leader) and parked fetches are answered."""
        return self.produce_purgatory.complete(tp) + self.fetch_purgatory.check(tp, now)

    # ======================================================================
    # fetch serving (leader side)
    # ======================================================================

    def handle_replica_fetch(self, msg: ReplicaFetchRequest, src: NodeId | None, now: int) -> list[Effect]:
        if src is None:
            src = msg.replica_id  # a runtime that did not name the sender: answer the fetching replica
        if len(msg.partitions) == 1:  # nearly every fetch (_replica_fetch_one)
            return _replica_fetch_one(self, msg, src, now)
        effects: list[Effect] = []
        responses: list[FetchPartitionResponse] = []
        any_data = False
        any_error = False
        for req in msg.partitions:
            p = self.partitions.get(req.tp)
            if p is None:
                resp = FetchPartitionResponse(req.tp, Errors.NOT_LEADER_OR_FOLLOWER)
            else:  # an empty answer is left unbuilt (NOTHING_YET: no data, no error), as most such fetches park
                resp, hw_changed = p.serve_replica_fetch_into(req, msg.replica_id, msg.broker_epoch, now, effects, lazy=True)
                if hw_changed:
                    self.hw_changed_into(req.tp, now, effects, p)
            responses.append(resp)
            any_data = any_data or bool(resp.batches)
            any_error = any_error or resp.error != Errors.NONE or resp.diverging_epoch is not None
        if not any_data and not any_error and msg.max_wait_ms > 0 and responses:
            self.fetch_purgatory.park(FROM_FOLLOWER, msg, src, self.context.mono + msg.max_wait_ms, msg.partitions)
            return effects
        _build_unbuilt(self.partitions, msg.partitions, responses)
        effects.append(Send(src, ReplicaFetchResponse(self.node_id, msg.correlation_id, Errors.NONE, tuple(responses))))
        return effects

    def handle_client_fetch(self, msg: ClientFetchRequest, now: int) -> list[Effect]:
        responses, answer_now = client_fetch_answers(self.partitions, self.image, msg.partitions)
        if not answer_now and msg.max_wait_ms > 0 and responses:
            self.fetch_purgatory.park(FROM_CONSUMER, msg, None, self.context.mono + msg.max_wait_ms, msg.partitions)
            return []
        return [Reply(ClientFetchResponse(msg.ref, responses))]

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

    # ======================================================================
    # AlterPartition channel (DefaultAlterPartitionManager)
    # ======================================================================

    def submit_alter_partition(self, partition: Partition, item: AlterPartitionItem, not_before: int = 0) -> None:
        """Queue a proposal on the AlterPartition channel
        (:mod:`.alter_partition`); :meth:`handle` / :meth:`tick` send it
        before returning."""
        self.alter.submit(partition, item, not_before)
        self.context.note_deadline(not_before)

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
        OffsetForLeaderEpochResponse:
            lambda self, m, src, now: self.fetcher.handle_offset_for_leader_epoch_response(m, src, now),
        BrokerRegistrationResponse: lambda self, m, src, now: self.lifecycle.handle_registration_response(m, src, now),
        BrokerHeartbeatResponse: lambda self, m, src, now: self.lifecycle.handle_heartbeat_response(m, src, now),
        AlterPartitionResponse: lambda self, m, src, now: self.handle_alter_partition_response(m, src, now),
        ControlledShutdownRequest: lambda self, m, src, now: self.begin_controlled_shutdown(now),
        GetReplicaLogInfoRequest: lambda self, m, src, now: broker_requests.replica_log_info(self, m, src),
    }
