"""One consumer group under the classic rebalance protocol, sans-IO.

The states and transitions are Kafka's ``ClassicGroup`` (KIP-62 session and
rebalance timeouts, KIP-134 initial rebalance delay, KIP-394 member ids
required before joining):

* **Empty** – no members; offsets may still be committed by a simple
  consumer (generation -1, no member id).
* **PreparingRebalance** – a member joined, left, changed its subscription or
  timed out. Every known member must send JoinGroup again; the join
  completes when all have (or when the rebalance timeout ends, and whoever
  did not rejoin is removed). A group that was Empty waits
  ``group.initial.rebalance.delay.ms`` first, so a consumer group starting
  together forms one generation.
* **CompletingRebalance** – the generation is bumped, the leader has every
  member's subscription and computes the assignment; followers wait in
  SyncGroup for it.
* **Stable** – the leader's SyncGroup delivered the assignment.

Static membership (KIP-345, ``group.instance.id``): a member that names an
instance id joins without KIP-394's round trip and is remembered by it.
When that instance joins again without a member id (its process restarted)
it takes a new member id in place of the old one, keeps the old one's
assignment and, if the group is Stable and the protocol the group would
select is still the one it runs, gets them back at once: no rebalance, so a
restart within the session timeout moves no partition, even when the
member's subscription (its protocol metadata) changed (Kafka checks only the
protocol). The old member id is fenced: any request naming the
instance with another member id is answered FENCED_INSTANCE_ID. A static
member that stops leaves by its session timeout (its client does not send
LeaveGroup on close), or by a LeaveGroup naming the instance.

Group metadata is durable the way Kafka makes it durable: when the
leader's SyncGroup completes a rebalance, when a group becomes Empty and
when a restarted static member takes its place in a Stable group, the group
asks for its metadata record to be written (``stores``, drained by the
coordinator, which appends it acks=all and reports back with ``stored``).
The leader's SyncGroup and the followers' parked ones are answered, and the
group becomes Stable, only once the record is appended; a failed append
answers them all with the error and rebalances. A restarted static member's
JoinGroup is answered once its new member id is appended; a failed append
puts the old member id back. A new coordinator rebuilds the group from the
last record (``restore``): Stable with the recorded generation, leader,
members and assignments (each member with a fresh session), or Empty with
its generation.

Heartbeats keep a member alive for its ``session.timeout.ms``; in
PreparingRebalance they answer REBALANCE_IN_PROGRESS, which is how a member
learns to rejoin. Times are the coordinator's monotonic milliseconds (Kafka
runs these timers on its system timer). Every operation returns
``(ref, response)`` pairs for the requests it answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from .messages import (
    GroupErrors as E,
    StoredGroup,
    StoredMember,
    HeartbeatResponse,
    JoinedMember,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

EMPTY: Final = "Empty"
PREPARING: Final = "PreparingRebalance"
COMPLETING: Final = "CompletingRebalance"
STABLE: Final = "Stable"

Answer = tuple[Any, Any]  # (request ref, response)


@dataclass
class Member:
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    #: monotonic ms after which the member is dead unless it was heard from
    expires_at: int = 0
    assignment: bytes = b""
    #: the member's JoinGroup parked until the join completes
    join_ref: Any = None
    sync_ref: Any = None
    #: group.instance.id of a static member (KIP-345), None for a dynamic one
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""

    def heard(self, mono: int) -> None:
        self.expires_at = mono + self.session_timeout_ms

    def metadata_for(self, protocol: str) -> bytes:
        return next(md for name, md in self.protocols if name == protocol)


@dataclass
class Store:
    """A group-metadata record the group needs appended (Kafka's storeGroup).

    ``kind`` says what completes when it is: ``sync`` (the leader's SyncGroup
    of ``generation``), ``empty`` (the group became Empty; nothing waits) or
    ``static`` (the JoinGroup ``ref`` of a restarted static member, whose new
    id ``new_id`` replaced ``old``)."""

    kind: str
    generation: int
    value: StoredGroup
    ref: Any = None
    old: Member | None = None
    new_id: str = ""
    #: the leader's assignment (``sync``)
    assignment: dict[str, bytes] = field(default_factory=dict)


@dataclass
class ClassicGroup:
    group_id: str
    initial_rebalance_delay_ms: int = 3000
    state: str = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: member ids handed out by MEMBER_ID_REQUIRED, each until its expiry (KIP-394)
    pending_members: dict[str, int] = field(default_factory=dict)
    #: the PreparingRebalance deadline: the join completes then, whoever rejoined
    join_deadline: int | None = None
    #: before this time a join does not complete early (the initial delay)
    delay_until: int = 0
    #: static members: group.instance.id -> its current member id (KIP-345)
    static_members: dict[str, str] = field(default_factory=dict)
    #: metadata records to append, taken by the coordinator
    stores: list[Store] = field(default_factory=list)
    #: the generation whose leader's assignment is being appended
    storing: int | None = None

    # -- join ------------------------------------------------------------------

    def join(self, req: JoinGroupRequest, new_member_id: str, mono: int) -> list[Answer]:
        """JoinGroup. ``new_member_id`` is the id a member without one gets."""
        if self.members and (req.protocol_type != self.protocol_type or not self._supports(req.protocols)):
            return [(req.ref, JoinGroupResponse(req.ref, E.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id))]
        mid = req.member_id
        inst = req.group_instance_id
        if inst is not None:
            known = self.static_members.get(inst)
            if not mid:
                if known is not None and known in self.members:
                    return self._replace_static(self.members[known], new_member_id, req, mono)
                mid = new_member_id  # a static member needs no MEMBER_ID_REQUIRED round trip (Kafka)
            elif known is not None and known != mid:
                return [(req.ref, JoinGroupResponse(req.ref, E.FENCED_INSTANCE_ID, member_id=mid))]
            elif mid not in self.members:
                return [(req.ref, JoinGroupResponse(req.ref, E.UNKNOWN_MEMBER_ID, member_id=mid))]
        elif not mid:
            if req.require_known_member_id:
                self.pending_members[new_member_id] = mono + req.session_timeout_ms
                return [(req.ref, JoinGroupResponse(req.ref, E.MEMBER_ID_REQUIRED, member_id=new_member_id))]
            mid = new_member_id
        elif mid not in self.members and self.pending_members.pop(mid, None) is None:
            return [(req.ref, JoinGroupResponse(req.ref, E.UNKNOWN_MEMBER_ID, member_id=mid))]
        out: list[Answer] = []
        m = self.members.get(mid)
        if m is None:
            m = Member(mid, req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type, req.protocols,
                       instance_id=inst, client_id=req.client_id)
            self.members[mid] = m
            if inst is not None:
                self.static_members[inst] = mid
            if self.protocol_type is None:
                self.protocol_type = req.protocol_type
        else:
            m.protocols = req.protocols
            m.session_timeout_ms = req.session_timeout_ms
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
            if m.join_ref is not None:  # a retried JoinGroup replaces the parked one
                out.append((m.join_ref, JoinGroupResponse(m.join_ref, E.UNKNOWN_MEMBER_ID, member_id=mid)))
        m.join_ref = req.ref
        m.heard(mono)
        if self.state != PREPARING:
            out += self._prepare_rebalance(mono)
        return out + self.try_complete_join(mono)

    def _replace_static(self, old: Member, new_id: str, req: JoinGroupRequest, mono: int) -> list[Answer]:
        """A known instance joined without a member id: its process restarted.
        The new member id takes the old one's place and assignment (with the
        protocols it sent now); the old id's parked requests are fenced.

        In a Stable group whose selected protocol would not change, the
        member gets its generation back without a rebalance (KIP-345),
        answered once the new member id is appended, whatever its
        subscription: Kafka compares only the protocol name, not the
        member's metadata (GroupMetadataManager
        .updateStaticMemberThenRebalanceOrCompleteJoin, group-coordinator
        module: lines 5124-5131 of trunk in October 2024, lines 8135-8141 of
        4.4.0's class file by its line table). A changed subscription is the
        member's own to act on (the consumer rejoins when its metadata
        changes). In CompletingRebalance the group rebalances (the leader
        may already have assigned to the old member id); in
        PreparingRebalance the join goes on."""
        out: list[Answer] = []
        old_id = old.member_id
        if old.join_ref is not None:
            out.append((old.join_ref, JoinGroupResponse(old.join_ref, E.FENCED_INSTANCE_ID, member_id=old_id)))
        if old.sync_ref is not None:
            out.append((old.sync_ref, SyncGroupResponse(old.sync_ref, E.FENCED_INSTANCE_ID)))
        del self.members[old_id]
        m = Member(new_id, req.session_timeout_ms, req.rebalance_timeout_ms, req.protocol_type, req.protocols,
                   assignment=old.assignment, instance_id=old.instance_id, client_id=req.client_id)
        self.members[new_id] = m
        self.static_members[req.group_instance_id] = new_id  # type: ignore[index]
        if self.leader == old_id:
            self.leader = new_id
        m.heard(mono)
        if self.state == STABLE and self._select_protocol() == (self.protocol_name or ""):
            assignment = {mid: x.assignment for mid, x in self.members.items()}
            self.stores.append(Store("static", self.generation_id, self.snapshot(assignment), req.ref, old, new_id))
            return out
        m.join_ref = req.ref
        if self.state != PREPARING:
            out += self._prepare_rebalance(mono)
        return out + self.try_complete_join(mono)

    def _supports(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """The member shares a protocol (an assignor) with every current member."""
        names = {n for n, _ in protocols}
        return all(names & {n for n, _ in m.protocols} for m in self.members.values())

    def _prepare_rebalance(self, mono: int) -> list[Answer]:
        out: list[Answer] = []
        if self.state == COMPLETING:
            # the assignment being computed is for a generation about to end
            for m in self.members.values():
                if m.sync_ref is not None:
                    out.append((m.sync_ref, SyncGroupResponse(m.sync_ref, E.REBALANCE_IN_PROGRESS)))
                    m.sync_ref = None
        if self.state == EMPTY:
            self.delay_until = mono + self.initial_rebalance_delay_ms
            self.join_deadline = self.delay_until
        else:
            self.delay_until = mono
            self.join_deadline = mono + max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.state = PREPARING
        return out

    def try_complete_join(self, mono: int, force: bool = False) -> list[Answer]:
        """Complete the join when every member has rejoined (and the initial
        delay is over), or at the deadline (``force``): members that did not
        rejoin are removed, the generation is bumped, the leader gets every
        subscription."""
        if self.state != PREPARING:
            return []
        waiting = any(m.join_ref is None for m in self.members.values()) or self.pending_members
        if not force and (waiting or mono < self.delay_until):
            return []
        for mid in [mid for mid, m in self.members.items() if m.join_ref is None]:
            del self.members[mid]
        self.join_deadline = None
        self.generation_id += 1
        if not self.members:
            self.state, self.leader, self.protocol_name = EMPTY, None, None
            self.stores.append(Store("empty", self.generation_id, self.snapshot({})))
            self.protocol_type = None
            return []
        self.state = COMPLETING
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.protocol_name = self._select_protocol()
        everyone = tuple(JoinedMember(mid, m.metadata_for(self.protocol_name), m.instance_id)
                         for mid, m in self.members.items())
        out: list[Answer] = []
        for mid, m in self.members.items():
            ref, m.join_ref = m.join_ref, None
            m.heard(mono)
            out.append((ref, JoinGroupResponse(
                ref, 0, self.generation_id, self.protocol_type, self.protocol_name, self.leader or "", mid,
                everyone if mid == self.leader else ())))
        return out

    def _select_protocol(self) -> str:
        """The protocol every member supports with the most votes, each member
        voting for its most preferred one of those (Kafka's selectProtocol)."""
        common = set.intersection(*({n for n, _ in m.protocols} for m in self.members.values()))
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        first_seen = [n for n, _ in next(iter(self.members.values())).protocols if n in common]
        return max(first_seen, key=lambda n: votes.get(n, 0))

    # -- sync, heartbeat, leave ---------------------------------------------------

    def sync(self, req: SyncGroupRequest, mono: int) -> list[Answer]:
        err = self._check_member(req.member_id, req.generation_id, req.group_instance_id)
        if err:
            return [(req.ref, SyncGroupResponse(req.ref, err))]
        if self.state == PREPARING:
            return [(req.ref, SyncGroupResponse(req.ref, E.REBALANCE_IN_PROGRESS))]
        m = self.members[req.member_id]
        m.heard(mono)
        if self.state == STABLE:
            return [(req.ref, self._assignment(req.ref, m))]
        m.sync_ref = req.ref
        if req.member_id != self.leader or self.storing == self.generation_id:
            return []
        # Kafka's storeGroup: the assignment is answered once its record is appended
        given = dict(req.assignments)
        assignment = {mid: given.get(mid, b"") for mid in self.members}
        self.storing = self.generation_id
        self.stores.append(Store("sync", self.generation_id, self.snapshot(assignment), assignment=assignment))
        return []

    # -- group metadata records ------------------------------------------------------

    def snapshot(self, assignment: dict[str, bytes]) -> StoredGroup:
        """The group's metadata record with these assignments (Kafka's
        newGroupMetadataRecord; the coordinator stamps the time)."""
        proto = self.protocol_name
        members = tuple(
            StoredMember(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                         m.session_timeout_ms, m.metadata_for(proto) if proto else b"", assignment.get(mid, b""))
            for mid, m in self.members.items()) if self.state != EMPTY else ()
        return StoredGroup(self.protocol_type or "", self.generation_id, proto, self.leader, -1, members)

    def stored(self, store: Store, error: int, mono: int) -> list[Answer]:
        """The append of ``store`` finished (``error`` 0: it is durable)."""
        if store.kind == "sync":
            return self._sync_stored(store, error, mono)
        if store.kind == "static":
            return self._static_stored(store, error, mono)
        return []  # an Empty group's record: nothing waits for it (Kafka only warns)

    def _sync_stored(self, store: Store, error: int, mono: int) -> list[Answer]:
        """Still completing the same generation: Stable with the assignment,
        or (the append failed) every parked SyncGroup gets the error and the
        group rebalances. Otherwise the rebalance that intervened answered them."""
        if self.storing == store.generation:
            self.storing = None
        if self.state != COMPLETING or self.generation_id != store.generation:
            return []
        out: list[Answer] = []
        for mid, member in self.members.items():
            member.assignment = store.assignment.get(mid, b"") if not error else b""
            if member.sync_ref is not None:
                resp = self._assignment(member.sync_ref, member) if not error else SyncGroupResponse(
                    member.sync_ref, error)
                out.append((member.sync_ref, resp))
                member.sync_ref = None
        if not error:
            self.state = STABLE
            return out
        out += self._prepare_rebalance(mono)
        return out + self.try_complete_join(mono)

    def _static_stored(self, store: Store, error: int, mono: int) -> list[Answer]:
        """The restarted static member's JoinGroup is answered: its generation
        back, or the error with its old member id restored (Kafka reverts)."""
        new_id, old, ref = store.new_id, store.old, store.ref
        m = self.members.get(new_id)
        if m is None or old is None:
            # gone meanwhile: replaced again by a newer restart of the
            # instance (fenced), or removed
            gone = E.FENCED_INSTANCE_ID if self._fenced(new_id, old.instance_id if old else None) else \
                E.UNKNOWN_MEMBER_ID
            return [(ref, JoinGroupResponse(ref, error or gone, member_id=new_id))]
        if error:
            del self.members[new_id]
            old.join_ref = old.sync_ref = None
            self.members[old.member_id] = old
            if old.instance_id is not None:
                self.static_members[old.instance_id] = old.member_id
            if self.leader == new_id:
                self.leader = old.member_id
            old.heard(mono)
            return [(ref, JoinGroupResponse(ref, error, self.generation_id, self.protocol_type, self.protocol_name,
                                            self.leader or ""))]
        leader = new_id == self.leader
        everyone = tuple(JoinedMember(i, x.metadata_for(self.protocol_name or ""), x.instance_id)
                         for i, x in self.members.items()) if leader else ()
        return [(ref, JoinGroupResponse(
            ref, 0, self.generation_id, self.protocol_type, self.protocol_name, self.leader or "", new_id,
            everyone, skip_assignment=leader))]

    @classmethod
    def restore(cls, group_id: str, sg: StoredGroup, initial_rebalance_delay_ms: int, mono: int) -> "ClassicGroup":
        """The group a new coordinator loads from its last metadata record
        (Kafka's ClassicGroup.fromRecord): Empty if it has no members, else
        Stable, each member with a fresh session so one that never comes
        back is dropped by its session timeout."""
        grp = cls(group_id, initial_rebalance_delay_ms, generation_id=sg.generation)
        if not sg.members:
            return grp
        grp.state, grp.protocol_type, grp.protocol_name, grp.leader = STABLE, sg.protocol_type, sg.protocol, sg.leader
        for sm in sg.members:
            m = Member(sm.member_id, sm.session_timeout_ms, sm.rebalance_timeout_ms, sg.protocol_type,
                       ((sg.protocol or "", sm.subscription),), assignment=sm.assignment,
                       instance_id=sm.group_instance_id, client_id=sm.client_id, client_host=sm.client_host)
            m.heard(mono)
            grp.members[sm.member_id] = m
            if sm.group_instance_id is not None:
                grp.static_members[sm.group_instance_id] = sm.member_id
        return grp

    def _assignment(self, ref: Any, m: Member) -> SyncGroupResponse:
        return SyncGroupResponse(ref, 0, self.protocol_type, self.protocol_name, m.assignment)

    def _check_member(self, member_id: str, generation_id: int, instance_id: str | None = None) -> int:
        if self._fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return E.ILLEGAL_GENERATION
        return 0

    def _fenced(self, member_id: str, instance_id: str | None) -> bool:
        """The request names a static instance now held by another member id
        (Kafka's isStaticMemberFenced)."""
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def heartbeat(self, ref: Any, member_id: str, generation_id: int, mono: int,
                  instance_id: str | None = None) -> list[Answer]:
        """A heartbeat keeps the member alive; in PreparingRebalance it says to rejoin."""
        err = self._check_member(member_id, generation_id, instance_id)
        if not err:
            self.members[member_id].heard(mono)
            if self.state == PREPARING:
                err = E.REBALANCE_IN_PROGRESS
        return [(ref, HeartbeatResponse(ref, err))]

    def leave(self, member_ids: tuple[str, ...], mono: int,
              instance_ids: tuple[str | None, ...] = ()) -> tuple[list[tuple[str, int]], list[Answer]]:
        """LeaveGroup: each known member is removed at once (no waiting for its
        session to end) and the group rebalances. A member named by its
        instance id is that instance's current member (any member id given
        must be it, else FENCED_INSTANCE_ID)."""
        results: list[tuple[str, int]] = []
        gone: list[str] = []
        for i, mid in enumerate(member_ids):
            inst = instance_ids[i] if i < len(instance_ids) else None
            if inst is not None:
                known = self.static_members.get(inst)
                if known is None or known not in self.members:
                    results.append((mid, E.UNKNOWN_MEMBER_ID))
                elif mid and mid != known:
                    results.append((mid, E.FENCED_INSTANCE_ID))
                else:
                    if known not in gone:
                        gone.append(known)
                    results.append((mid, 0))
                continue
            if self.pending_members.pop(mid, None) is not None:
                results.append((mid, 0))
            elif mid in self.members:
                gone.append(mid)
                results.append((mid, 0))
            else:
                results.append((mid, E.UNKNOWN_MEMBER_ID))
        return results, self.remove(gone, mono)

    def remove(self, member_ids: list[str], mono: int) -> list[Answer]:
        """Members gone (left or timed out): their parked requests are
        answered UNKNOWN_MEMBER_ID and the others rebalance."""
        if not member_ids:
            return self.try_complete_join(mono)
        out: list[Answer] = []
        for mid in member_ids:
            m = self.members.pop(mid)
            if m.instance_id is not None and self.static_members.get(m.instance_id) == mid:
                del self.static_members[m.instance_id]
            if m.join_ref is not None:
                out.append((m.join_ref, JoinGroupResponse(m.join_ref, E.UNKNOWN_MEMBER_ID, member_id=mid)))
            if m.sync_ref is not None:
                out.append((m.sync_ref, SyncGroupResponse(m.sync_ref, E.UNKNOWN_MEMBER_ID)))
        if self.state in (STABLE, COMPLETING):
            out += self._prepare_rebalance(mono)
        return out + self.try_complete_join(mono)

    # -- timers and offsets ---------------------------------------------------------

    def expire(self, mono: int) -> list[Answer]:
        """Session timeouts (a member parked in JoinGroup waits for the join
        deadline instead), expired pending ids, and the join deadline."""
        for mid in [mid for mid, at in self.pending_members.items() if at <= mono]:
            del self.pending_members[mid]
        dead = [mid for mid, m in self.members.items() if m.join_ref is None and m.expires_at <= mono]
        out = self.remove(dead, mono)
        if self.state == PREPARING and self.join_deadline is not None and mono >= self.join_deadline:
            out += self.try_complete_join(mono, force=True)
        return out

    def next_deadline(self) -> int | None:
        times = [m.expires_at for m in self.members.values() if m.join_ref is None]
        times += self.pending_members.values()
        if self.state == PREPARING and self.join_deadline is not None:
            times.append(self.join_deadline)
        return min(times) if times else None

    def commit_error(self, member_id: str, generation_id: int, instance_id: str | None = None) -> int:
        """May this member commit offsets now? (Kafka's validateOffsetCommit.)
        A simple consumer commits to an Empty group with generation -1; a
        member commits in its own generation, but not while the leader's
        assignment is being computed."""
        if generation_id < 0 and not member_id and self.state == EMPTY:
            return 0
        err = self._check_member(member_id, generation_id, instance_id)
        if err:
            return err
        return E.REBALANCE_IN_PROGRESS if self.state == COMPLETING else 0

    def parked_answers(self, error: int) -> list[Any]:
        """Every parked JoinGroup and SyncGroup answered with ``error`` (the
        coordinator moved away: the members look for the new one)."""
        out: list[Any] = []
        for mid, m in self.members.items():
            if m.join_ref is not None:
                out.append(JoinGroupResponse(m.join_ref, error, member_id=mid))
            if m.sync_ref is not None:
                out.append(SyncGroupResponse(m.sync_ref, error))
            m.join_ref = m.sync_ref = None
        return out
