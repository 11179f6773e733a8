"""Topics and partitions on the active controller: Kafka's
ReplicationControlManager (metadata/src/main/java/org/apache/kafka/
controller/ReplicationControlManager.java).

It creates topics, validates and commits AlterPartition, and changes
partitions when a broker's state changes (Kafka's handleBrokerFenced,
handleBrokerUnfenced, handleBrokerInControlledShutdown,
handleBrokerUncleanShutdown, handleBrokerUnregistered): every change goes
through :class:`~..partition_change.PartitionChangeBuilder`, which elects
(seed 001 §2.8, §2.9; seed 002 for ELR, LastKnownLeader and unclean
recovery, which it hands to :mod:`.unclean_recovery`).

LastKnownLeader (seed 002, "Delivery plan"): with the recovery manager off
(Kafka's default) the builder records the last ISR member when a fence,
controlled shutdown or unclean-shutdown registration empties the ISR, and
elects it once it is unfenced if no ISR or ELR member is left. Nothing more
is needed here: every unfencing builds every leaderless partition again
(:meth:`ReplicationControlManager.handle_broker_unfenced`), so when all
replicas of a partition were SIGKILLed and came back after unclean
shutdowns, the partition leads again as soon as its LastKnownLeader is
unfenced (trace ``election`` with ``data_kind="last-known-leader"``).

CreateTopics limits (Kafka 4.4's ReplicationControlManager.createTopics and
QuorumController; :class:`~..config.ProtocolConfig` ``max_partitions_per_batch``
and ``max_records_per_user_op``, both 10000 as Kafka's constants): a request
asking for more partitions in all than ``max_partitions_per_batch``
(MAX_PARTITIONS_PER_BATCH, checked by validateTotalNumberOfPartitions before
anything else) is refused, every topic POLICY_VIOLATION "Excessively large
number of partitions per request."; a request whose records would number
more than ``max_records_per_user_op`` (MAX_RECORDS_PER_USER_OP: Kafka
collects them in a BoundedList of that size, whose overflow
EventHandlerExceptionInfo answers with a PolicyViolationException) is
refused whole, every topic POLICY_VIOLATION "Unable to perform excessively
large batch operation.". Either way nothing is written and the answer goes
at once, without waiting for a commit. A request within them is appended
as one atomic batch (ControllerResult.atomicOf): its topics commit with all
their partitions or not at all.
"""

from __future__ import annotations

from typing import Final

from ..effects import Effect
from ..messages import (
    NO_LEADER,
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    CreateTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    Errors,
    MetadataRecord,
    NewTopic,
    NodeId,
    PartitionRecord,
    TopicPartition,
    TopicRecord,
)
from ..metadata import RECOVERED, RECOVERING
from ..partition_change import PartitionChangeBuilder
from ..topic_names import topic_name_error
from .unclean_recovery import UncleanRecoveryManager
from .writer import MetadataWriter, addressed

#: Kafka 4.4's words for the two CreateTopics limits
TOO_MANY_PARTITIONS: Final = "Excessively large number of partitions per request."
TOO_MANY_RECORDS: Final = "Unable to perform excessively large batch operation."


def round_robin(brokers: list[NodeId], partitions: int, rf: int, start: int) -> list[tuple[NodeId, ...]]:
    """The model's placement of a new topic's partitions: partition ``p``'s
    replicas are ``rf`` consecutive brokers of the sorted unfenced ones from
    ``start + p`` (the controller's cursor, which every topic placed this way
    advances by its partition count; Kafka's StripedReplicaPlacer starts at
    a random broker instead). The harness reads it to tell a pinned
    placement that is the model's own from one that is not."""
    return [tuple(brokers[(start + p + i) % len(brokers)] for i in range(rf)) for p in range(partitions)]

class ReplicationControlManager:
    def __init__(self, writer: MetadataWriter, recovery: UncleanRecoveryManager) -> None:
        self.w = writer
        self.recovery = recovery
        #: where the round-robin placement of the next topic starts
        self._assign_cursor = 0

    # ------------------------------------------------------------------
    # partition changes
    # ------------------------------------------------------------------

    def commit_change(self, b: PartitionChangeBuilder) -> bool:
        """Write the builder's change, if any; start an unclean recovery if
        the election rules call for one."""
        change = b.build()
        # the leader epoch after this change (going leaderless bumps it)
        self.recovery.maybe_start(b, change.after.leader_epoch if change is not None else b.current.leader_epoch)
        if change is None:
            return False
        self.w.write(change.record)
        return True

    def handle_broker_fenced(self, broker: NodeId, reason: str) -> None:
        """Shrink every ISR holding ``broker`` and move its leaderships (seed
        001 §2.8, §2.9.1); also what a controlled shutdown does."""
        work = self.w.work
        assert work is not None
        for tp in sorted(work.partitions):
            p = work.partitions[tp]
            if broker in p.isr or p.leader == broker:
                self.commit_change(self.w.builder(tp, reason).remove_from_isr(broker))

    def handle_broker_unfenced(self, reason: str) -> None:
        """Give a leader to every partition that has none and now can have one
        (a broker was unfenced: an ISR or ELR member may be back)."""
        work = self.w.work
        assert work is not None
        for tp in sorted(work.partitions):
            if work.partitions[tp].leader == NO_LEADER:
                self.commit_change(self.w.builder(tp, reason))

    def handle_broker_unclean_shutdown(self, broker: NodeId) -> None:
        """KIP-966: an unclean shutdown may have lost data below the HW, so
        the broker leaves every ISR and ELR."""
        work = self.w.work
        assert work is not None
        for tp in sorted(work.partitions):
            p = work.partitions[tp]
            if broker in p.isr or broker in p.elr:
                self.commit_change(self.w.builder(tp, f"unclean shutdown of {broker}").mark_unclean_shutdown(broker))

    def handle_broker_unregistered(self, broker: NodeId) -> None:
        """Every partition with the broker in its ISR or ELR changes as for a
        fencing, with the broker no acceptable leader."""
        work = self.w.work
        assert work is not None
        for tp in sorted(work.partitions):
            p = work.partitions[tp]
            if broker in p.isr or broker in p.elr or p.leader == broker:
                self.commit_change(self.w.builder(tp, f"unregister broker {broker}").remove_broker(broker))

    # ------------------------------------------------------------------
    # AlterPartition
    # ------------------------------------------------------------------

    def alter_partition(self, req: AlterPartitionRequest, dst: NodeId | None) -> list[Effect]:
        w = self.w
        if w.work is None:
            return [addressed(dst, AlterPartitionResponse(req.correlation_id, Errors.NOT_CONTROLLER))]
        reg = w.work.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            return [addressed(dst, AlterPartitionResponse(req.correlation_id, Errors.STALE_BROKER_EPOCH))]
        results: list[AlterPartitionResult] = []
        for item in req.items:
            err = self._validate_alter(req.broker_id, item)
            if err == Errors.NONE:
                b = w.builder(item.tp, f"alter-partition from {req.broker_id}")
                b.set_target_isr([m for m, _ in item.new_isr]).set_recovery_state(item.leader_recovery_state)
                self.commit_change(b)
            p = w.work.partitions.get(item.tp)
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
        w.answer_after_commit(dst, resp, AlterPartitionResponse(req.correlation_id, Errors.NOT_CONTROLLER))
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
        work = self.w.work
        assert work is not None
        p = work.partitions.get(item.tp)
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
            reg = work.brokers.get(m)
            if reg is None or reg.fenced or reg.in_controlled_shutdown:
                return Errors.INELIGIBLE_REPLICA
            if epoch != -1 and epoch != reg.broker_epoch:
                return Errors.INELIGIBLE_REPLICA
        return Errors.NONE

    # ------------------------------------------------------------------
    # CreateTopics
    # ------------------------------------------------------------------

    def create_topics(self, req: CreateTopicsRequest, src: NodeId | None) -> list[Effect]:
        w = self.w
        if w.work is None:
            results = tuple(CreateTopicResult(t.name, Errors.NOT_CONTROLLER, "not the active controller") for t in req.topics)
            return [addressed(src, CreateTopicsResponse(req.ref, results))]
        if self._partitions_asked(req) > w.config.max_partitions_per_batch:
            return [self._refused(req, src, TOO_MANY_PARTITIONS)]
        cursor = self._assign_cursor
        results_l: list[CreateTopicResult] = []
        records: list[MetadataRecord] = []
        seen: set[str] = set()
        for t in req.topics:
            err, message, topic_records = self._create_topic(t, seen, req.internal)
            records += topic_records
            if len(records) > w.config.max_records_per_user_op:
                self._assign_cursor = cursor  # nothing was placed
                return [self._refused(req, src, TOO_MANY_RECORDS)]
            seen.add(t.name)
            results_l.append(CreateTopicResult(t.name, err, message))
        if records:
            # the request's records as one atomic batch: no topic is ever
            # committed without its partitions (QuorumController appends a
            # ControllerResult.atomicOf whole)
            w.write_atomic(records)
        results = tuple(results_l)
        failed = tuple(
            CreateTopicResult(r.name, Errors.NOT_CONTROLLER if r.error == Errors.NONE else r.error, r.message)
            for r in results
        )
        w.answer_after_commit(src, CreateTopicsResponse(req.ref, results), CreateTopicsResponse(req.ref, failed))
        return []

    def _partitions_asked(self, req: CreateTopicsRequest) -> int:
        """The partitions the request asks for in all, counted as
        ReplicationControlManager.validateTotalNumberOfPartitions counts them:
        an explicit assignment's length, the broker default for -1, nothing
        for a count that is not positive (that topic is refused on its own)."""
        total = 0
        for t in req.topics:
            if t.assignments is not None:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self.w.config.num_partitions
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    @staticmethod
    def _refused(req: CreateTopicsRequest, src: NodeId | None, why: str) -> Effect:
        """The request refused whole: every topic POLICY_VIOLATION (Kafka's
        ControllerApis answers a failed CreateTopics event so)."""
        return addressed(src, CreateTopicsResponse(req.ref, tuple(
            CreateTopicResult(t.name, Errors.POLICY_VIOLATION, why) for t in req.topics)))

    def _create_topic(self, t: NewTopic, seen: set[str],
                      internal: bool = False) -> tuple[int, str, list[MetadataRecord]]:
        """(error, message, the records that create it): nothing for a refused topic."""
        work = self.w.work
        assert work is not None
        bad_name = topic_name_error(t.name, internal)  # ReplicationControlManager validates names first
        if bad_name is not None:
            return Errors.INVALID_TOPIC_EXCEPTION, bad_name, []
        if not t.name or t.name in work.topics or t.name in seen:
            return (Errors.TOPIC_ALREADY_EXISTS if t.name else Errors.INVALID_REQUEST,
                    f"topic {t.name!r} already exists", [])
        configs = dict(t.configs)
        bad_config = _topic_config_error(configs)
        if bad_config:
            return Errors.INVALID_CONFIG, bad_config, []
        err, message, assignments = self._assignments(t)
        if err != Errors.NONE:
            return err, message, []
        records: list[MetadataRecord] = [TopicRecord(t.name, tuple(sorted(configs.items())))]
        for p, replicas in enumerate(assignments):
            isr = tuple(r for r in replicas if self.w.is_active_broker(r))  # never empty (checked above)
            records.append(PartitionRecord(TopicPartition(t.name, p), replicas, isr, isr[0]))
        return Errors.NONE, "", records

    def _assignments(self, t: NewTopic) -> tuple[int, str, list[tuple[NodeId, ...]]]:
        """The topic's replica lists: its manual assignment, validated
        (ReplicationControlManager.validateManualPartitionAssignment, and
        createTopic's refusal of a partition with no active replica), or the
        partitions spread round-robin over the unfenced brokers."""
        work = self.w.work
        assert work is not None
        if t.assignments is not None:
            assignments = [tuple(a) for a in t.assignments]
            if not assignments:
                return Errors.INVALID_PARTITIONS, "no partitions", []
            for i, a in enumerate(assignments):
                err = self.check_assignment(a, len(assignments[0]), i)
                if err:
                    return Errors.INVALID_REPLICA_ASSIGNMENT, err, []
            return Errors.NONE, "", assignments
        live = sorted(b for b in work.brokers if self.w.is_active_broker(b))
        cfg = self.w.config
        n = t.num_partitions if t.num_partitions != -1 else cfg.num_partitions
        rf = t.replication_factor if t.replication_factor != -1 else cfg.default_replication_factor
        if n <= 0:
            return Errors.INVALID_PARTITIONS, "number of partitions must be positive", []
        if rf <= 0 or rf > len(live):
            return Errors.INVALID_REPLICATION_FACTOR, f"replication factor {rf} with {len(live)} unfenced brokers", []
        start = self._assign_cursor
        self._assign_cursor += n
        return Errors.NONE, "", round_robin(live, n, rf, start)

    def check_assignment(self, replicas: tuple[NodeId, ...], rf: int, partition: int) -> str:
        """Why a manually assigned replica list is refused ("" if it is not),
        in Kafka's words."""
        work = self.w.work
        assert work is not None
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        seen: set[NodeId] = set()
        for b in sorted(replicas):
            if b not in work.brokers:
                return f"The manual partition assignment includes broker {b}, but no such broker is registered."
            if b in seen:
                return f"The manual partition assignment includes the broker {b} more than once."
            seen.add(b)
        if len(replicas) != rf:
            return (f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                    f"but this is not consistent with previous partitions, which have {rf} replica(s).")
        if not any(self.w.is_active_broker(r) for r in replicas):
            return (f"All brokers specified in the manual partition assignment for partition {partition} "
                    "are fenced or in controlled shutdown.")
        return ""


def _topic_config_error(configs: dict[str, str]) -> str:
    """Why a new topic's configs are refused ("" if they are not)."""
    if "min.insync.replicas" in configs:
        try:
            if int(configs["min.insync.replicas"]) < 1:
                raise ValueError
        except ValueError:
            return "min.insync.replicas must be a positive integer"
    if "unclean.leader.election.enable" in configs and configs["unclean.leader.election.enable"].lower() not in (
        "true",
        "false",
    ):
        return "unclean.leader.election.enable must be true or false"
    return ""
