"""A node: the composition of a broker role and/or a controller role.

``Node(node_id, roles, config, voters, stored, rng, incarnation_id, endpoint)``
is the one object both runtimes drive (docs/architecture.md, "The core
contract"): ``start(now, mono)``, ``handle(msg, now, src, mono)``,
``tick(now, mono)`` and ``begin_controlled_shutdown(now, mono)`` all return
effects.

Two clocks come in with every call, as a JVM has two: ``now`` is the node's
wall clock (``System.currentTimeMillis``, what the clock nemesis skews) and
``mono`` its monotonic clock (``System.nanoTime``, which no clock jump moves).
Each timer reads the one Kafka's own code reads (docs/architecture.md,
"Clocks"); ``mono=None`` means the two agree (no skew). ``Timer`` effects
stay in wall time: a monotonic deadline is armed at ``deadline + now - mono``.

The node routes each message type to the role that owns it, keeps one timer
armed for the earliest wake-up any role asked for, and, when both roles run
in one process (combined mode), hands the co-located controller's committed
metadata to the broker.

A controller RPC that reaches a broker-only node is refused, not answered:
Kafka enables the controller APIs only on a controller listener, and a
broker's socket server refuses any other API key (``InvalidRequestException``
"not enabled") and closes the connection, so the sender's request times out
and it tries another node. The node does the same without a connection to
close: it sends nothing and records an ``rpc_refused`` trace event. A broker
API reaching a controller-only node is refused the same way (its listener
enables only the controller APIs).
"""

from __future__ import annotations

from typing import Any, Final, Iterable

from .broker_context import NO_DEADLINE
from .config import ProtocolConfig
from .effects import Effect, Halt, Timer, TraceEvent
from .groups.coordinator import GroupCoordinator
from .groups.messages import GROUP_REQUESTS
from .messages import (
    AllocateProducerIdsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    BrokerEndpoint,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ControlledShutdownRequest,
    ClientFetchRequest,
    CreateTopicsRequest,
    EndQuorumEpochRequest,
    GetReplicaLogInfoResponse,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    MetadataEntry,
    UnregisterBrokerRequest,
    NodeId,
    ProduceRequest,
    RaftFetchRequest,
    RaftFetchResponse,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
    VoteRequest,
    VoteResponse,
)
from .controller import ControllerRole
from .raft import RaftReplica, Rng
from .replica_manager import BrokerRole
from .storage import StoredState

#: messages only a controller (or KRaft voter) answers
CONTROLLER_MESSAGES: Final = (
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    AlterPartitionRequest,
    AllocateProducerIdsRequest,
    VoteRequest,
    VoteResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    RaftFetchRequest,
    GetReplicaLogInfoResponse,  # unclean recovery (KIP-966): answers to the controller's question
)

#: admin requests a broker forwards to the active controller (Kafka's
#: ForwardingManager), which a controller commits
FORWARDED: Final = (
    CreateTopicsRequest, IncrementalAlterConfigsRequest,
    AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest, UnregisterBrokerRequest,
)

#: the reasons an ``rpc_refused`` trace event gives
CONTROLLER_API_REFUSED: Final = "controller API on a broker-only node"
BROKER_API_REFUSED: Final = "broker API on a controller-only node"

#: message types that may concern something other than the broker role
_NOT_BROKER_ONLY: Final = frozenset(CONTROLLER_MESSAGES) | {
    *FORWARDED, RaftFetchResponse, ControlledShutdownRequest,
} | frozenset(GROUP_REQUESTS)


_GROUP_REQUESTS: Final = frozenset(GROUP_REQUESTS)

#: what :meth:`Node._for_controller` makes of a message type
_CONTROLLER: Final = 0
_FORWARDED: Final = 1
_RAFT_FETCH_RESPONSE: Final = 2
_OTHER: Final = 3


def _route_of(msg: Any) -> int:
    """Which of :data:`CONTROLLER_MESSAGES`, :data:`FORWARDED` or
    ``RaftFetchResponse`` ``msg`` is an instance of, tested in that order
    (an instance of none: :data:`_OTHER`). It depends on the message's type
    alone, so a node asks once per type (:attr:`Node._routes`): compiled,
    ``isinstance`` of a tuple of eleven classes built for the call was
    ~1,700 instructions a quorum message."""
    if isinstance(msg, CONTROLLER_MESSAGES):
        return _CONTROLLER
    if isinstance(msg, FORWARDED):
        return _FORWARDED
    if isinstance(msg, RaftFetchResponse):
        return _RAFT_FETCH_RESPONSE
    return _OTHER


class Node:
    def __init__(
        self,
        node_id: NodeId,
        roles: Iterable[str],
        config: ProtocolConfig,
        voters: tuple[NodeId, ...],
        stored: StoredState,
        rng: Rng,
        incarnation_id: str,
        endpoint: BrokerEndpoint | None = None,
    ) -> None:
        roles = frozenset(roles)
        unknown = roles - {"broker", "controller"}
        if unknown or not roles:
            raise ValueError(f"roles must be a non-empty subset of broker, controller (got {sorted(roles)})")
        self.node_id = node_id
        self.roles = roles
        self.config = config
        self.voters = tuple(voters)
        self.stored = stored
        self.rng = rng
        self.incarnation_id = incarnation_id
        self.endpoint = endpoint or BrokerEndpoint(node_id, "127.0.0.1", 9092)
        self.broker: BrokerRole | None = None
        self.controller: ControllerRole | None = None
        if "broker" in roles:
            self.broker = BrokerRole(node_id, config, self.voters, stored, rng, incarnation_id, self.endpoint)
        #: the consumer groups this broker coordinates (groups/coordinator.py)
        self.groups: GroupCoordinator | None = GroupCoordinator(self.broker) if self.broker is not None else None
        #: whether a group request has reached this node. Until one has, its
        #: coordinator holds no group, no pending commit and no topic creation
        #: (only ``handle`` makes them), so the per-message checks skip it:
        #: the coordinator is not compiled, and asking it on every message cost
        #: ~2% of a simulated seed's instructions
        self._groups_used = False
        #: a broker-only node learns metadata as a KRaft observer (seed 004)
        self.observer: RaftReplica | None = None
        if "controller" in roles:
            self.controller = ControllerRole(node_id, config, self.voters, stored, rng)
        elif self.broker is not None:
            self.observer = RaftReplica(node_id, self.voters, stored, config, rng, observer=True)
        self._armed: int | None = None
        #: message type -> its route (:func:`_route_of`), found once per type
        self._routes: dict[type, int] = {}
        #: the monotonic time of the call being handled (None: the wall clock's)
        self._mono: int | None = None
        self.halted = False

    # ======================================================================
    # the node API
    # ======================================================================

    def start(self, now: int, mono: int | None = None) -> list[Effect]:
        self._mono = mono
        effects: list[Effect] = []
        if self.controller is not None:
            effects += self.controller.start(now, mono)
        if self.observer is not None:
            effects += self.observer.start(now, mono)
        if self.broker is not None:
            effects += self.broker.start(now, mono)
        effects += self._sync_metadata(now)
        return self._arm(effects, now)

    def handle(self, msg: Any, now: int, src: NodeId | None, mono: int | None = None) -> list[Effect]:
        if self.halted:
            return []
        self._mono = mono
        t = type(msg)
        broker = self.broker
        # the hot path (produce, fetch, replication): metadata cannot change
        # here. The four messages of nearly every call are broker-only by
        # type identity first (a set lookup per message otherwise)
        if broker is not None and (t is ReplicaFetchRequest or t is ReplicaFetchResponse or t is ProduceRequest
                                   or t is ClientFetchRequest or t not in _NOT_BROKER_ONLY):
            return self._arm(broker.handle(msg, now, src, mono), now)
        effects: list[Effect] = []
        if t is ControlledShutdownRequest:
            return self.begin_controlled_shutdown(now, mono)
        if t in _GROUP_REQUESTS:
            if self.groups is None:
                return [self._refuse(msg, src, BROKER_API_REFUSED)]
            self._groups_used = True
            self.broker.set_clock(now, mono)  # type: ignore[union-attr]
            return self._arm(self.groups.handle(msg, now, self.broker.mono), now)  # type: ignore[union-attr]
        if self._for_controller(msg, src):
            if self.controller is not None:
                effects += self.controller.handle(msg, now, src, mono)
            else:
                effects.append(self._refuse(msg, src, CONTROLLER_API_REFUSED))
        elif t is RaftFetchResponse:
            if self.observer is not None:
                effects += self.observer.handle(msg, now, src, mono)
        elif self.broker is not None:
            effects += self.broker.handle(msg, now, src, mono)
        else:
            effects.append(self._refuse(msg, src, BROKER_API_REFUSED))
        effects += self._sync_metadata(now)
        return self._arm(effects, now)

    def tick(self, now: int, mono: int | None = None) -> list[Effect]:
        if self.halted:
            return []
        self._mono = mono
        effects: list[Effect] = []
        if self.controller is not None:
            effects += self.controller.tick(now, mono)
        if self.observer is not None:
            effects += self.observer.tick(now, mono)
        if self.broker is not None:
            effects += self.broker.tick(now, mono)
        if self.groups is not None and self._groups_used:
            effects += self.groups.tick(now, self.broker.mono)  # type: ignore[union-attr]
        effects += self._sync_metadata(now)
        # a tick consumes the armed timer: re-arm whatever is still needed
        self._armed = None
        return self._arm(effects, now, full=True)

    def begin_controlled_shutdown(self, now: int, mono: int | None = None) -> list[Effect]:
        if self.halted:
            return []
        self._mono = mono
        if self.broker is not None:
            # the controller (combined mode) resigns when the broker halts, see _arm
            effects = self.broker.begin_controlled_shutdown(now, mono)
        else:
            assert self.controller is not None  # a node has a broker role, a controller role or both
            effects = self.controller.begin_shutdown(now, mono) + [Halt()]
        return self._arm(effects, now)

    # ======================================================================
    # internals
    # ======================================================================

    def _refuse(self, msg: Any, src: NodeId | None, reason: str) -> TraceEvent:
        """An API this node's roles do not serve: no answer (Kafka's socket
        server closes the connection of an API its listener does not enable),
        one trace event saying what was refused and from whom."""
        return TraceEvent("rpc_refused", {"api": type(msg).__name__, "src": src, "reason": reason})

    def _for_controller(self, msg: Any, src: NodeId | None) -> bool:
        route = self._routes.get(type(msg))
        if route is None:
            route = self._routes[type(msg)] = _route_of(msg)
        if route == _CONTROLLER:
            return True
        if route == _FORWARDED:
            # from a client: the broker forwards it; from a broker: ours to commit
            return src is not None or self.broker is None
        if route == _RAFT_FETCH_RESPONSE:
            # voters replicate through the controller's quorum; a broker-only
            # node is an observer and its broker role does the fetching
            return self.controller is not None
        return False

    def _sync_metadata(self, now: int) -> list[Effect]:
        """Hand newly committed metadata to the broker and tell it who the
        active controller is: from the KRaft observer (broker-only node) or
        from the co-located controller (combined mode)."""
        if self.broker is None:
            return []
        if self.observer is not None:
            if self.observer.leader_id >= 0:
                self.broker.set_controller_hint(self.observer.leader_id)
            entries = self.observer.take_committed()
            return self._applied(self.broker.apply_committed(entries, now, self._mono)) if entries else []
        if self.controller is None:
            return []
        leader = getattr(self.controller, "leader_id", None)
        if leader is not None and leader >= 0:
            self.broker.set_controller_hint(leader)
        entries = self.controller.committed_entries(self.broker.image.offset)
        if not entries:
            return []
        return self._applied(self.broker.apply_committed(entries, now, self._mono))

    def _applied(self, effects: list[Effect]) -> list[Effect]:
        """Metadata was applied: the group coordinator follows the leadership
        of the ``__consumer_offsets`` partitions."""
        if self.groups is not None:
            effects += self.groups.sync_leadership()
            if self.groups.groups:
                # groups loaded from the log have sessions to time out
                # whether or not a member ever reaches this broker
                self._groups_used = True
        return effects

    def apply_committed(self, entries: Iterable[MetadataEntry], now: int, mono: int | None = None) -> list[Effect]:
        """Feed committed metadata to the broker directly (tests, observers)."""
        if self.broker is None:
            return []
        self._mono = mono
        return self._arm(self._applied(self.broker.apply_committed(entries, now, mono)), now)

    def _arm(self, effects: list[Effect], now: int, full: bool = False) -> list[Effect]:
        """Arm one timer for the broker's earliest deadline. After a tick (or
        when nothing is armed) the deadline is recomputed from the broker's
        state; after a message only deadlines created by it are considered."""
        if self.broker is not None and self.broker.halted or effects and isinstance(effects[-1], Halt):
            if not self.halted and self.controller is not None and self.broker is not None:
                # combined mode: the broker finished its controlled shutdown;
                # a leading controller resigns before the halt so the quorum
                # elects at once (Kafka shuts the broker down, then the controller)
                halt_at = next((i for i, e in enumerate(effects) if isinstance(e, Halt)), len(effects))
                effects[halt_at:halt_at] = self.controller.begin_shutdown(now, self._mono)
            self.halted = True
            return effects
        if self.broker is None:
            return effects
        groups = self.groups if self._groups_used else None
        if groups is not None and groups.waiting:
            effects = groups.intercept(effects)
        # the quorum members (controller, observer) arm their own timers
        # the earliest deadline noted since the last message
        # (BrokerContext.take_soonest, inline: two native calls on every
        # message saved); NO_DEADLINE: none
        ctx = self.broker.context
        fresh = ctx.soonest
        ctx.soonest = NO_DEADLINE
        armed = self._armed
        if not full and armed is not None and armed > now:
            # the hot path (after a message): a timer is armed in the future,
            # so only a fresh deadline before it re-arms; ints compared natively
            if now < fresh < armed:
                self._armed = fresh
                effects.append(Timer(fresh))
            return effects
        at = self.broker.next_wakeup(now)
        g_at = groups.next_deadline() if groups is not None else None
        if g_at is not None:
            g_at += self.broker.skew  # monotonic to wall time
            at = g_at if at is None else min(at, g_at)
        if at is not None and (armed is None or armed <= now or at < armed):
            self._armed = at
            effects.append(Timer(at))
        return effects
