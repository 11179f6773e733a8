"""PartitionChangeBuilder: from a partition's registration and a wanted change
to the one ``PartitionChangeRecord`` the controller appends.

Every controller-side change to a partition goes through here, so the rules
live in one place:

* **Leader election** (seed 001 §2.8, seed 002 "Delivery plan", seed 000
  "Unclean leader election & Eligible Leader Replicas"). The current leader
  stays if it is still in the ISR and active (registered, unfenced, not in
  controlled shutdown). Otherwise, in order:

  1. ``clean`` — the first active ISR member in assignment order;
  2. ``elr`` — (KIP-966 on, no active ISR member) the first active ELR member;
     it becomes the sole ISR member and leaves the ELR;
  3. ``last-known-leader`` — (KIP-966 on, unclean recovery off, no ISR and
     no ELR member left, not even a fenced one) the LastKnownLeader once it
     is active (seed 002 "Delivery plan": "elect the LastKnownLeader once it
     is unfenced"; seed 002: "the LastKnownLeader is preferred when ELR and
     ISR are both empty"). Before an unclean election, as Kafka's
     PartitionChangeBuilder.electAnyLeader orders them. The ISR becomes just
     that leader and the partition is ``RECOVERING``, as after an unclean
     election;
  4. ``unclean`` — only when allowed (topic ``unclean.leader.election.enable``
     or the ``unclean_election`` variant): the first active replica at all.
     The ISR becomes just that leader and the partition is ``RECOVERING``;
  5. otherwise no leader (``NO_LEADER``): the partition waits. While fenced
     ELR members exist (unclean election off) this waits for the first of
     them to be unfenced: the controller builds every leaderless partition
     again as each broker is unfenced, so the first ELR member to come back
     is the one elected.

* **LastKnownLeader** (seed 002, "The last known leader will be tracked"),
  only with KIP-966 on: a change that empties the ISR records the last ISR
  member (the leader) in ``last_known_leader``; any change that leaves the
  partition with a leader clears it. It is elected even when it restarted
  after an *unclean* shutdown (and so left the ELR for the LastKnownELR): the
  seed says "once it is unfenced" without exception. It was the last replica
  in the ISR, so it held every committed record when it was fenced, and no
  other replica can hold more (the HW cannot advance once the ISR is below
  min ISR). An unclean shutdown may have cost it the un-fsynced tail of its
  log — the fsync trade-off seed 002 discusses — but waiting instead would
  leave the partition without a leader for ever, with the same data on disk.

* **Unclean recovery** (seed 002, "Unclean recovery"), instead of step 3 when
  ``recovery_strategy`` is set (``unclean.recovery.manager.enabled``, KIP-966
  on). With no active ISR or ELR member:

  - some ISR/ELR member exists but is fenced: ``Aggressive`` recovers at
    once, ``Balanced`` and ``None`` wait for it to come back;
  - no ISR/ELR member at all: ``Aggressive`` recovers, ``Balanced`` recovers
    only once every LastKnownELR member is active (it must be heard from:
    it may hold the longest log), ``None`` waits for an operator.

  The builder cannot ask the replicas for their logs: it sets
  :attr:`PartitionChangeBuilder.needs_recovery` and the controller runs the
  GetReplicaLogInfo round, then builds again with
  :meth:`~PartitionChangeBuilder.set_recovery_leader` (the longest log). That
  election is ``recovery``: the ISR becomes the new leader alone and the
  partition is ``RECOVERING``, as after an unclean election.

* **ISR shrink by the controller** (§2.9.1): a fenced or shutting-down broker
  leaves the ISR. With KIP-966 off the ISR never becomes empty — the last
  member stays, leaderless, and is the only one that can lead again (§2.8).
  With KIP-966 on the ISR may empty.

* **ELR** (seed 002, "ELR update"), only with KIP-966 on, applied to the
  final ISR of the change:

  - ISR size >= effective min ISR (``min(min.insync.replicas, replicas)``):
    ELR and LastKnownELR are cleared;
  - otherwise ELR := (ELR ∪ current ISR) − new ISR − unclean-shutdown
    replicas. Only members of the ISR at the moment it fell below min ISR
    join, and the HW cannot advance below min ISR, so every ELR member holds
    the log up to the HW;
  - a member removed because it registered after an unclean shutdown moves to
    LastKnownELR (cleared again once the ISR reaches min ISR).

* **Reassignment** (KIP-455; Kafka's ReplicationControlManager
  ``changePartitionReassignment`` and ``PartitionReassignmentReplicas``): a
  reassignment sets the replica list to the union of the target and the
  replicas leaving (target order first), with ``adding_replicas`` (target
  minus current) and ``removing_replicas`` (current minus target). Every
  build first tries to complete it (``maybeCompleteReassignment``, as Kafka
  4.4 has it): once the ISR without the removing replicas is not empty and
  holds every adding replica (and every target replica, for a move that
  lowers the replication factor), the replica list becomes the target, the
  removing replicas leave the ISR and both lists are cleared, all in the
  same record; the election that follows then moves the leadership if the
  leader was removed. ELR and LastKnownELR keep only replicas of the final
  list (Kafka 4.4 does not filter them: a removed ISR member can enter its
  ELR, ``tests/core/test_partition_change.py``).

* **Epochs**: the record is applied with ``PartitionRegistration.merge``,
  which bumps the partition epoch on every change and the leader epoch on a
  leader change (seed 000). ELR-only changes keep the leader epoch.

With KIP-966 off (variant ``kip966=off`` or ``eligible.leader.replicas.enabled
= false``) ELR and LastKnownELR stay empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Final, Iterable

from .messages import NO_LEADER, NodeId, PartitionChangeRecord, TopicPartition
from .metadata import RECOVERED, RECOVERING, PartitionRegistration

CLEAN: Final = "clean"
ELR: Final = "elr"
UNCLEAN: Final = "unclean"
RECOVERY: Final = "recovery"
LAST_KNOWN_LEADER: Final = "last-known-leader"

AGGRESSIVE: Final = "Aggressive"
BALANCED: Final = "Balanced"
#: the strategy spelled "None" (not Python's None, which means: recovery off)
STRATEGY_NONE: Final = "None"


@dataclass(frozen=True, slots=True)
class PartitionChange:
    record: PartitionChangeRecord
    #: the election this change performs (None: the leader did not change to a new broker)
    election: str | None
    after: PartitionRegistration


@dataclass
class PartitionChangeBuilder:
    tp: TopicPartition
    current: PartitionRegistration
    #: registered, unfenced and not in controlled shutdown (seed 000: acceptable leader)
    is_active: Callable[[NodeId], bool]
    min_isr: int
    elr_enabled: bool
    unclean_allowed: bool
    reason: str = ""
    #: KIP-966 ``unclean.recovery.strategy`` when unclean recovery replaces the
    #: unclean election; None: recovery off (``unclean_allowed`` decides)
    recovery_strategy: str | None = None
    _target_isr: tuple[NodeId, ...] | None = None
    _target_replicas: tuple[NodeId, ...] | None = None
    _target_adding: tuple[NodeId, ...] | None = None
    _target_removing: tuple[NodeId, ...] | None = None
    #: the replica list this build ends with (set by :meth:`build`)
    _replicas: tuple[NodeId, ...] = ()
    #: brokers leaving the cluster (UnregisterBroker): out of ISR, ELR and LastKnownELR
    _unregistered: tuple[NodeId, ...] = ()
    _unclean_shutdown: set[NodeId] = field(default_factory=set)
    _recovery_state: int | None = None
    _recovery_leader: NodeId | None = None
    #: set by :meth:`build` (callers leave it False; a plain default rather
    #: than ``field(init=False)``, which the compiled build cannot take): the
    #: election rules call for an unclean recovery (ask the replicas for
    #: their logs) and no recovery leader was given
    needs_recovery: bool = False

    # -- what the caller wants ------------------------------------------------

    def set_target_isr(self, isr: Iterable[NodeId]) -> "PartitionChangeBuilder":
        self._target_isr = tuple(isr)
        return self

    def set_target_replicas(self, replicas: Iterable[NodeId]) -> "PartitionChangeBuilder":
        self._target_replicas = tuple(replicas)
        return self

    def set_target_adding(self, adding: Iterable[NodeId]) -> "PartitionChangeBuilder":
        self._target_adding = tuple(adding)
        return self

    def set_target_removing(self, removing: Iterable[NodeId]) -> "PartitionChangeBuilder":
        self._target_removing = tuple(removing)
        return self

    def remove_from_isr(self, broker: NodeId) -> "PartitionChangeBuilder":
        """The controller shrinks the ISR because ``broker`` was fenced or is
        shutting down (§2.9.1). Without ELR the last member stays (§2.8)."""
        base = self._target_isr if self._target_isr is not None else self.current.isr
        isr = tuple(r for r in base if r != broker)
        if not isr and not self.elr_enabled:
            isr = base
        self._target_isr = isr
        return self

    def remove_broker(self, broker: NodeId) -> "PartitionChangeBuilder":
        """``broker`` is being unregistered (KIP-631; Kafka's
        ReplicationControlManager.handleBrokerUnregistered): it leaves the ISR
        as a fenced broker does, the ELR and LastKnownELR too, and is no
        acceptable leader."""
        self._unregistered = (*self._unregistered, broker)
        active = self.is_active
        self.is_active = lambda r: r not in self._unregistered and active(r)
        return self.remove_from_isr(broker)

    def mark_unclean_shutdown(self, broker: NodeId) -> "PartitionChangeBuilder":
        """``broker`` registered after an unclean shutdown (KIP-966): it leaves
        the ISR and the ELR."""
        self._unclean_shutdown.add(broker)
        base = self._target_isr if self._target_isr is not None else self.current.isr
        self._target_isr = tuple(r for r in base if r != broker)
        return self

    def set_recovery_state(self, state: int) -> "PartitionChangeBuilder":
        self._recovery_state = state
        return self

    def set_recovery_leader(self, broker: NodeId) -> "PartitionChangeBuilder":
        """The replica an unclean recovery found to have the longest log. It
        is elected only if the rules still call for a recovery and it is
        still active; an ISR or ELR member that came back wins over it."""
        self._recovery_leader = broker
        return self

    @property
    def effective_min_isr(self) -> int:
        """KIP-966: ``min(min.insync.replicas, replication factor)``."""
        return max(1, min(self.min_isr, len(self.current.replicas)))

    # -- the decision --------------------------------------------------------

    def build(self) -> PartitionChange | None:
        cur = self.current
        isr = self._target_isr if self._target_isr is not None else cur.isr
        replicas = self._target_replicas if self._target_replicas is not None else cur.replicas
        adding = self._target_adding if self._target_adding is not None else cur.adding_replicas
        removing = self._target_removing if self._target_removing is not None else cur.removing_replicas
        completed = complete_reassignment(replicas, adding, removing, isr)
        if completed is not None:
            (replicas, isr), adding, removing = completed, (), ()
        self._replicas = tuple(replicas)
        elr = tuple(r for r in cur.elr if r in replicas and r not in self._unregistered) if self.elr_enabled else ()
        recovery = self._recovery_state if self._recovery_state is not None else cur.leader_recovery_state
        leader = cur.leader
        election: str | None = None

        if leader == NO_LEADER or leader not in isr or not self.is_active(leader):
            new_leader, election = self._elect(isr, elr)
            if election == ELR:
                isr = (new_leader,)
            elif election in (UNCLEAN, RECOVERY, LAST_KNOWN_LEADER):
                isr = (new_leader,)
                recovery = RECOVERING
            leader = new_leader

        new_elr, new_lkelr = self._update_elr(isr, election)
        new_lkl = self._update_last_known_leader(isr, leader)

        rec = PartitionChangeRecord(
            tp=self.tp,
            isr=None if tuple(isr) == tuple(cur.isr) else tuple(isr),
            leader=None if leader == cur.leader else leader,
            elr=None if new_elr == tuple(cur.elr) else new_elr,
            last_known_elr=None if new_lkelr == tuple(cur.last_known_elr) else new_lkelr,
            leader_recovery_state=None if recovery == cur.leader_recovery_state else recovery,
            reason=(f"{self.reason}; election:{election}" if election else self.reason),
            last_known_leader=None if new_lkl == cur.last_known_leader else new_lkl,
            replicas=None if tuple(replicas) == tuple(cur.replicas) else tuple(replicas),
            adding_replicas=None if tuple(adding) == tuple(cur.adding_replicas) else tuple(adding),
            removing_replicas=None if tuple(removing) == tuple(cur.removing_replicas) else tuple(removing),
        )
        if (
            rec.replicas is None
            and rec.adding_replicas is None
            and rec.removing_replicas is None
            and rec.isr is None
            and rec.leader is None
            and rec.elr is None
            and rec.last_known_elr is None
            and rec.leader_recovery_state is None
            and rec.last_known_leader is None
        ):
            return None
        return PartitionChange(rec, election if leader != NO_LEADER else None, cur.merge(rec))

    def _elect(self, isr: tuple[NodeId, ...], elr: tuple[NodeId, ...]) -> tuple[NodeId, str | None]:
        self.needs_recovery = False
        replicas = self._replicas
        for r in replicas:
            if r in isr and self.is_active(r):
                return r, CLEAN
        if self.elr_enabled:
            for r in replicas:
                if r in elr and r not in self._unclean_shutdown and r not in isr and self.is_active(r):
                    return r, ELR
        if self.recovery_strategy is not None:
            if not self._recovery_allowed(isr, elr):
                return NO_LEADER, None
            lead = self._recovery_leader
            if lead is not None and lead in replicas and self.is_active(lead):
                return lead, RECOVERY
            self.needs_recovery = True
            return NO_LEADER, None
        # Kafka's electAnyLeader tries the last known leader before an unclean
        # election (docs/architecture.md, "Election order")
        if self.elr_enabled and self._last_known_leader_electable(isr, elr):
            return self.current.last_known_leader, LAST_KNOWN_LEADER
        if self.unclean_allowed:
            for r in replicas:
                if self.is_active(r):
                    return r, UNCLEAN
        return NO_LEADER, None

    def _last_known_leader_electable(self, isr: tuple[NodeId, ...], elr: tuple[NodeId, ...]) -> bool:
        """Seed 002 "Delivery plan", unclean recovery off and unclean election
        off: "If there are no ELR members ... elect the LastKnownLeader once it
        is unfenced". No ISR member may remain, and no ELR member either —
        counting ISR members that leave in this very change (below min ISR
        they join the ELR) unless they registered after an unclean shutdown.
        An uncleanly restarted LastKnownLeader stays electable (module
        docstring: it is the best replica left)."""
        lkl = self.current.last_known_leader
        if lkl == NO_LEADER or lkl not in self._replicas or isr:
            return False
        elr_left = (set(elr) | set(self.current.isr)) - self._unclean_shutdown
        return not elr_left and self.is_active(lkl)

    def _update_last_known_leader(self, isr: tuple[NodeId, ...], leader: NodeId) -> NodeId:
        """Seed 002: "The controller will record the last ISR member (the
        leader) when it is fenced. It will be cleaned when a new leader is
        elected." Tracked only with KIP-966 on: without it the ISR never
        empties and its last member already is the one that may lead."""
        cur = self.current
        if leader != NO_LEADER:
            return NO_LEADER
        if self.elr_enabled and not isr and cur.isr:
            return cur.leader if cur.leader in cur.isr else cur.isr[0]
        return cur.last_known_leader

    def _recovery_allowed(self, isr: tuple[NodeId, ...], elr: tuple[NodeId, ...]) -> bool:
        """Seed 002, the election order under ``unclean.recovery.strategy``
        (reached only when no ISR or ELR member is active)."""
        if self.recovery_strategy == AGGRESSIVE:
            return True
        if self.recovery_strategy != BALANCED:
            return False  # "None": wait for an ISR/ELR member or an operator
        # Balanced waits for fenced ELR members. These include ISR members
        # leaving in this very change (they join the ELR below min ISR), and
        # any ISR member that stays but is not active (KIP-966 lets the ISR
        # empty, so that is only a transient state).
        cur = self.current
        waiting = (set(elr) | set(cur.elr) | set(cur.isr) | set(isr)) - self._unclean_shutdown
        if waiting:
            return False
        # no ELR member at all: recover once every LastKnownELR member is back
        # (including members this very change moves there after an unclean shutdown)
        lk = set(cur.last_known_elr) | {r for r in self._unclean_shutdown if r in cur.elr or r in cur.isr}
        return all(self.is_active(r) for r in lk)

    def _update_elr(self, isr: tuple[NodeId, ...], election: str | None) -> tuple[tuple[NodeId, ...], tuple[NodeId, ...]]:
        """Seed 002 "ELR update". After an unclean or last-known-leader
        election both ELR and LastKnownELR are emptied, as Kafka's
        PartitionChangeBuilder (maybeUpdateRecordElr) does for every unclean
        result: the new leader's log, not theirs, now defines what is
        committed, so an old ELR member is no longer known to hold it and must
        not win a later "clean" ELR election over it. An unclean *recovery*
        (which Kafka does not ship) keeps the seed's own rule: LastKnownELR is
        cleaned when the ISR reaches min ISR (seed 002, "ELR update")."""
        if not self.elr_enabled or election in (UNCLEAN, LAST_KNOWN_LEADER):
            return (), ()
        cur = self.current
        if len(isr) >= self.effective_min_isr:
            return (), ()
        candidates = (set(cur.elr) | set(cur.isr)) & set(self._replicas) - set(self._unregistered)
        order = self._replicas
        new_elr = tuple(r for r in order if r in candidates and r not in isr and r not in self._unclean_shutdown)
        dropped = {r for r in candidates if r in self._unclean_shutdown and r not in isr}
        lk = (set(cur.last_known_elr) | dropped) & set(self._replicas) - set(self._unregistered)
        new_lkelr = tuple(r for r in order if r in lk and r not in isr and r not in new_elr)
        return new_elr, new_lkelr


def reassignment_replicas(
    current: Iterable[NodeId], target: Iterable[NodeId]
) -> tuple[tuple[NodeId, ...], tuple[NodeId, ...], tuple[NodeId, ...]]:
    """KIP-455, Kafka's ``PartitionReassignmentReplicas(current, target)``:
    (replicas, adding, removing) where removing = current - target and
    adding = target - current (each in broker-id order, as Kafka's sorted
    sets give them) and replicas = target followed by removing."""
    cur, tgt = tuple(current), tuple(target)
    removing = tuple(sorted(set(cur) - set(tgt)))
    adding = tuple(sorted(set(tgt) - set(cur)))
    return tgt + removing, adding, removing


def complete_reassignment(
    replicas: Iterable[NodeId], adding: Iterable[NodeId], removing: Iterable[NodeId], isr: Iterable[NodeId]
) -> tuple[tuple[NodeId, ...], tuple[NodeId, ...]] | None:
    """Kafka 4.4's ``PartitionReassignmentReplicas.maybeCompleteReassignment``
    (kafka-metadata-4.4.0.jar, lines 99-132 by its class file's line table):
    with a reassignment in progress, the (replicas, ISR) it ends with once
    the ISR without the removing replicas is not empty and holds every
    replica being added, and, for a move that lowers the replication
    factor (fewer adding than removing), every replica that stays; None
    while an adding replica is still catching up (or no reassignment is in
    progress). A replica that stays need not be in the ISR for a move that
    keeps the replication factor: the move completes with it outside, as
    it would have been without the move (Kafka 4.0 still asked for every
    replica that stays; 4.4 asks for the adding ones)."""
    adding, removing, isr = tuple(adding), tuple(removing), tuple(isr)
    if not adding and not removing:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas or not set(adding) <= set(new_isr):
        return None
    if len(adding) < len(removing) and not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def revert_reassignment(p: PartitionRegistration) -> tuple[tuple[NodeId, ...], tuple[NodeId, ...], bool]:
    """Kafka's ``PartitionReassignmentRevert`` (cancelling a reassignment,
    AlterPartitionReassignments with null replicas): (replicas, ISR, unclean)
    with every replica the reassignment was adding taken out and the ones it
    was removing kept. If no ISR member is left the first remaining replica
    becomes the ISR, an unclean election (``unclean`` True), which the
    controller allows only where unclean election is."""
    replicas = tuple(r for r in p.replicas if r not in p.adding_replicas)
    isr = tuple(r for r in p.isr if r not in p.adding_replicas)
    if isr:
        return replicas, isr, False
    return replicas, replicas[:1], True


__all__ = [
    "reassignment_replicas",
    "complete_reassignment",
    "revert_reassignment",
    "PartitionChangeBuilder",
    "PartitionChange",
    "CLEAN",
    "ELR",
    "UNCLEAN",
    "RECOVERY",
    "LAST_KNOWN_LEADER",
    "AGGRESSIVE",
    "BALANCED",
    "STRATEGY_NONE",
    "RECOVERED",
    "RECOVERING",
]
