"""Topic configs on the active controller: Kafka's ConfigurationControlManager
(metadata/src/main/java/org/apache/kafka/controller/ConfigurationControlManager.java)
for IncrementalAlterConfigs, with QuorumController's follow-up of a min-ISR
change.

Only the two topic configs the reference implementation reads can be
altered; each resource is validated whole, then written as ``ConfigRecord``s
through the quorum and answered once they commit. A change of
min.insync.replicas (or of unclean.leader.election.enable) rebuilds every
partition of the topic: seed 002, "When updating the config
min.insync.replicas, if the new min ISR <= current ISR, the ELR will be
removed"; a leaderless partition may elect.
"""

from __future__ import annotations

from typing import Final

from ..effects import Effect
from ..messages import (
    CONFIG_DELETE,
    CONFIG_SET,
    RESOURCE_TOPIC,
    AlterConfigsResource,
    AlterConfigsResult,
    ConfigRecord,
    Errors,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    NodeId,
)
from .replication_control import ReplicationControlManager
from .writer import MetadataWriter, addressed

#: the topic configs the reference implementation reads (the rest of Kafka's are refused)
ALTERABLE_TOPIC_CONFIGS: Final = ("min.insync.replicas", "unclean.leader.election.enable")


class ConfigurationControlManager:
    def __init__(self, writer: MetadataWriter, replication: ReplicationControlManager) -> None:
        self.w = writer
        self.replication = replication

    def incremental_alter_configs(self, req: IncrementalAlterConfigsRequest, src: NodeId | None) -> list[Effect]:
        w = self.w
        if w.work is None:
            failed = tuple(AlterConfigsResult(r.resource_type, r.name, Errors.NOT_CONTROLLER, "not the active controller")
                           for r in req.resources)
            return [addressed(src, IncrementalAlterConfigsResponse(req.ref, failed))]
        results: list[AlterConfigsResult] = []
        for res in req.resources:
            err, message = self._check_resource(res)
            if err == Errors.NONE and not req.validate_only:
                for op in res.ops:
                    w.write(ConfigRecord(res.name, op.name, op.value if op.op == CONFIG_SET else None))
                for tp in w.work.topic_partitions(res.name):
                    self.replication.commit_change(
                        w.builder(tp, f"topic config {', '.join(o.name for o in res.ops)} changed"))
            results.append(AlterConfigsResult(res.resource_type, res.name, err, message))
        failover = tuple(AlterConfigsResult(r.resource_type, r.name, Errors.NOT_CONTROLLER if r.error == Errors.NONE
                                            else r.error, r.message) for r in results)
        w.answer_after_commit(src, IncrementalAlterConfigsResponse(req.ref, tuple(results)),
                              IncrementalAlterConfigsResponse(req.ref, failover))
        return []

    def _check_resource(self, res: AlterConfigsResource) -> tuple[int, str]:
        """Why a resource's changes are refused (Kafka's error and words), or (NONE, "")."""
        work = self.w.work
        assert work is not None
        if res.resource_type != RESOURCE_TOPIC:
            return Errors.INVALID_REQUEST, "only topic configs can be altered in the reference implementation"
        if res.name not in work.topics:
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
