"""The core's view of the group APIs a consumer group uses.

Kafka's wire schemas (``clients/src/main/resources/common/message``:
FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch) carry more than the coordinator reads; these dataclasses hold
what it does read. The wire layer (``server/wire_groups.py``) fills them from
kafka-python's decoded requests and builds the responses back. They never
travel between nodes: a group request is answered by the broker it reaches
(NOT_COORDINATOR sends the client elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..messages import TopicPartition


class GroupErrors:
    """Kafka's error codes of the group APIs (``org.apache.kafka.common.protocol.Errors``)."""

    COORDINATOR_LOAD_IN_PROGRESS: Final = 14
    COORDINATOR_NOT_AVAILABLE: Final = 15
    NOT_COORDINATOR: Final = 16
    ILLEGAL_GENERATION: Final = 22
    INCONSISTENT_GROUP_PROTOCOL: Final = 23
    INVALID_GROUP_ID: Final = 24
    UNKNOWN_MEMBER_ID: Final = 25
    INVALID_SESSION_TIMEOUT: Final = 26
    REBALANCE_IN_PROGRESS: Final = 27
    INVALID_COMMIT_OFFSET_SIZE: Final = 28
    UNKNOWN_SERVER_ERROR: Final = -1
    MEMBER_ID_REQUIRED: Final = 79
    GROUP_MAX_SIZE_REACHED: Final = 81
    FENCED_INSTANCE_ID: Final = 82
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53


#: FindCoordinator key types (Kafka's CoordinatorType)
KEY_TYPE_GROUP: Final = 0
KEY_TYPE_TRANSACTION: Final = 1


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequest:
    ref: Any
    keys: tuple[str, ...]
    key_type: int = KEY_TYPE_GROUP


@dataclass(frozen=True, slots=True)
class Coordinator:
    key: str
    error: int
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True, slots=True)
class FindCoordinatorResponse:
    ref: Any
    coordinators: tuple[Coordinator, ...]


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    ref: Any
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    protocol_type: str
    #: (name, metadata) in the member's order of preference
    protocols: tuple[tuple[str, bytes], ...]
    client_id: str = ""
    #: JoinGroup v4+: a member without an id is given one and asked to join again (KIP-394)
    require_known_member_id: bool = True
    #: JoinGroup v5+: the static member's ``group.instance.id`` (KIP-345), else None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    metadata: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    ref: Any
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    #: the leader's answer lists every member and its subscription; the others' is empty
    members: tuple[JoinedMember, ...] = ()
    #: JoinGroup v9 (KIP-814): the leader need not assign (a static leader
    #: rejoined a Stable group, whose assignment stands)
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    ref: Any
    group_id: str
    generation_id: int
    member_id: str
    #: the leader's assignment: (member id, assignment bytes)
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    ref: Any
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    ref: Any
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    ref: Any
    error: int


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    ref: Any
    group_id: str
    member_ids: tuple[str, ...]
    #: LeaveGroup v3+: each member's group.instance.id (None for a dynamic one)
    instance_ids: tuple[str | None, ...] = ()


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    ref: Any
    error: int
    #: per member (LeaveGroup v3+ answers each member of a batch)
    members: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    tp: TopicPartition
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class StoredMember:
    """One member as a group-metadata record keeps it (Kafka's
    ``GroupMetadataValue.MemberMetadata``): the subscription is its metadata
    for the group's selected protocol only."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    """A group as its group-metadata record keeps it (Kafka's
    ``GroupMetadataValue``): the generation, its protocol and leader, and
    its members with their assignments; no members for an Empty group."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: tuple[StoredMember, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    ref: Any
    group_id: str
    generation_id: int
    member_id: str
    offsets: tuple[CommittedOffset, ...]
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    ref: Any
    results: tuple[tuple[TopicPartition, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    ref: Any
    group_id: str
    #: None: every partition the group has committed
    tps: tuple[TopicPartition, ...] | None


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    tp: TopicPartition
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    error: int = 0


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    ref: Any
    error: int
    offsets: tuple[FetchedOffset, ...] = ()


GROUP_REQUESTS: Final = (
    FindCoordinatorRequest, JoinGroupRequest, SyncGroupRequest, HeartbeatRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetFetchRequest,
)


def error_response(msg: Any, error: int) -> Any:
    """The response to a group request carrying ``error`` alone (a request
    timed out, the coordinator moved)."""
    t = type(msg)
    if t is FindCoordinatorRequest:
        return FindCoordinatorResponse(msg.ref, tuple(Coordinator(k, error) for k in msg.keys))
    if t is JoinGroupRequest:
        return JoinGroupResponse(msg.ref, error, member_id=msg.member_id)
    if t is SyncGroupRequest:
        return SyncGroupResponse(msg.ref, error)
    if t is HeartbeatRequest:
        return HeartbeatResponse(msg.ref, error)
    if t is LeaveGroupRequest:
        return LeaveGroupResponse(msg.ref, error, tuple((mid, error) for mid in msg.member_ids))
    if t is OffsetCommitRequest:
        return OffsetCommitResponse(msg.ref, tuple((o.tp, error) for o in msg.offsets))
    if t is OffsetFetchRequest:
        return OffsetFetchResponse(msg.ref, error)
    return None
