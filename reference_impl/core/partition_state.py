"""One hosted partition replica's state, shared by its two sides.

Seed 000 ("Partition", "Replica & ReplicaState", "The ISR state hierarchy")
and seed 001 §2.10. Kafka keeps one ``Partition`` class
(core/src/main/scala/kafka/cluster/Partition.scala) with the leader's view
of its followers in ``Replica`` (ReplicaState) and the fetch state of a
follower in AbstractFetcherThread's ``PartitionFetchState``. Here the
partition is three classes stacked one on the other, one concern a module:

* :class:`PartitionState` (this module) — the state, the leader's view of a
  follower (:class:`ReplicaState`), the ISR states (:class:`IsrState`), and
  truncation;
* :class:`~.partition_leader.LeaderPartition` — the leader side: HW, ISR
  expansion and shrink, the AlterPartition round trip, serving fetches,
  ListOffsets and appends;
* :class:`~.partition.Partition` — the transitions (makeLeader /
  makeFollower) and the follower side: fetch requests, fetch responses and
  epoch-based truncation.

Stacked, not composed: a compiled method call on the same object is a
native call, and the leader side runs on every produce and fetch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .config import ProtocolConfig
from .effects import AppendTrace, Effect, HwTrace, TraceEvent
from .log import PartitionLog
from .messages import NO_LEADER, AlterPartitionItem, FetchPartitionRequest, NodeId, TopicPartition
from .metadata import MetadataImage
from .producer_state import ProducerStateManager

LEADER: Final = "leader"
FOLLOWER: Final = "follower"
NONE: Final = "none"

# follower fetch states (Kafka's PartitionFetchState)
FETCHING: Final = "fetching"
TRUNCATING: Final = "truncating"  # waiting for an OffsetsForLeaderEpoch answer
FENCED: Final = "fenced"  # our leader epoch is stale: wait for newer metadata


class PartitionContext(Protocol):
    """What a partition needs from its broker."""

    node_id: NodeId
    config: ProtocolConfig
    image: MetadataImage
    broker_epoch: int

    #: ``partition`` is the proposing leader side
    #: (:class:`~.partition_leader.LeaderPartition`, a module above this one)
    def submit_alter_partition(self, partition: Any, item: AlterPartitionItem) -> None: ...


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


@dataclass(frozen=True, eq=False, init=False)
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

    # spelt out (init=False): a frozen dataclass's generated __init__ stays
    # interpreted when the module is compiled (see reference_impl.core.effects)
    def __init__(
        self, isr: tuple[NodeId, ...], maximal_isr: tuple[NodeId, ...], kind: str = "committed",
        proposed: tuple[NodeId, ...] | None = None, last_committed: tuple[NodeId, ...] = (),
    ) -> None:
        object.__setattr__(self, "isr", isr)
        object.__setattr__(self, "maximal_isr", maximal_isr)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "proposed", proposed)
        object.__setattr__(self, "last_committed", last_committed)

    @property
    def inflight(self) -> bool:
        return self.kind != "committed"

    @staticmethod
    def committed(isr: tuple[NodeId, ...]) -> "IsrState":
        isr = tuple(isr)
        return IsrState(isr=isr, maximal_isr=isr, last_committed=isr)


# --------------------------------------------------------------------------
# Partition state
# --------------------------------------------------------------------------


@dataclass
class PartitionState:
    """A hosted replica's state and what both sides read of it: its role,
    epochs, assignment and ISR state, its log and producer state, the
    follower's fetch state, and the trace events both sides emit."""

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
        # and its metadata image (one object for the broker's life), likewise:
        # a follower's fetch checks its broker epoch against it
        self._image: MetadataImage = self.ctx.image
        self.producers.rebuild(self.log.batches)
        self._min_isr: int | None = None
        self._fetch_req: FetchPartitionRequest | None = None
        #: ``str(self.tp)``, spelt once: every trace event names its partition
        #: (compiled, ``str()`` of a native object is a generic call)
        self._tp_name: str = str(self.tp)
        #: ``remote``'s replicas in its order, renewed with every change of
        #: ``remote`` (:meth:`remote_changed`): the leader's HW is computed
        #: over them on every follower fetch and append, and compiled, a
        #: dict's values are walked by a generic iterator (~85 instructions
        #: a replica)
        self._remotes: list[ReplicaState] = list(self.remote.values())

    def remote_changed(self) -> None:
        """``remote`` changed: renew the list of its replicas."""
        self._remotes = list(self.remote.values())

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
            topic_cfg = self._image.topics.get(self.tp.topic)
            self._min_isr = max(1, min(self.config.min_isr_for(topic_cfg), max(1, len(self.replicas))))
        return self._min_isr

    def min_isr_changed(self) -> None:
        self._min_isr = None

    def is_under_min_isr(self) -> bool:
        return len(self.state.isr) < self.effective_min_isr()

    def _trace(self, kind: str, **data) -> TraceEvent:
        data["tp"] = self._tp_name
        return TraceEvent(kind, data)

    def _hw_trace(self) -> HwTrace:
        # typed fields, its data built only when read (effects.HwTrace): every
        # HW move on every replica makes one of these
        log = self.log
        return HwTrace(log.hw, log.leo, self.role, self._tp_name)

    def _append_trace(self, base: int, count: int, epoch: int, epochs: list[list[int]] | None,
                      role: str) -> AppendTrace:
        """The ``append`` event of a leader's or a follower's append, typed
        (effects.AppendTrace), as :meth:`_hw_trace` (one per batch appended
        on every replica); ``epochs`` None: one run, of ``epoch`` from ``base``."""
        return AppendTrace(base, count, epoch, epochs, self.log.leo, role, self._tp_name)

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
