"""One hosted partition replica: the leader side and the follower side.

Seed 000 ("Partition", "Replica & ReplicaState", "The ISR state hierarchy",
maybeIncrementLeaderHW, maybeShrinkIsr / maybeExpandIsr, the AlterPartition
round trip, epoch-based truncation) and seed 001 §2.9-2.10 (ISR rules, the
replica transitions).

A :class:`Partition` owns its :class:`~reference_impl.core.log.PartitionLog`
and its idempotent-producer state. It never sends anything itself: methods
return effects, and the broker (:mod:`reference_impl.core.replica_manager`)
does the networking (fetchers, purgatories, the AlterPartition channel)
through the small :class:`PartitionContext` it passes in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Protocol

from .config import ProtocolConfig
from .effects import Effect, TraceEvent
from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from .log import PartitionLog, epoch_runs
from .messages import (
    NO_LEADER,
    AlterPartitionItem,
    AlterPartitionResult,
    Batch,
    Errors,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchPartitionRequest,
    FetchPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    NodeId,
    TopicPartition,
)
from .metadata import MetadataImage, PartitionRegistration
from .producer_state import ProducerStateManager, SequenceCheck

LEADER: Final = "leader"
FOLLOWER: Final = "follower"
NONE: Final = "none"

# follower fetch states (Kafka's PartitionFetchState)
FETCHING: Final = "fetching"
TRUNCATING: Final = "truncating"  # waiting for an OffsetsForLeaderEpoch answer
FENCED: Final = "fenced"  # our leader epoch is stale: wait for newer metadata

#: the answer of a leader that checks no producer sequences (variant
#: producer_sequence_checks off): no error, no duplicate
_UNCHECKED: Final = SequenceCheck()

#: AlterPartition errors after which the leader waits for fresh metadata
#: (the controller's view moved on; seed 000, "AlterPartition rejected")
WAIT_FOR_METADATA_ERRORS: Final = frozenset(
    {
        Errors.INVALID_UPDATE_VERSION,
        Errors.FENCED_LEADER_EPOCH,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.INVALID_REQUEST,
        Errors.NEW_LEADER_ELECTED,
    }
)
#: authoritative "not applied": reset to the last committed ISR
RESET_ERRORS: Final = frozenset({Errors.INELIGIBLE_REPLICA, Errors.OPERATION_NOT_ATTEMPTED})


class PartitionContext(Protocol):
    """What a partition needs from its broker."""

    node_id: NodeId
    config: ProtocolConfig
    image: MetadataImage
    broker_epoch: int

    def submit_alter_partition(self, partition: "Partition", item: AlterPartitionItem) -> None: ...


#: "never caught up" (see ReplicaState)
NEVER: Final = -(1 << 62)

# --------------------------------------------------------------------------
# Leader-side view of a follower
# --------------------------------------------------------------------------


@dataclass
class ReplicaState:
    """Seed 000, "Replica & ReplicaState, the leader's view of a follower".

    Kafka's "never caught up" is lastCaughtUpTimeMs = 0 on a wall clock; node
    clocks here may start at 0, so "never" is :data:`NEVER`."""

    broker_id: NodeId
    leo: int = -1  # unknown until it fetches in this leader epoch
    log_start_offset: int = -1
    last_fetch_leader_leo: int = -1
    last_fetch_time: int = NEVER
    last_caught_up_time: int = NEVER
    broker_epoch: int = -1
    #: leader epoch in which the last fetch was recorded (expansion needs the current one)
    fetch_leader_epoch: int = -1

    def update_fetch_state(
        self, fetch_offset: int, log_start: int, now: int, leader_leo: int, broker_epoch: int, leader_epoch: int
    ) -> None:
        """The two-tier caught-up rule (Replica.updateFetchStateOrThrow):
        reaching the leader's current LEO moves lastCaughtUpTime to now;
        reaching the leader's LEO as of the previous fetch moves it to that
        fetch's time; otherwise it stays."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_time = max(self.last_caught_up_time, now)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_time = max(self.last_caught_up_time, self.last_fetch_time)
        self.leo = fetch_offset
        self.log_start_offset = log_start
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_time = now
        self.broker_epoch = broker_epoch
        self.fetch_leader_epoch = leader_epoch

    def is_caught_up(self, leader_leo: int, now: int, max_lag_ms: int) -> bool:
        """ReplicaState.isCaughtUp: at the leader's LEO, or caught up within the lag window."""
        return self.leo == leader_leo or now - self.last_caught_up_time <= max_lag_ms

    def reset(self, now: int, in_isr: bool, leader_leo: int, new_leader: bool) -> None:
        """A new leader epoch (Replica.resetReplicaState): ISR members count as
        caught up now, the others must fetch in this epoch before they can
        join. A broker that *becomes* leader forgets what followers reported
        to the previous leader; one re-elected in a new epoch keeps their
        offsets and broker epoch (they fetched from it), so the HW need not
        wait a fetch round.

        "Never" is :data:`NEVER`, not Kafka's 0 (1970 on a wall clock; a
        real time on a node clock that starts at 0): a first fetch after the
        reset must not count as caught up as of time 0."""
        if new_leader:
            self.leo = -1
            self.log_start_offset = -1
            self.last_fetch_leader_leo = -1
            self.last_fetch_time = NEVER
            self.broker_epoch = -1
            self.fetch_leader_epoch = -1
        else:
            self.last_fetch_leader_leo = leader_leo
            self.last_fetch_time = now if in_isr else NEVER
        self.last_caught_up_time = now if in_isr else NEVER


# --------------------------------------------------------------------------
# ISR states
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class IsrState:
    """Committed / pending-expand / pending-shrink (seed 000, "The ISR state
    hierarchy"). ``isr`` is what min-ISR checks use; ``maximal_isr`` is what
    the HW waits for. Compared by identity: an AlterPartition response only
    applies to the very state it was proposed from."""

    isr: tuple[NodeId, ...]
    maximal_isr: tuple[NodeId, ...]
    kind: str = "committed"  # "committed" | "pending-expand" | "pending-shrink"
    proposed: tuple[NodeId, ...] | None = None
    last_committed: tuple[NodeId, ...] = ()

    @property
    def inflight(self) -> bool:
        return self.kind != "committed"

    @staticmethod
    def committed(isr: tuple[NodeId, ...]) -> "IsrState":
        isr = tuple(isr)
        return IsrState(isr=isr, maximal_isr=isr, last_committed=isr)


# --------------------------------------------------------------------------
# Partition
# --------------------------------------------------------------------------


@dataclass
class Partition:
    tp: TopicPartition
    ctx: PartitionContext
    log: PartitionLog
    role: str = NONE
    leader_id: NodeId = NO_LEADER
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[NodeId, ...] = ()
    state: IsrState = field(default_factory=lambda: IsrState.committed(()))
    remote: dict[NodeId, ReplicaState] = field(default_factory=dict)
    leader_epoch_start_offset: int = -1
    leader_recovery_state: int = 0
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    # follower fetch state
    fetch_state: str = FETCHING
    fetch_backoff_until: int = 0
    truncation_request_at: int = -1

    def __post_init__(self) -> None:
        # the broker's config, kept: ``ctx`` is a Protocol, so compiled,
        # ``self.ctx.config`` is a lookup by name (read on most fetches)
        self._config: ProtocolConfig = self.ctx.config
        self.producers.rebuild(self.log.batches)
        self._min_isr: int | None = None
        self._fetch_req: FetchPartitionRequest | None = None

    # -- small helpers ---------------------------------------------------

    @property
    def config(self) -> ProtocolConfig:
        return self._config

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, replication factor) (Partition.scala:246-248).
        Cached: it changes only with the assignment or the topic config."""
        if self._min_isr is None:
            topic_cfg = self.ctx.image.topics.get(self.tp.topic)
            self._min_isr = max(1, min(self.config.min_isr_for(topic_cfg), max(1, len(self.replicas))))
        return self._min_isr

    def min_isr_changed(self) -> None:
        self._min_isr = None

    def is_under_min_isr(self) -> bool:
        return len(self.state.isr) < self.effective_min_isr()

    def _trace(self, kind: str, **data) -> TraceEvent:
        data["tp"] = str(self.tp)
        return TraceEvent(kind, data)

    def _hw_trace(self) -> TraceEvent:
        return self._trace("hw", hw=self.log.hw, leo=self.log.leo, role=self.role)

    def _isr_trace(self) -> TraceEvent:
        return self._trace(
            "isr",
            isr=list(self.state.isr),
            maximal_isr=list(self.state.maximal_isr),
            state=self.state.kind,
            partition_epoch=self.partition_epoch,
            leader_epoch=self.leader_epoch,
        )

    def _truncate(self, offset: int, reason: str) -> list[Effect]:
        leo_before = self.log.leo
        hw_before = self.log.hw
        effects = self.log.truncate_to(offset)
        if not effects:
            return []
        self.producers.rebuild(self.log.batches)
        effects.append(self._trace("truncate", to=self.log.leo, leo_before=leo_before, reason=reason))
        if self.log.hw != hw_before:
            effects.append(self._hw_trace())
        return effects

    def _truncate_fully(self, start_offset: int) -> list[Effect]:
        leo_before = self.log.leo
        effects = self.log.truncate_fully(start_offset)
        self.producers.rebuild(())
        effects.append(self._trace("truncate", to=start_offset, leo_before=leo_before, reason="full"))
        effects.append(self._hw_trace())
        return effects

    def loaded_trace(self) -> TraceEvent:
        return self._trace(
            "loaded",
            leo=self.log.leo,
            hw=self.log.hw,
            log_start=self.log.log_start_offset,
            epochs=[list(e) for e in self.log.epochs.entries()],
        )

    # ======================================================================
    # Transitions (seed 001 §2.10; Partition.makeLeader / makeFollower)
    # ======================================================================

    def make_leader(self, reg: PartitionRegistration, now: int) -> tuple[list[Effect], bool]:
        """Become (or stay) leader for ``reg``. Returns (effects, hw_changed).

        A registration older than what we know is ignored. In a new leader
        epoch (or on a follower -> leader transition) the leader records the
        leader-epoch start offset (LESO = its LEO), resets every follower's
        state so only fetches in this epoch count, and may advance the HW at
        once (an ISR of one).
        """
        if reg.partition_epoch < self.partition_epoch or (
            self.is_leader and reg.leader_epoch == self.leader_epoch and reg.partition_epoch == self.partition_epoch
        ):
            return [], False
        effects: list[Effect] = []
        new_leader = not self.is_leader
        new_epoch = new_leader or reg.leader_epoch != self.leader_epoch
        self.replicas = tuple(reg.replicas)
        self._min_isr = None
        self.partition_epoch = reg.partition_epoch
        self.leader_recovery_state = reg.leader_recovery_state
        self.state = IsrState.committed(tuple(reg.isr))
        for r in self.replicas:
            if r != self.ctx.node_id and r not in self.remote:
                self.remote[r] = ReplicaState(r)
        for r in list(self.remote):
            if r not in self.replicas or r == self.ctx.node_id:
                del self.remote[r]
        if new_epoch:
            self.role = LEADER
            self.leader_id = self.ctx.node_id
            self.leader_epoch = reg.leader_epoch
            self.leader_epoch_start_offset = self.log.leo
            effects += self.log.assign_epoch_start(reg.leader_epoch, self.log.leo)
            for rs in self.remote.values():
                rs.reset(now, rs.broker_id in self.state.isr, self.log.leo, new_leader)
            self.fetch_state = FETCHING
            effects.append(
                self._trace(
                    "become_leader",
                    leader_epoch=self.leader_epoch,
                    partition_epoch=self.partition_epoch,
                    isr=list(self.state.isr),
                    leo=self.log.leo,
                    hw=self.log.hw,
                )
            )
        effects.append(self._isr_trace())
        hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
        return effects + hw_effects, hw_changed

    def make_follower(self, reg: PartitionRegistration, now: int) -> tuple[list[Effect], bool]:
        """Become (or stay) a follower. Returns (effects, epoch_changed).

        In a new leader epoch the follower (re)starts fetching from the new
        leader. Its first fetch offset follows Kafka's initialFetchOffset: its
        LEO when it has an epoch cache (the fetch path truncates a divergent
        tail), else its HW. With ``kip101`` off it instead truncates to its HW
        at once, the pre-KIP-101 behaviour whose data loss seed 003 shows.
        """
        if reg.partition_epoch < self.partition_epoch:
            return [], False
        effects: list[Effect] = []
        changed = (
            self.role != FOLLOWER or reg.leader_epoch != self.leader_epoch or reg.leader != self.leader_id
        )
        self.replicas = tuple(reg.replicas)
        self._min_isr = None
        self.partition_epoch = reg.partition_epoch
        self.leader_recovery_state = reg.leader_recovery_state
        self.state = IsrState.committed(tuple(reg.isr))
        if not changed:
            return effects, False
        self.role = FOLLOWER
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.remote.clear()
        self.leader_epoch_start_offset = -1
        self.fetch_state = FETCHING
        self.fetch_backoff_until = 0
        effects.append(
            self._trace(
                "become_follower",
                leader=self.leader_id,
                leader_epoch=self.leader_epoch,
                partition_epoch=self.partition_epoch,
            )
        )
        if not self.config.variants.kip101 or self.log.epochs.is_empty():
            effects += self._truncate(self.log.hw, "hw")
        return effects, True

    def make_offline(self) -> list[Effect]:
        """No longer a replica (removed from the assignment)."""
        self.role = NONE
        self.leader_id = NO_LEADER
        self.remote.clear()
        self.state = IsrState.committed(())
        return []

    # ======================================================================
    # Leader side
    # ======================================================================

    def _stale_broker_epoch(self, replica_id: NodeId, broker_epoch: int) -> bool:
        """Seed 000 (Replica.updateFetchStateOrThrow): a fetch whose broker
        epoch is older than the one the metadata holds for that live broker
        comes from a previous incarnation and is fenced with
        NOT_LEADER_OR_FOLLOWER, so its LEO never feeds the HW. The metadata,
        not the follower's previous fetch: after a leader change the new
        leader has no previous fetch to compare with. A fenced or unknown
        broker has no live epoch to compare with (Kafka's
        getAliveBrokerEpoch), and -1 bypasses the check."""
        b = self.ctx.image.brokers.get(replica_id)
        return b is not None and not b.fenced and b.broker_epoch > broker_epoch

    def _is_replica_isr_eligible(self, r: ReplicaState) -> bool:
        """isReplicaIsrEligible: broker registered, not fenced, not in
        controlled shutdown, and the broker epoch of its fetch matches the one
        the metadata knows (a fetch that sent -1 bypasses the check)."""
        b = self.ctx.image.brokers.get(r.broker_id)
        if b is None or b.fenced or b.in_controlled_shutdown:
            return False
        return r.broker_epoch == -1 or r.broker_epoch == b.broker_epoch

    def maybe_increment_leader_hw(self, now: int) -> tuple[list[Effect], bool]:
        """maybeIncrementLeaderHW (seed 000 pseudo-code) plus the KIP-966 gate.

        HW = min LEO over the maximal ISR, also held back by any replica that
        is caught up and ISR-eligible though not yet in the ISR; it never
        advances while the committed ISR is smaller than the effective min ISR
        (variant ``kip966`` on).
        """
        if not self.is_leader:
            return [], False
        if self.config.variants.kip966 and self.is_under_min_isr():
            return [], False
        leader_leo = self.log.leo
        new_hw = leader_leo
        lag = self.config.replica_lag_time_max_ms
        maximal = self.state.maximal_isr
        for r in self.remote.values():
            if r.leo < new_hw and (
                r.broker_id in maximal or (r.is_caught_up(leader_leo, now, lag) and self._is_replica_isr_eligible(r))
            ):
                new_hw = r.leo
        if self.log.maybe_increment_hw(new_hw):
            return [self._hw_trace()], True
        return [], False

    def _set_state(self, state: IsrState) -> list[Effect]:
        self.state = state
        return [self._isr_trace()]

    def _alter_item(self, new_isr: tuple[NodeId, ...]) -> AlterPartitionItem:
        """The proposal with each member's broker epoch (addBrokerEpochToIsr)."""
        with_epochs = []
        for r in new_isr:
            if r == self.ctx.node_id:
                with_epochs.append((r, self.ctx.broker_epoch))
            else:
                st = self.remote.get(r)
                with_epochs.append((r, st.broker_epoch if st is not None else -1))
        return AlterPartitionItem(
            tp=self.tp,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            new_isr=tuple(with_epochs),
            # The leader has finished recovery by the time it proposes any ISR
            # change, so proposals always say RECOVERED (Kafka's
            # prepareIsrExpand/prepareIsrShrink); proposing RECOVERING with
            # more than one member is refused (seed 000, unclean election).
            leader_recovery_state=0,
        )

    def maybe_expand_isr(self, replica_id: NodeId, now: int) -> list[Effect]:
        """maybeExpandIsr: a follower joins when its LEO >= HW and (strict
        variant) >= the leader-epoch start offset, it fetched in the current
        leader epoch and it is ISR-eligible; only with no change in flight.

        The new member is pending: the min-ISR gate and acks=all keep reading
        the committed ISR until the controller commits (seed 002's example:
        ISR [0], maximal ISR [0, 2], min ISR 2, the HW waits). Variant
        ``maximal_isr`` off applies the expansion locally at once, as the
        pre-KIP-497 leader did, so the HW advances on [0, 2] first."""
        if not self.is_leader or self.state.inflight or replica_id in self.state.isr:
            return []
        r = self.remote.get(replica_id)
        if r is None or r.fetch_leader_epoch != self.leader_epoch:
            return []
        if r.leo < self.log.hw:
            return []
        if self.config.variants.strict_isr_expand and r.leo < self.leader_epoch_start_offset:
            return []
        if not self._is_replica_isr_eligible(r):
            return []
        committed = self.state.isr
        proposed = committed + (replica_id,)
        local = committed if self.config.variants.maximal_isr else proposed
        state = IsrState(
            isr=local, maximal_isr=proposed, kind="pending-expand", proposed=proposed, last_committed=committed
        )
        effects = self._set_state(state)
        self.ctx.submit_alter_partition(self, self._alter_item(proposed))
        return effects

    def out_of_sync_replicas(self, now: int) -> list[NodeId]:
        """getOutOfSyncReplicas: ISR members (not the leader) that are not caught up."""
        lag = self.config.replica_lag_time_max_ms
        out = []
        for rid in self.state.isr:
            if rid == self.ctx.node_id:
                continue
            r = self.remote.get(rid)
            if r is None or not r.is_caught_up(self.log.leo, now, lag):
                out.append(rid)
        return out

    def maybe_shrink_isr(self, now: int) -> tuple[list[Effect], bool]:
        """maybeShrinkIsr (run every replica_lag_time_max_ms / 2). With the
        maximal-ISR rule the shrink is only proposed: the HW keeps waiting for
        the old ISR until the controller commits. Variant ``maximal_isr`` off
        applies the shrink locally right away (pre-KIP-497 behaviour)."""
        if not self.is_leader or self.state.inflight:
            return [], False
        out = self.out_of_sync_replicas(now)
        if not out:
            return [], False
        committed = self.state.isr
        proposed = tuple(r for r in committed if r not in out)
        if self.config.variants.maximal_isr:
            state = IsrState(
                isr=committed, maximal_isr=committed, kind="pending-shrink", proposed=proposed, last_committed=committed
            )
        else:
            state = IsrState(
                isr=proposed, maximal_isr=proposed, kind="pending-shrink", proposed=proposed, last_committed=committed
            )
        effects = self._set_state(state)
        self.ctx.submit_alter_partition(self, self._alter_item(proposed))
        hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
        return effects + hw_effects, hw_changed

    def handle_alter_partition_result(
        self, result: AlterPartitionResult, proposed_from: IsrState, now: int
    ) -> tuple[list[Effect], bool, bool]:
        """Apply an AlterPartition answer. Returns (effects, hw_changed, retry).

        Stale answers (the state moved on since the proposal: a metadata
        update or a new election) are ignored. Success installs the committed
        ISR if its partition epoch is not older than ours. INELIGIBLE_REPLICA /
        OPERATION_NOT_ATTEMPTED reset to the last committed ISR;
        INVALID_UPDATE_VERSION and friends wait for metadata; anything else is
        transient and ``retry`` asks the broker to resubmit after the backoff.
        """
        if not self.is_leader or self.state is not proposed_from:
            return [], False, False
        if result.error == Errors.NONE:
            if result.leader_epoch != self.leader_epoch or result.partition_epoch < self.partition_epoch:
                return [], False, False
            self.partition_epoch = result.partition_epoch
            effects = self._set_state(IsrState.committed(tuple(result.isr)))
            hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
            return effects + hw_effects, hw_changed, False
        if result.error in RESET_ERRORS:
            effects = self._set_state(IsrState.committed(self.state.last_committed))
            hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
            return effects + hw_effects, hw_changed, False
        if result.error in WAIT_FOR_METADATA_ERRORS:
            return [], False, False
        return [], False, True

    def retry_alter_partition(self) -> AlterPartitionItem | None:
        """The item to resubmit for the current pending state, if still pending."""
        if not self.is_leader or not self.state.inflight or self.state.proposed is None:
            return None
        return self._alter_item(self.state.proposed)

    # -- serving fetches -----------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        """FENCED_LEADER_EPOCH for a requester behind us, UNKNOWN_LEADER_EPOCH
        for one ahead of us, NONE when equal or not given (-1)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return Errors.NONE
        if current_leader_epoch < self.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        return Errors.UNKNOWN_LEADER_EPOCH

    def check_leader_request(self, current_leader_epoch: int) -> int:
        """What a request only the leader serves is refused with, in Kafka's
        order (Partition.getLocalLog): the requester's leader epoch first, so
        an ex-leader fences a requester behind it with FENCED_LEADER_EPOCH
        (and waits for one ahead with UNKNOWN_LEADER_EPOCH); only a requester
        in our epoch hears NOT_LEADER_OR_FOLLOWER."""
        err = self.check_leader_epoch(current_leader_epoch)
        if err:
            return err
        return Errors.NONE if self.is_leader else Errors.NOT_LEADER_OR_FOLLOWER

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """Inline divergence (Partition.readRecords): the fetcher's last
        fetched epoch ends earlier here than its fetch offset, or does not
        exist here -> it must truncate to (epoch, end offset)."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return (epoch, end)
        return None

    def _response(
        self, error: int, batches: tuple[Batch, ...] = (), diverging_epoch: tuple[int, int] | None = None,
    ) -> FetchPartitionResponse:
        # every argument by position: the compiled constructor is then a direct call
        log = self.log
        leader = (self.leader_id, self.leader_epoch) if error != Errors.NONE else None
        return FetchPartitionResponse(self.tp, error, log.hw, log.hw, log.log_start_offset, batches, diverging_epoch, leader)

    def _max_batches(self, max_bytes: int) -> int:
        # payloads are opaque to the core; budget about 1 KiB per batch
        return max(1, max_bytes // 1024)

    def serve_replica_fetch(
        self, req: FetchPartitionRequest, replica_id: NodeId, broker_epoch: int, now: int, record: bool = True
    ) -> tuple[FetchPartitionResponse, list[Effect], bool]:
        """A follower's fetch on the leader. Returns (response, effects, hw_changed).

        Records the follower's progress (unless ``record`` is False: a parked
        fetch being completed), then tries ISR expansion and HW advancement
        (seed 000, "Recording follower progress").
        """
        err = self.check_leader_request(req.current_leader_epoch)
        if err:
            return self._response(err), [], False
        r = self.remote.get(replica_id)
        if r is None:
            return self._response(Errors.NOT_LEADER_OR_FOLLOWER), [], False
        if broker_epoch >= 0 and self._stale_broker_epoch(replica_id, broker_epoch):
            return self._response(Errors.NOT_LEADER_OR_FOLLOWER), [], False
        log = self.log
        # the common case needs no epoch lookup: the follower is in our latest epoch, not past our LEO
        if req.last_fetched_epoch != log.epochs.latest_epoch or req.fetch_offset > log.leo:
            div = self.diverging_epoch(req.last_fetched_epoch, req.fetch_offset)
            if div is not None:
                return self._response(Errors.NONE, diverging_epoch=div), [], False
        if req.fetch_offset > log.leo or req.fetch_offset < log.log_start_offset:
            return self._response(Errors.OFFSET_OUT_OF_RANGE), [], False
        effects: list[Effect] = []
        hw_changed = False
        if record:
            leo_before = r.leo
            r.update_fetch_state(
                req.fetch_offset, req.log_start_offset, now, self.log.leo, broker_epoch, self.leader_epoch
            )
            expanded = self.maybe_expand_isr(replica_id, now)
            if expanded:
                effects += expanded
            if r.leo != leo_before or expanded:
                hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
                effects += hw_effects
        batches = self.log.read(req.fetch_offset, self.log.leo, self._max_batches(req.max_bytes))
        return self._response(Errors.NONE, batches=batches), effects, hw_changed

    def serve_client_fetch(self, req: FetchPartitionRequest) -> FetchPartitionResponse:
        """A consumer fetch: only the leader serves, and only below the HW."""
        err = self.check_leader_request(req.current_leader_epoch)
        if err:
            return self._response(err)
        div = self.diverging_epoch(req.last_fetched_epoch, req.fetch_offset)
        if div is not None:
            return self._response(Errors.NONE, diverging_epoch=div)
        if req.fetch_offset > self.log.leo or req.fetch_offset < self.log.log_start_offset:
            return self._response(Errors.OFFSET_OUT_OF_RANGE)
        batches = self.log.read(req.fetch_offset, self.log.hw, self._max_batches(req.max_bytes))
        return self._response(Errors.NONE, batches=batches)

    def list_offset(self, req: ListOffsetsRequest) -> ListOffsetsResponse:
        """ListOffsets on the leader (Partition.fetchOffsetForTimestamp and
        UnifiedLog.fetchOffsetByTimestamp), for a client: everything is
        capped at the HW (read_uncommitted; with no transactions the LSO is
        the HW too, so read_committed answers the same).

        * latest (-1): the HW, refused with OFFSET_NOT_AVAILABLE while the HW
          is below the leader-epoch start offset (a new leader whose HW has
          not caught up);
        * earliest (-2), and earliest local (-4) without tiered storage: the
          log start, with the epoch it was written in;
        * latest tiered (-5) without tiered storage: offset -1, epoch -1;
        * a timestamp (>= 0): the first record at or after it; max timestamp
          (-3): the first record holding the log's largest timestamp. Below
          the HW only: a record at or past it is "none" (offset -1, or
          OFFSET_NOT_AVAILABLE in the lagging-HW state). The core finds the
          batch; the runtime reading the records picks the record in it.
        """
        tp, ref = self.tp, req.ref
        err = self.check_leader_request(req.current_leader_epoch)
        if err:
            return ListOffsetsResponse(ref, tp, err)
        log = self.log
        ts = req.timestamp
        lagging = log.hw < self.leader_epoch_start_offset
        if ts == LATEST_TIMESTAMP:
            if lagging:
                return ListOffsetsResponse(ref, tp, Errors.OFFSET_NOT_AVAILABLE)
            return ListOffsetsResponse(ref, tp, Errors.NONE, log.hw, log.latest_epoch)
        if ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = log.log_start_offset
            return ListOffsetsResponse(ref, tp, Errors.NONE, start, log.epochs.epoch_for_offset(start))
        if ts == LATEST_TIERED_TIMESTAMP:
            return ListOffsetsResponse(ref, tp, Errors.NONE, -1, -1)
        if ts == MAX_TIMESTAMP:
            found = log.batch_of_max_timestamp(log.hw)
        else:  # any other value is a timestamp, as in Kafka (-6 finds the first record)
            found = log.first_batch_at_or_after_timestamp(ts, log.hw)
        if found is None:
            return ListOffsetsResponse(ref, tp, Errors.OFFSET_NOT_AVAILABLE if lagging else Errors.NONE)
        return ListOffsetsResponse(
            ref, tp, Errors.NONE, found.base_offset, found.leader_epoch, found.max_timestamp, found
        )

    def offset_for_leader_epoch(self, leader_epoch: int, current_leader_epoch: int) -> tuple[int, int, int]:
        """lastOffsetForLeaderEpoch on the leader: (error, epoch, end offset)."""
        err = self.check_leader_request(current_leader_epoch)
        if err:
            return err, -1, -1
        epoch, end = self.log.end_offset_for_epoch(leader_epoch)
        return Errors.NONE, epoch, end

    # -- produce -------------------------------------------------------------

    def append_as_leader(
        self, count: int, payload, acks: int, producer_id: int, producer_epoch: int, base_sequence: int, now: int,
        max_timestamp: int = -1,
    ) -> tuple[int, Batch | None, int, list[Effect], bool]:
        """appendRecordsToLeader. Returns (error, batch, required_offset, effects, hw_changed).

        acks=all is refused with NOT_ENOUGH_REPLICAS *before* anything is
        written when the committed ISR is below the effective min ISR. A
        duplicate idempotent batch is not appended: ``batch`` describes the
        original batch (whose base offset the broker returns) and
        ``required_offset`` ends there. ``batch`` is None exactly when
        ``error`` is set. ``required_offset`` is the offset the HW must reach.
        """
        if not self.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER, None, -1, [], False
        if acks == -1 and self.is_under_min_isr():
            return Errors.NOT_ENOUGH_REPLICAS, None, -1, [], False
        if self.config.variants.producer_sequence_checks:
            check = self.producers.check(producer_id, producer_epoch, base_sequence, count)
        else:  # a broker without idempotence appends whatever comes
            check = _UNCHECKED
        if check.error:
            return check.error, None, -1, [], False
        if check.duplicate is not None:
            dup = check.duplicate
            return Errors.NONE, Batch(dup.base_offset, -1, dup.last_offset - dup.base_offset + 1, None), dup.last_offset + 1, [], False
        batch, effects = self.log.append_as_leader(
            self.leader_epoch, count, payload, producer_id, producer_epoch, base_sequence, max_timestamp
        )
        self.producers.record(batch)
        effects.append(
            self._trace(
                "append",
                base=batch.base_offset,
                count=batch.count,
                epoch=batch.leader_epoch,
                epochs=[[batch.leader_epoch, batch.base_offset]],
                leo=self.log.leo,
                role=LEADER,
            )
        )
        hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
        return Errors.NONE, batch, batch.next_offset, effects + hw_effects, hw_changed

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """checkEnoughReplicasReachOffset: (done, error) for a parked acks=all produce."""
        if not self.is_leader:
            return True, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.hw >= required_offset:
            if len(self.state.maximal_isr) >= self.effective_min_isr():
                return True, Errors.NONE
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, Errors.NONE

    # ======================================================================
    # Follower side
    # ======================================================================

    def wants_fetch(self, now: int) -> bool:
        return (
            self.role == FOLLOWER
            and self.leader_id != NO_LEADER
            and self.fetch_state == FETCHING
            and now >= self.fetch_backoff_until
        )

    def fetch_request(self) -> FetchPartitionRequest:
        """Fetch offset = LEO, current leader epoch, last fetched epoch (seed
        001 §2.2.2). Without KIP-101 there is no epoch to check divergence by."""
        log = self.log
        last_epoch = log.epochs.latest_epoch if self.config.variants.kip101 else -1
        # the last request, if nothing it carries has moved (compared field
        # by field: a key tuple built per call cost four boxed ints and a tuple)
        cached = self._fetch_req
        if (cached is not None and cached.fetch_offset == log.leo and cached.current_leader_epoch == self.leader_epoch
                and cached.last_fetched_epoch == last_epoch and cached.log_start_offset == log.log_start_offset):
            return cached
        req = FetchPartitionRequest(
            tp=self.tp,
            fetch_offset=log.leo,
            current_leader_epoch=self.leader_epoch,
            last_fetched_epoch=last_epoch,
            log_start_offset=log.log_start_offset,
            max_bytes=self.config.replica_fetch_max_bytes,
        )
        self._fetch_req = req
        return req

    def truncation_offset(self, leader_epoch: int, leader_end: int) -> int:
        """Where to truncate given the leader's (epoch, end offset) for our
        last epoch (AbstractFetcherThread.getOffsetTruncationState)."""
        leo = self.log.leo
        if leader_end == UNDEFINED_EPOCH_OFFSET:
            return self.log.hw
        if leader_epoch == UNDEFINED_EPOCH:
            return min(leader_end, leo)
        f_epoch, f_end = self.log.end_offset_for_epoch(leader_epoch)
        if f_epoch == UNDEFINED_EPOCH:
            return min(leader_end, leo)
        if f_epoch != leader_epoch:
            # we never saw the leader's epoch: cut to the end of our own
            # largest epoch below it; the next fetch checks again
            return min(f_end, leo)
        return min(leader_end, f_end, leo)

    def handle_fetch_response(self, resp: FetchPartitionResponse, now: int) -> tuple[list[Effect], str | None]:
        """Apply one partition of a fetch response on the follower.

        Returns (effects, follow_up) where follow_up is None, ``"offsets_for_leader_epoch"``
        (ask the leader for the end of its current epoch) or ``"backoff"``.
        """
        if self.role != FOLLOWER:
            return [], None
        effects: list[Effect] = []
        if resp.error == Errors.NONE:
            if resp.diverging_epoch is not None:
                epoch, end = resp.diverging_epoch
                effects += self._truncate(self.truncation_offset(epoch, end), "diverging-epoch")
                return effects, None
            leo = self.log.leo
            batches = resp.batches
            fresh = batches if batches and batches[0].base_offset == leo else tuple(
                b for b in batches if b.base_offset + b.count > leo
            )
            if fresh:
                first = fresh[0]
                if first.base_offset > self.log.leo:
                    # the leader's log starts past ours (Kafka's truncateFullyAndStartAt)
                    effects += self._truncate_fully(first.base_offset)
                elif first.base_offset < self.log.leo:
                    # our last batch ends inside one of the leader's: it diverged
                    # mid-batch. Cut back to a batch boundary; if that is not the
                    # leader's boundary the next fetch (from the new LEO) retries.
                    effects += self._truncate(first.base_offset, "diverging-epoch")
                    if self.log.leo != first.base_offset:
                        return effects, None
                effects += self.log.append_as_follower(fresh)
                for b in fresh:
                    self.producers.record(b)
                last = fresh[-1]
                effects.append(
                    self._trace(
                        "append",
                        base=first.base_offset,
                        count=last.next_offset - first.base_offset,
                        epoch=last.leader_epoch,
                        epochs=epoch_runs(fresh),
                        leo=self.log.leo,
                        role=FOLLOWER,
                    )
                )
            if resp.high_watermark >= 0 and self.log.set_follower_hw(resp.high_watermark):
                effects.append(self._hw_trace())
            return effects, None
        if resp.error == Errors.OFFSET_OUT_OF_RANGE:
            if resp.log_start_offset > self.log.leo:
                # behind the leader's log start: restart our log there
                effects += self._truncate_fully(resp.log_start_offset)
                return effects, None
            self.fetch_state = TRUNCATING
            self.truncation_request_at = now
            return effects, "offsets_for_leader_epoch"
        if resp.error == Errors.FENCED_LEADER_EPOCH:
            # the leader is in a newer epoch than we know: wait for metadata
            self.fetch_state = FENCED
            return effects, None
        self.fetch_backoff_until = now + self.config.replica_fetch_backoff_ms
        return effects, "backoff"

    def handle_offset_for_leader_epoch_response(self, error: int, epoch: int, end_offset: int, now: int) -> list[Effect]:
        """Truncate to the leader's answer, then resume fetching."""
        if self.role != FOLLOWER or self.fetch_state != TRUNCATING:
            return []
        if error != Errors.NONE:
            self.fetch_state = FETCHING
            self.fetch_backoff_until = now + self.config.replica_fetch_backoff_ms
            return []
        self.fetch_state = FETCHING
        # asked for the leader's current epoch: its end is the leader's LEO,
        # and a log longer than the leader's is cut back to it (Kafka's
        # handleOutOfRangeError, e.g. after an unclean election)
        target = self.log.hw if end_offset == UNDEFINED_EPOCH_OFFSET else min(end_offset, self.log.leo)
        return self._truncate(target, "diverging-epoch")
