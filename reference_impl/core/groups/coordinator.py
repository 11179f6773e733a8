"""The group coordinator of one broker, sans-IO.

A broker coordinates the groups whose ``__consumer_offsets`` partition it
leads (Kafka's GroupCoordinator): FindCoordinator on any broker names that
partition's leader, and a group request reaching another broker is answered
NOT_COORDINATOR, which sends the client to look again. The first
FindCoordinator on a cluster without the topic asks the controller to create
it (``offsets.topic.num.partitions``, ``offsets.topic.replication.factor``)
and answers COORDINATOR_NOT_AVAILABLE until it has a leader.

Offsets are durable the way Kafka makes them durable: an OffsetCommit is an
acks=all append of :mod:`.offsets_log` records to the group's partition,
answered when the high watermark passes it, and only then visible to
OffsetFetch. When this broker becomes leader of an offsets partition it
rebuilds the committed offsets of that partition's groups from its log;
when it stops leading one, those groups' members are sent elsewhere.

Group membership is durable the same way: a group's metadata record
(generation, leader, members, assignments, :mod:`.offsets_log`) is an
acks=all append through the same path when the leader's SyncGroup completes
a rebalance (the SyncGroups are answered once it is appended), when a
restarted static member takes its place (its JoinGroup likewise) and when a
group becomes Empty. A broker that becomes leader of an offsets partition
rebuilds its groups from the last record of each: the members keep their
generation and assignments and go on heartbeating, a member that never
comes back is dropped by its session timeout, and a static member that
restarts gets its assignment back without a rebalance, as on the old
coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from ..effects import Effect, Reply, TraceEvent
from ..messages import (
    NO_LEADER,
    CreateTopicsRequest,
    CreateTopicsResponse,
    Errors,
    NewTopic,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from . import group as g
from .messages import (
    Coordinator,
    FetchedOffset,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupErrors as E,
    HeartbeatRequest,
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
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    CommittedOffset,
    StoredGroup,
    error_response,
)
from .offsets_log import OFFSETS_TOPIC, commit_batch, decode_log, group_batch, partition_for

if TYPE_CHECKING:
    from ..replica_manager import BrokerRole

#: Kafka's offsets.commit.timeout.ms
OFFSETS_COMMIT_TIMEOUT_MS: Final = 5000
#: how often a broker asks the controller for the offsets topic while it is missing
CREATE_RETRY_MS: Final = 1000


@dataclass(frozen=True, slots=True)
class CommitWrite:
    """The ref of the append an OffsetCommit makes (answered to the coordinator, not a client)."""

    token: int


@dataclass(frozen=True, slots=True)
class GroupWrite:
    """The ref of the append of a group's metadata record."""

    token: int


@dataclass(frozen=True, slots=True)
class CreateOffsetsTopic:
    """The ref of the coordinator's CreateTopics for ``__consumer_offsets``."""


def _commit_error(produce_error: int) -> int:
    """Kafka's mapping of a failed append to an OffsetCommit error."""
    if produce_error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION):
        return E.NOT_COORDINATOR
    if produce_error in (Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                         Errors.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if produce_error == Errors.MESSAGE_TOO_LARGE:
        return E.INVALID_COMMIT_OFFSET_SIZE
    return E.UNKNOWN_SERVER_ERROR


def _store_error(produce_error: int) -> int:
    """Kafka's mapping of a failed group-metadata append to a JoinGroup or
    SyncGroup error (appendGroupMetadataErrorToResponseError): as for a
    commit, except that a record too large is the server's own error."""
    if produce_error == Errors.MESSAGE_TOO_LARGE:
        return E.UNKNOWN_SERVER_ERROR
    return _commit_error(produce_error)


class GroupCoordinator:
    def __init__(self, broker: "BrokerRole") -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions = cfg.offsets_topic_num_partitions
        self.replication_factor = cfg.offsets_topic_replication_factor
        self.initial_delay_ms = cfg.group_initial_rebalance_delay_ms
        self.min_session_ms = cfg.group_min_session_timeout_ms
        self.max_session_ms = cfg.group_max_session_timeout_ms
        self.groups: dict[str, g.ClassicGroup] = {}
        #: group -> partition -> committed offset (only what the HW has passed)
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        #: offsets partitions this broker leads (and has loaded)
        self.led: set[int] = set()
        #: commit token -> (request, offsets being written)
        self.writes: dict[int, OffsetCommitRequest] = {}
        #: group-metadata token -> (the group, what its append completes)
        self.group_writes: dict[int, tuple[g.ClassicGroup, g.Store]] = {}
        self._tokens = 0
        self._create_sent_at: int | None = None

    # -- routing ---------------------------------------------------------------

    def handle(self, msg: Any, now: int, mono: int) -> list[Effect]:
        t = type(msg)
        if t is FindCoordinatorRequest:
            return self.find_coordinator(msg, now)
        if t is OffsetCommitRequest:
            return self.commit(msg, now, mono)
        err = self._not_here(msg.group_id)
        if err:
            return [Reply(error_response(msg, err))]
        if t is OffsetFetchRequest:
            return [Reply(self.fetch_offsets(msg))]
        grp = self._group(msg.group_id)
        if t is JoinGroupRequest:
            bad = self._bad_session_timeout(msg)
            if bad:
                return [Reply(JoinGroupResponse(msg.ref, bad, member_id=msg.member_id))]
            answers = grp.join(msg, self._new_member_id(msg.client_id), mono)
        elif t is SyncGroupRequest:
            answers = grp.sync(msg, mono)
        elif t is HeartbeatRequest:
            answers = grp.heartbeat(msg.ref, msg.member_id, msg.generation_id, mono, msg.group_instance_id)
        else:
            results, answers = grp.leave(msg.member_ids, mono, msg.instance_ids)
            answers.insert(0, (msg.ref, LeaveGroupResponse(msg.ref, 0, tuple(results))))
        return self._answers(grp, answers, now)

    def _answers(self, grp: g.ClassicGroup, answers: list[g.Answer], now: int) -> list[Effect]:
        """The group's answers as replies, then the appends of the metadata
        records it asked for (whose own answers may follow at once)."""
        out: list[Effect] = [Reply(resp) for _, resp in answers]
        for _, resp in answers:
            if type(resp) is JoinGroupResponse and resp.error == 0 and resp.member_id == resp.leader:
                out.append(TraceEvent("group_generation", {
                    "group": grp.group_id, "generation": resp.generation_id, "members": len(grp.members),
                    "protocol": resp.protocol_name}))
        at = grp.next_deadline()
        if at is not None:
            self.broker.note_deadline(at + self.broker.skew)
        while grp.stores:
            out += self._store(grp, grp.stores.pop(0), now)
        return out

    def _store(self, grp: g.ClassicGroup, store: g.Store, now: int) -> list[Effect]:
        """Append the group's metadata record acks=all, as a commit is
        appended (Kafka's storeGroup); ``intercept`` completes it."""
        self._tokens += 1
        self.group_writes[self._tokens] = (grp, store)
        count, payload = group_batch(grp.group_id, replace(store.value, state_timestamp=now), now)
        tp = TopicPartition(OFFSETS_TOPIC, partition_for(grp.group_id, self._partitions()))
        return self.broker.handle_produce(
            ProduceRequest(GroupWrite(self._tokens), tp, -1, count, payload, OFFSETS_COMMIT_TIMEOUT_MS,
                           max_timestamp=now), now)

    def _bad_session_timeout(self, msg: JoinGroupRequest) -> int:
        """group.min/max.session.timeout.ms bound a member's session."""
        if not self.min_session_ms <= msg.session_timeout_ms <= self.max_session_ms:
            return E.INVALID_SESSION_TIMEOUT
        return 0

    def _new_member_id(self, client_id: str) -> str:
        """Kafka's ``clientId-UUID``; the UUID from the node's seeded rng."""
        return f"{client_id or 'member'}-{self.broker.rng.getrandbits(64):016x}"

    def _group(self, group_id: str) -> g.ClassicGroup:
        grp = self.groups.get(group_id)
        if grp is None:
            grp = self.groups[group_id] = g.ClassicGroup(group_id, self.initial_delay_ms)
        return grp

    def _partitions(self) -> int:
        return len(self.broker.image.topic_partitions(OFFSETS_TOPIC)) or self.num_partitions

    def _not_here(self, group_id: str) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        if partition_for(group_id, self._partitions()) not in self.led:
            return E.NOT_COORDINATOR
        return 0

    # -- FindCoordinator -------------------------------------------------------------

    def find_coordinator(self, msg: FindCoordinatorRequest, now: int) -> list[Effect]:
        img = self.broker.image
        effects: list[Effect] = []
        found = []
        for key in msg.keys:
            if msg.key_type == KEY_TYPE_TRANSACTION:
                # the reference implementation has no transaction coordinator:
                # it refuses a transactional id as Kafka refuses one it will
                # not serve (KafkaApis.getCoordinator), and as its own
                # InitProducerId does, so a client fails at once, not after
                # retrying an unavailable coordinator until its timeout
                found.append(Coordinator(key, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                continue
            if msg.key_type != KEY_TYPE_GROUP:
                found.append(Coordinator(key, E.COORDINATOR_NOT_AVAILABLE))
                continue
            if OFFSETS_TOPIC not in img.topics:
                effects += self._create_offsets_topic(now)
                found.append(Coordinator(key, E.COORDINATOR_NOT_AVAILABLE))
                continue
            tp = TopicPartition(OFFSETS_TOPIC, partition_for(key, self._partitions()))
            reg = img.partitions.get(tp)
            b = img.brokers.get(reg.leader) if reg is not None and reg.leader != NO_LEADER else None
            if b is None or b.fenced:
                found.append(Coordinator(key, E.COORDINATOR_NOT_AVAILABLE))
            else:
                found.append(Coordinator(key, 0, b.endpoint.node_id, b.endpoint.host, b.endpoint.port))
        return effects + [Reply(FindCoordinatorResponse(msg.ref, tuple(found)))]

    def _create_offsets_topic(self, now: int) -> list[Effect]:
        if self._create_sent_at is not None and now - self._create_sent_at < CREATE_RETRY_MS:
            return []
        self._create_sent_at = now
        req = CreateTopicsRequest(
            CreateOffsetsTopic(), (NewTopic(OFFSETS_TOPIC, self.num_partitions, self.replication_factor),),
            timeout_ms=self.broker.config.request_timeout_ms, internal=True)
        return self.broker.forwarder.forward(self.broker, req, now)

    # -- offsets -----------------------------------------------------------------

    def commit(self, msg: OffsetCommitRequest, now: int, mono: int) -> list[Effect]:
        err = self._not_here(msg.group_id)
        grp = self.groups.get(msg.group_id)
        if not err:
            err = (grp or g.ClassicGroup(msg.group_id)).commit_error(msg.member_id, msg.generation_id,
                                                                     msg.group_instance_id)
        if err or not msg.offsets:
            return [Reply(OffsetCommitResponse(msg.ref, tuple((o.tp, err) for o in msg.offsets)))]
        if grp is not None and msg.member_id in grp.members:
            grp.members[msg.member_id].heard(mono)  # a commit counts as a heartbeat (Kafka)
        self._tokens += 1
        self.writes[self._tokens] = msg
        count, payload = commit_batch(msg.group_id, msg.offsets, now)
        tp = TopicPartition(OFFSETS_TOPIC, partition_for(msg.group_id, self._partitions()))
        return self.broker.handle_produce(
            ProduceRequest(CommitWrite(self._tokens), tp, -1, count, payload, OFFSETS_COMMIT_TIMEOUT_MS,
                           max_timestamp=now), now)

    def fetch_offsets(self, msg: OffsetFetchRequest) -> OffsetFetchResponse:
        mine = self.offsets.get(msg.group_id, {})
        tps = sorted(mine) if msg.tps is None else msg.tps
        out = []
        for tp in tps:
            c = mine.get(tp)
            out.append(FetchedOffset(tp, -1) if c is None else FetchedOffset(tp, c.offset, c.leader_epoch, c.metadata))
        return OffsetFetchResponse(msg.ref, 0, tuple(out))

    # -- answers from the broker ------------------------------------------------------

    @property
    def waiting(self) -> bool:
        return bool(self.writes) or bool(self.group_writes) or self._create_sent_at is not None

    def intercept(self, effects: list[Effect]) -> list[Effect]:
        """Take the broker's answers to this coordinator's own requests (its
        commit appends, its CreateTopics) out of ``effects`` and put the
        client answers they complete in their place."""
        out: list[Effect] = []
        for e in effects:
            if type(e) is Reply and type(e.msg) is ProduceResponse and type(e.msg.ref) is CommitWrite:
                out += self._commit_done(e.msg)
            elif type(e) is Reply and type(e.msg) is ProduceResponse and type(e.msg.ref) is GroupWrite:
                out += self.intercept(self._store_done(e.msg))  # its answers may start another append
            elif type(e) is Reply and type(e.msg) is CreateTopicsResponse and type(e.msg.ref) is CreateOffsetsTopic:
                self._create_sent_at = None
            else:
                out.append(e)
        return out

    def _commit_done(self, resp: ProduceResponse) -> list[Effect]:
        msg = self.writes.pop(resp.ref.token, None)
        if msg is None:
            return []
        err = 0 if resp.error == Errors.NONE else _commit_error(resp.error)
        if not err:
            mine = self.offsets.setdefault(msg.group_id, {})
            for o in msg.offsets:
                mine[o.tp] = o
        return [Reply(OffsetCommitResponse(msg.ref, tuple((o.tp, err) for o in msg.offsets)))]

    def _store_done(self, resp: ProduceResponse) -> list[Effect]:
        found = self.group_writes.pop(resp.ref.token, None)
        if found is None:
            return []
        grp, store = found
        err = 0 if resp.error == Errors.NONE else _store_error(resp.error)
        effects = self._answers(grp, grp.stored(store, err, self.broker.mono),
                               self.broker.mono + self.broker.skew)
        if store.kind != "empty":
            effects.append(TraceEvent("group_stored", {
                "group": grp.group_id, "generation": store.generation, "kind": store.kind, "error": err}))
        return effects

    # -- leadership and timers -------------------------------------------------------

    def sync_leadership(self) -> list[Effect]:
        """After metadata changed: load the offsets partitions this broker now
        leads; forget the groups of those it no longer leads."""
        now_led = {tp.partition for tp, p in self.broker.partitions.items()
                   if tp.topic == OFFSETS_TOPIC and p.is_leader}
        if now_led == self.led:
            return []
        effects: list[Effect] = []
        n = self._partitions()
        for k in sorted(self.led - now_led):
            for gid in [gid for gid in self.groups if partition_for(gid, n) == k]:
                grp = self.groups.pop(gid)
                effects += [Reply(resp) for resp in grp.parked_answers(E.NOT_COORDINATOR)]
            for gid in [gid for gid in self.offsets if partition_for(gid, n) == k]:
                del self.offsets[gid]
        for k in sorted(now_led - self.led):
            effects += self._load(k)
        self.led = now_led
        return effects

    def _load(self, k: int) -> list[Effect]:
        """Rebuild partition ``k``'s committed offsets and groups from the
        local log (Kafka's coordinator load): the last record of each key
        wins, a tombstone removes it, and each group is restored from its
        last metadata record with fresh member sessions."""
        p = self.broker.partitions[TopicPartition(OFFSETS_TOPIC, k)]
        batches = p.log.read(p.log.log_start_offset, p.log.leo, max_batches=1 << 30)
        n = 0
        stored: dict[str, StoredGroup | None] = {}
        for group, tp, value in decode_log(b.payload for b in batches):
            n += 1
            if tp is None:
                stored[group] = value
                continue
            mine = self.offsets.setdefault(group, {})
            if value is None:
                mine.pop(tp, None)
            else:
                mine[tp] = value
        mono = self.broker.mono
        groups = 0
        for gid, sg in stored.items():
            self.groups.pop(gid, None)
            if sg is not None:
                grp = self.groups[gid] = g.ClassicGroup.restore(gid, sg, self.initial_delay_ms, mono)
                groups += 1
                at = grp.next_deadline()
                if at is not None:
                    self.broker.note_deadline(at + self.broker.skew)
        return [TraceEvent("offsets_loaded", {"partition": k, "records": n, "groups": groups})]

    def tick(self, now: int, mono: int) -> list[Effect]:
        effects: list[Effect] = []
        for grp in list(self.groups.values()):
            at = grp.next_deadline()
            if at is not None and at <= mono:
                effects += self._answers(grp, grp.expire(mono), now)
        return effects

    def next_deadline(self) -> int | None:
        """The earliest group deadline, monotonic."""
        times = [at for grp in self.groups.values() if (at := grp.next_deadline()) is not None]
        return min(times) if times else None
