"""Partition reassignment (KIP-455) on the active controller.

Kafka keeps these in ReplicationControlManager
(metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java:
alterPartitionReassignments, changePartitionReassignment,
cancelPartitionReassignment, listPartitionReassignments), with the replica
arithmetic in PartitionReassignmentReplicas.java and
PartitionReassignmentRevert.java (here :func:`~..partition_change.reassignment_replicas`
and :func:`~..partition_change.revert_reassignment`). A reassignment is
finished by the builder when the ISR holds the whole target (an
AlterPartition, or a change made here).
"""

from __future__ import annotations

from ..effects import Effect
from ..messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    Errors,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    NodeId,
    OngoingReassignment,
    ReassignmentResult,
    TopicPartition,
)
from ..metadata import RECOVERING, PartitionRegistration
from ..partition_change import reassignment_replicas, revert_reassignment
from .replication_control import ReplicationControlManager
from .writer import MetadataWriter, addressed


class ReassignmentManager:
    def __init__(self, writer: MetadataWriter, replication: ReplicationControlManager) -> None:
        self.w = writer
        self.replication = replication

    def alter(self, req: AlterPartitionReassignmentsRequest, src: NodeId | None) -> list[Effect]:
        """AlterPartitionReassignments (KIP-455; Kafka's
        ReplicationControlManager.alterPartitionReassignments): each partition
        is checked and changed on its own (one refused partition does not stop
        the others), its record written through the quorum, and the answer
        sent once everything has committed. A target list moves the partition
        (:meth:`_change`); ``None`` cancels the reassignment in progress
        (:meth:`_cancel`)."""
        work = self.w.work
        if work is None:
            return [addressed(src, AlterPartitionReassignmentsResponse(req.ref, tuple(
                ReassignmentResult(r.tp, Errors.NOT_CONTROLLER, "not the active controller") for r in req.partitions)))]
        results: list[ReassignmentResult] = []
        for r in req.partitions:
            p = work.partitions.get(r.tp)
            if p is None:
                err, message = Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {r.tp.topic}:{r.tp.partition}."
            elif r.replicas is None:
                err, message = self._cancel(r.tp, p)
            elif not req.allow_replication_factor_change and len(r.replicas) != len(p.replicas) - len(p.removing_replicas):
                # KIP-860: the replication factor is the target's of any reassignment in progress
                err, message = Errors.INVALID_REPLICATION_FACTOR, (
                    f"The replication factor is changed from {len(p.replicas) - len(p.removing_replicas)} to "
                    f"{len(r.replicas)} but AllowReplicationFactorChange is false.")
            else:
                err, message = self._change(r.tp, p, tuple(r.replicas))
            results.append(ReassignmentResult(r.tp, err, message))
        failover = tuple(ReassignmentResult(x.tp, Errors.NOT_CONTROLLER if x.error == Errors.NONE else x.error, x.message)
                         for x in results)
        self.w.answer_after_commit(src, AlterPartitionReassignmentsResponse(req.ref, tuple(results)),
                                   AlterPartitionReassignmentsResponse(req.ref, failover))
        return []

    def _change(self, tp: TopicPartition, p: PartitionRegistration, target: tuple[NodeId, ...]) -> tuple[int, str]:
        """ReplicationControlManager.changePartitionReassignment: the target
        is validated as a manual assignment (registered brokers, no
        duplicates, one active broker at least), then the replica list
        becomes the union of the current list and the target, with adding
        and removing recorded (PartitionReassignmentReplicas). The builder
        completes it in the same record when the ISR already holds the
        whole target (a reorder or a pure removal)."""
        bad = self.replication.check_assignment(target, len(target), tp.partition)
        if bad:
            return Errors.INVALID_REPLICA_ASSIGNMENT, bad
        replicas, adding, removing = reassignment_replicas(p.replicas, target)
        b = self.w.builder(tp, f"reassignment to {list(target)}")
        if replicas != p.replicas:
            b.set_target_replicas(replicas)
        b.set_target_adding(adding).set_target_removing(removing)
        self.replication.commit_change(b)
        return Errors.NONE, ""

    def _cancel(self, tp: TopicPartition, p: PartitionRegistration) -> tuple[int, str]:
        """ReplicationControlManager.cancelPartitionReassignment: only a
        partition being reassigned, back to its original replicas
        (PartitionReassignmentRevert); a revert that needs an unclean
        election is refused unless the topic allows one."""
        work = self.w.work
        assert work is not None
        if not p.is_reassigning:
            return Errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
        replicas, isr, unclean = revert_reassignment(p)
        if unclean and not self.w.config.unclean_allowed(work.topics.get(tp.topic, {})):
            return Errors.INVALID_REPLICA_ASSIGNMENT, (
                f"Unable to revert partition assignment for {tp.topic}:{tp.partition} because it would "
                "require an unclean leader election.")
        b = self.w.builder(tp, "reassignment cancelled" + (" (unclean: no original replica in the ISR)" if unclean else ""))
        b.set_target_isr(isr).set_target_replicas(replicas).set_target_adding(()).set_target_removing(())
        if unclean:
            b.set_recovery_state(RECOVERING)  # the leader recovers alone, as after an unclean election
        self.replication.commit_change(b)
        return Errors.NONE, ""

    def list(self, req: ListPartitionReassignmentsRequest, src: NodeId | None) -> list[Effect]:
        """ListPartitionReassignments (KIP-455): every partition being
        reassigned (or those asked for that are), as the committed image has
        them (Kafka reads it at the last committed offset): its replica list,
        adding and removing replicas."""
        if self.w.work is None:
            return [addressed(src, ListPartitionReassignmentsResponse(req.ref, Errors.NOT_CONTROLLER))]
        image = self.w.image
        tps = sorted(image.partitions) if req.tps is None else list(req.tps)
        ongoing = []
        for tp in tps:
            p = image.partitions.get(tp)
            if p is not None and p.is_reassigning:
                ongoing.append(OngoingReassignment(tp, p.replicas, p.adding_replicas, p.removing_replicas))
        return [addressed(src, ListPartitionReassignmentsResponse(req.ref, Errors.NONE, tuple(ongoing)))]
