"""The group APIs on the wire: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch, on kafka-python's
codecs (generated from Kafka's JSON schemas), translated to and from the
core's :mod:`reference_impl.core.groups.messages`.

Versions (Kafka's ``clients/src/main/resources/common/message`` schemas):
FindCoordinator 0-4 (v4 batches keys), JoinGroup 0-9, SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-5 (v3 batches members), OffsetCommit 2-9
(v10 names topics by id), OffsetFetch 1-7 (v8 batches groups). This is the
classic group protocol; KIP-848's ConsumerGroupHeartbeat is not offered, so
a client asking ``group.protocol=consumer`` is told the broker lacks it.
``group_instance_id`` (static membership, KIP-345) is read from JoinGroup
v5+, SyncGroup and Heartbeat v3+, LeaveGroup v3+ members and OffsetCommit
v7+, and echoed in JoinGroup's and LeaveGroup's member lists.
"""

from __future__ import annotations

from typing import Any, Callable

from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from reference_impl.core.groups import messages as gm
from reference_impl.core.messages import TopicPartition

from .wire_base import Decoded, Pending, ProtocolError, require_array, require_name

APIS: dict[int, tuple[Any, Any, int, int]] = {
    8: (OffsetCommitRequest, OffsetCommitResponse, 2, 9),
    9: (OffsetFetchRequest, OffsetFetchResponse, 1, 7),
    10: (FindCoordinatorRequest, FindCoordinatorResponse, 0, 4),
    11: (JoinGroupRequest, JoinGroupResponse, 0, 9),
    12: (HeartbeatRequest, HeartbeatResponse, 0, 4),
    13: (LeaveGroupRequest, LeaveGroupResponse, 0, 5),
    14: (SyncGroupRequest, SyncGroupResponse, 0, 5),
}

Ref = Callable[[int], Any]


def _one(d: Decoded, msg: Any, build: Callable[[Pending], Any]) -> Pending:
    p = Pending(d, total=1, build=build)
    p.parts.append((0, msg))
    return p


def _group_id(x: Any) -> str:
    if not isinstance(x, str):
        raise ProtocolError("missing group id")
    return x


def _find_coordinator(d: Decoded, ref: Ref) -> Pending:
    b = d.body
    keys = tuple(require_array(b.coordinator_keys)) if d.api_version >= 4 else (b.key,)
    if any(not isinstance(k, str) for k in keys):
        raise ProtocolError("missing coordinator key")
    key_type = b.key_type if d.api_version >= 1 else gm.KEY_TYPE_GROUP
    return _one(d, gm.FindCoordinatorRequest(ref(0), keys, key_type), _build_find_coordinator)


def _build_find_coordinator(p: Pending) -> Any:
    r: gm.FindCoordinatorResponse = p.results[0]
    v = p.decoded.api_version
    R = FindCoordinatorResponse[v]
    if v >= 4:
        return R(throttle_time_ms=0, coordinators=[
            R.Coordinator(key=c.key, node_id=c.node_id, host=c.host, port=c.port, error_code=c.error,
                          error_message=None) for c in r.coordinators])
    c = r.coordinators[0]
    return R(throttle_time_ms=0, error_code=c.error, error_message=None, node_id=c.node_id, host=c.host, port=c.port)


def _instance(b: Any, v: int, since: int) -> str | None:
    """The request's group.instance.id from version ``since`` on, else None."""
    x = getattr(b, "group_instance_id", None) if v >= since else None
    return x if isinstance(x, str) else None


def _join_group(d: Decoded, ref: Ref) -> Pending:
    b = d.body
    v = d.api_version
    protocols = tuple((require_name(x.name), bytes(x.metadata or b"")) for x in require_array(b.protocols))
    msg = gm.JoinGroupRequest(
        ref(0), _group_id(b.group_id), b.session_timeout_ms,
        b.rebalance_timeout_ms if v >= 1 else b.session_timeout_ms,
        b.member_id or "", b.protocol_type or "", protocols, d.client_id or "",
        require_known_member_id=v >= 4, group_instance_id=_instance(b, v, 5))
    return _one(d, msg, _build_join_group)


def _build_join_group(p: Pending) -> Any:
    r: gm.JoinGroupResponse = p.results[0]
    v = p.decoded.api_version
    R = JoinGroupResponse[v]
    members = [R.JoinGroupResponseMember(member_id=x.member_id, group_instance_id=x.group_instance_id,
                                         metadata=x.metadata)
               for x in r.members]
    return R(throttle_time_ms=0, error_code=r.error, generation_id=r.generation_id, protocol_type=r.protocol_type,
             protocol_name=r.protocol_name if v >= 7 else (r.protocol_name or ""), leader=r.leader,
             skip_assignment=r.skip_assignment and v >= 9, member_id=r.member_id, members=members)


def _sync_group(d: Decoded, ref: Ref) -> Pending:
    b = d.body
    given = tuple((a.member_id, bytes(a.assignment or b"")) for a in require_array(b.assignments))
    msg = gm.SyncGroupRequest(ref(0), _group_id(b.group_id), b.generation_id, b.member_id or "", given,
                              _instance(b, d.api_version, 3))
    return _one(d, msg, _build_sync_group)


def _build_sync_group(p: Pending) -> Any:
    r: gm.SyncGroupResponse = p.results[0]
    R = SyncGroupResponse[p.decoded.api_version]
    return R(throttle_time_ms=0, error_code=r.error, protocol_type=r.protocol_type, protocol_name=r.protocol_name,
             assignment=r.assignment)


def _heartbeat(d: Decoded, ref: Ref) -> Pending:
    b = d.body
    msg = gm.HeartbeatRequest(ref(0), _group_id(b.group_id), b.generation_id, b.member_id or "",
                              _instance(b, d.api_version, 3))
    return _one(d, msg, lambda p: HeartbeatResponse[p.decoded.api_version](
        throttle_time_ms=0, error_code=p.results[0].error))


def _leave_group(d: Decoded, ref: Ref) -> Pending:
    b = d.body
    if d.api_version >= 3:
        members = list(require_array(b.members))
        ids = tuple(m.member_id or "" for m in members)
        insts = tuple(_instance(m, 3, 3) for m in members)
    else:
        ids, insts = (b.member_id or "",), ()
    return _one(d, gm.LeaveGroupRequest(ref(0), _group_id(b.group_id), ids, insts), _build_leave_group)


def _build_leave_group(p: Pending) -> Any:
    r: gm.LeaveGroupResponse = p.results[0]
    R = LeaveGroupResponse[p.decoded.api_version]
    req: gm.LeaveGroupRequest = p.parts[0][1]
    insts = list(req.instance_ids) + [None] * (len(r.members) - len(req.instance_ids))
    members = [R.MemberResponse(member_id=mid, group_instance_id=inst, error_code=err)
               for (mid, err), inst in zip(r.members, insts)]
    error = r.error
    if p.decoded.api_version < 3 and not error and r.members:
        error = r.members[0][1]  # one member: its error is the response's
    return R(throttle_time_ms=0, error_code=error, members=members)


def _offset_commit(d: Decoded, ref: Ref) -> Pending:
    b = d.body
    offsets = tuple(
        gm.CommittedOffset(TopicPartition(require_name(t.name), x.partition_index), x.committed_offset,
                           x.committed_leader_epoch if d.api_version >= 6 else -1, x.committed_metadata or "")
        for t in require_array(b.topics) for x in require_array(t.partitions))
    msg = gm.OffsetCommitRequest(ref(0), _group_id(b.group_id), b.generation_id_or_member_epoch, b.member_id or "",
                                 offsets, _instance(b, d.api_version, 7))
    return _one(d, msg, _build_offset_commit)


def _by_topic(pairs: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for tp, x in pairs:
        out.setdefault(tp.topic, []).append(x)
    return out


def _build_offset_commit(p: Pending) -> Any:
    r: gm.OffsetCommitResponse = p.results[0]
    R = OffsetCommitResponse[p.decoded.api_version]
    T = R.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    by_topic = _by_topic((tp, P(partition_index=tp.partition, error_code=err)) for tp, err in r.results)
    return R(throttle_time_ms=0, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


def _offset_fetch(d: Decoded, ref: Ref) -> Pending:
    b = d.body
    tps = None
    if b.topics is not None:
        tps = tuple(TopicPartition(require_name(t.name), i) for t in b.topics for i in require_array(t.partition_indexes))
    return _one(d, gm.OffsetFetchRequest(ref(0), _group_id(b.group_id), tps), _build_offset_fetch)


def _build_offset_fetch(p: Pending) -> Any:
    r: gm.OffsetFetchResponse = p.results[0]
    R = OffsetFetchResponse[p.decoded.api_version]
    T = R.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    by_topic = _by_topic((o.tp, P(partition_index=o.tp.partition, committed_offset=o.offset,
                                  committed_leader_epoch=o.leader_epoch, metadata=o.metadata, error_code=o.error))
                         for o in r.offsets)
    if r.error and p.decoded.api_version < 2:
        # before v2 the error is per partition only
        by_topic = {t: [P(partition_index=x.partition_index, committed_offset=-1, committed_leader_epoch=-1,
                          metadata="", error_code=r.error) for x in ps] for t, ps in by_topic.items()}
    return R(throttle_time_ms=0, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()], error_code=r.error)


TRANSLATORS: dict[int, Callable[[Decoded, Ref], Pending]] = {
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _join_group,
    12: _heartbeat,
    13: _leave_group,
    14: _sync_group,
}

