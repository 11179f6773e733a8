"""The KRaft controller role: the quorum replica plus, on its leader, the
active controller (seed 001 §1.2, §2.8, §2.9; seed 000 "KRaft Controller";
seed 002 for ELR and unclean-shutdown handling). Kafka's QuorumController
(metadata/src/main/java/org/apache/kafka/controller/QuorumController.java):
a thin dispatcher over the managers that own the state.

Shape
-----
``ControllerRole(node_id, config, voters, stored, rng)`` owns a voting
:class:`~..raft.RaftReplica` and two metadata images, both kept by the
:class:`~.writer.MetadataWriter`:

* ``image`` — the *committed* image: every committed metadata record replayed
  in order (:mod:`.replay`). Every controller node keeps one (and emits the
  trace events ``partition_metadata``, ``election``,
  ``broker_fenced``/``broker_unfenced`` while replaying).
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

The managers, one module each, as Kafka's QuorumController delegates:

* :mod:`.cluster_control` — registration, heartbeats, sessions, fencing,
  controlled shutdown, unregistration (ClusterControlManager,
  BrokerHeartbeatManager), with :mod:`.heartbeat_tracker` (the sessions in
  BrokerHeartbeatTracker's order, which decides the order of fencing);
* :mod:`.replication_control` — topic creation, AlterPartition, and the
  partition changes and elections a broker's state change makes
  (ReplicationControlManager);
* :mod:`.reassignment` — KIP-455 reassignments;
* :mod:`.unclean_recovery` — KIP-966's unclean recovery;
* :mod:`.configuration_control` — topic configs (ConfigurationControlManager);
* :mod:`.producer_ids` — producer id blocks (ProducerIdControlManager).

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

``handle`` takes the KRaft messages (:data:`~..raft.RAFT_MESSAGES`) and the
controller requests :data:`CONTROLLER_REQUESTS`. Replies go back with
``Send(src, ...)``; a request with ``src=None`` (a client talking to a
controller-only node) is answered with ``Reply``.
"""

from __future__ import annotations

from typing import Any, Final, Iterable

from ..config import ProtocolConfig
from ..effects import Effect, Timer
from ..errors import UnroutableMessage
from ..messages import (
    AllocateProducerIdsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateTopicsRequest,
    GetReplicaLogInfoResponse,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    MetadataEntry,
    NodeId,
    TopicPartition,
    UnregisterBrokerRequest,
)
from ..metadata import MetadataImage
from ..raft import RAFT_MESSAGES, RaftReplica, Rng
from ..storage import StoredState
from .cluster_control import ClusterControlManager
from .configuration_control import ConfigurationControlManager
from .producer_ids import ProducerIdControlManager
from .reassignment import ReassignmentManager
from .replay import replay
from .replication_control import ReplicationControlManager
from .unclean_recovery import UncleanRecoveryManager
from .writer import MetadataWriter, clone_image

#: the quorum's message types, as a set: ``type(msg) in`` is one hash
#: lookup where ``isinstance`` over the tuple tried each type in turn
#: (~1,000 instructions for a message of none of them); none is subclassed
_RAFT_TYPES: Final = frozenset(RAFT_MESSAGES)

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
        self.writer = MetadataWriter(config, self.raft)
        self.recovery = UncleanRecoveryManager(self.writer)
        self.replication = ReplicationControlManager(self.writer, self.recovery)
        self.cluster = ClusterControlManager(self.writer, self.replication)
        self.reassignment = ReassignmentManager(self.writer, self.replication)
        self.configs = ConfigurationControlManager(self.writer, self.replication)
        self.producer_ids = ProducerIdControlManager(self.writer)
        self._active_epoch: int | None = None
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
        return self.writer.work is not None

    @property
    def image(self) -> MetadataImage:
        """The committed metadata image."""
        return self.writer.image

    def committed_entries(self, after_offset: int) -> list[MetadataEntry]:
        """Committed metadata entries with offset > ``after_offset`` (for a
        co-located broker)."""
        r = self.raft
        if not r.caught_up:
            return []
        lo = max(after_offset + 1, r.log_start) - r.log_start
        hi = r.high_watermark - r.log_start
        return list(r.log[lo:hi]) if hi > lo else []

    def start(self, now: int, mono: int | None = None) -> list[Effect]:
        self.writer.clock(now, mono)
        return self._finish(self.raft.start(now, mono), now)

    def handle(self, msg: Any, now: int, src: NodeId | None = None, mono: int | None = None) -> list[Effect]:
        self.writer.clock(now, mono)
        if type(msg) in _RAFT_TYPES:
            return self._finish(self.raft.handle(msg, now, src, mono), now)
        out: list[Effect] = []
        if isinstance(msg, BrokerRegistrationRequest):
            out += self.cluster.register(msg, src)
        elif isinstance(msg, BrokerHeartbeatRequest):
            out += self.cluster.heartbeat(msg, src)
        elif isinstance(msg, AlterPartitionRequest):
            out += self.replication.alter_partition(msg, src if src is not None else msg.broker_id)
        elif isinstance(msg, CreateTopicsRequest):
            out += self.replication.create_topics(msg, src)
        elif isinstance(msg, IncrementalAlterConfigsRequest):
            out += self.configs.incremental_alter_configs(msg, src)
        elif isinstance(msg, AllocateProducerIdsRequest):
            out += self.producer_ids.allocate(msg, src)
        elif isinstance(msg, AlterPartitionReassignmentsRequest):
            out += self.reassignment.alter(msg, src)
        elif isinstance(msg, ListPartitionReassignmentsRequest):
            out += self.reassignment.list(msg, src)
        elif isinstance(msg, UnregisterBrokerRequest):
            out += self.cluster.unregister(msg, src)
        elif isinstance(msg, GetReplicaLogInfoResponse):
            self.recovery.on_replica_log_info(msg)
        else:
            raise UnroutableMessage(f"ControllerRole cannot handle {type(msg).__name__}")
        return self._finish(out, now)

    def begin_shutdown(self, now: int, mono: int | None = None) -> list[Effect]:
        """A controlled shutdown of this controller: if it leads the quorum it
        resigns (EndQuorumEpoch), so the others elect at once instead of
        waiting for the fetch timeout. Call before halting the node."""
        self.writer.clock(now, mono)
        return self._after(self.raft.resign(now, mono), now)

    def tick(self, now: int, mono: int | None = None) -> list[Effect]:
        self.writer.clock(now, mono)
        out = self.raft.tick(now, mono)
        out = self._finish(out, now)
        if self.writer.work is not None and self.cluster.expire_sessions(self.writer.mono):
            out = self._finish(out, now)
        return out

    @property
    def recovering_partitions(self) -> list[TopicPartition]:
        """Partitions with an unclean recovery in progress (Kafka's
        unclean_recovery_partitions_count gauge counts these)."""
        return sorted(self.recovery.recoveries)

    # ------------------------------------------------------------------
    # replay, activation, replies
    # ------------------------------------------------------------------

    def _finish(self, out: list[Effect], now: int) -> list[Effect]:
        """:meth:`_after`, then the work that follows any event on the active
        controller: a first look at leaderless partitions after activation,
        and unclean recoveries moving on (new answers, brokers fenced or
        unfenced, deadlines). Their appends are drained by a second pass."""
        out = self._after(out, now)
        if self.writer.work is not None and (self._scan_pending or self.recovery.recoveries):
            if self._scan_pending:
                self._scan_pending = False
                self.replication.handle_broker_unfenced("controller activated")
            self.recovery.drive(self.writer.mono)
            out = self._after(out, now)
        return out

    def _after(self, out: list[Effect], now: int) -> list[Effect]:
        """Collect append effects, replay what committed, (de)activate, and
        release replies whose records committed."""
        w = self.writer
        out = self.raft.drain_effects() + out
        committed = self.raft.take_committed()
        for e in committed:
            out += replay(w.image, e)
        out += self._check_leadership(now)
        out += w.release()
        if w.outbox:
            out += w.outbox
            w.outbox = []
        if w.work is not None:
            # Timer takes wall time: a monotonic deadline is moved by the skew
            session = self.cluster.next_fencing_run()
            if session is not None:
                out.append(Timer(session + w.skew))
            recovery = self.recovery.next_deadline()
            if recovery is not None:
                out.append(Timer(recovery + w.skew))
        return out

    def _check_leadership(self, now: int) -> list[Effect]:
        r = self.raft
        w = self.writer
        ready = r.is_leader and r.high_watermark > r.epoch_start_offset and w.image.offset >= r.epoch_start_offset
        if w.work is not None and (not r.is_leader or r.epoch != self._active_epoch):
            return self._deactivate()
        if w.work is None and ready:
            w.work = clone_image(w.image)
            self._active_epoch = r.epoch
            # seed 002: a recovery is not in the metadata log, so a new active
            # controller looks at every leaderless partition afresh
            self._scan_pending = True
            self.cluster.activate()
        return []

    def _deactivate(self) -> list[Effect]:
        self._active_epoch = None
        self.cluster.deactivate()
        self.recovery.clear()
        self._scan_pending = False
        return self.writer.fail_over()


__all__ = ["ControllerRole", "CONTROLLER_REQUESTS"]
