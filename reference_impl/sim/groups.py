"""A simulated consumer in a group (Jepsen's sub-via subscribe), as
librdkafka's classic protocol drives it."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Final

from reference_impl.core.groups.messages import (
    CommittedOffset,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupErrors,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from reference_impl.core.messages import TopicPartition

from .consumer import Consumer, RecordPairs, _Poll
from .endpoint import ClientConfig, Endpoint, choose, group_error_name

if TYPE_CHECKING:
    from .simulation import Simulation


class GroupMember(Consumer):
    """A consumer in a group, as librdkafka's classic protocol drives it:
    FindCoordinator, JoinGroup (KIP-394's MEMBER_ID_REQUIRED round trip for
    a dynamic member; with ``instance_id`` a static member, KIP-345),
    SyncGroup (the leader assigns the sorted partitions round-robin to the
    sorted members), heartbeats every :attr:`HEARTBEAT_MS`; the assignment
    is eager: every rebalance revokes all and assigns anew, and each
    assigned partition starts at the group's committed offset (OffsetFetch;
    none: the start, Jepsen's ``auto.offset.reset=earliest``). A poll reads
    the assigned partitions and, when it read something, commits the
    offsets after its reads (OffsetCommit, commitSync) before it completes;
    a refused commit is kept as ``commit-error``. Assignment changes since
    the last poll completed are its ``rebalance-log``. The group runs beside
    the polls, as librdkafka's background thread does; a new process's
    member joins afresh (static: under the same instance id), leaving the
    old one's membership to its session timeout."""

    SESSION_MS: Final = 6000
    REBALANCE_MS: Final = 10000
    HEARTBEAT_MS: Final = 500

    def __init__(self, sim: "Simulation", ep: Endpoint, tps: list[TopicPartition], topics: tuple[str, ...],
                 cfg: ClientConfig, group_id: str, instance_id: str | None = None,
                 pairs: RecordPairs | None = None) -> None:
        super().__init__(sim, ep, tps, topics, cfg, pairs)
        self.by_key: dict[str, TopicPartition] = {str(tp): tp for tp in tps}
        self.group_id = group_id
        self.instance_id = instance_id
        self.coordinator = -1
        self.member_id = ""
        self.generation = -1
        self.assigned = []
        #: assigned partitions whose committed offset is known (pollable)
        self.ready: list[TopicPartition] = []
        self.stable = False
        self.stopped = True
        self.rebalance_log: list[dict[str, Any]] = []
        #: bumped whenever the member's group conversation restarts (a
        #: new process, a rejoin): answers to an older one are dropped
        self.epoch = 0

    def reset(self) -> None:
        """The process died (a crash, or an ``info`` that gave its thread a
        new process): its member sends nothing more, and its place is left
        to its session timeout (a static one's to its replacement under the
        same instance id, KIP-345), as the real client's consumer is dropped
        without a close (workloads/queue.py ``_abandon_consumer``).
        :meth:`start` joins the next process's member."""
        super().reset()
        self.leave()

    # -- the group conversation -----------------------------------------------------------------------
    def start(self) -> None:
        """Subscribe to every topic and join (the real client subscribes as
        it opens; a ``subscribe`` op subscribes again)."""
        self.stopped = False
        self._find(self.epoch)

    def leave(self) -> None:
        """Stop taking part in the group conversation: the member's place is
        left to its session timeout, or a static one's to its replacement.
        No LeaveGroup is sent, as the real client never closes a group
        consumer (workloads/queue.py ``_close_consumer``)."""
        self.epoch += 1
        self.stopped = True
        self.member_id, self.generation, self.stable, self.coordinator = "", -1, False, -1
        self.assigned, self.ready, self.rebalance_log = [], [], []

    def _live(self, epoch: int) -> bool:
        return epoch == self.epoch and not self.stopped

    def _later(self, fn: Callable[[int], None], epoch: int) -> None:
        self.sim.loop.after(self.cfg.retry_backoff_ms, fn, epoch)

    def _find(self, epoch: int) -> None:
        if not self._live(epoch):
            return
        self.coordinator = -1
        broker = choose(self.sim.rng, self.sim.broker_ids)
        self.ep.request(broker, lambda ref: FindCoordinatorRequest(ref, (self.group_id,)),
                        lambda msg: self._on_find(epoch, msg), self.cfg.request_timeout_ms)

    def _on_find(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if isinstance(msg, FindCoordinatorResponse) and msg.coordinators and msg.coordinators[0].error == 0:
            self.coordinator = msg.coordinators[0].node_id
            self._join(epoch)
        else:
            self._later(self._find, epoch)

    def _rejoin(self, epoch: int, forget_id: bool = False) -> None:
        """Leave the generation and join again (REBALANCE_IN_PROGRESS and the like)."""
        self.epoch += 1
        if forget_id:
            self.member_id = ""
        self.stable = False
        self._revoke()
        self._later(self._join if self.coordinator >= 0 else self._find, self.epoch)

    def _join(self, epoch: int) -> None:
        if not self._live(epoch):
            return
        req = partial(JoinGroupRequest, group_id=self.group_id, session_timeout_ms=self.SESSION_MS,
                      rebalance_timeout_ms=self.REBALANCE_MS, member_id=self.member_id, protocol_type="consumer",
                      protocols=(("range", b""),), client_id=self.ep.name, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_join(epoch, msg),
                        self.REBALANCE_MS + self.cfg.request_timeout_ms)

    def _on_join(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if not isinstance(msg, JoinGroupResponse):
            self._later(self._find, epoch)
            return
        err = msg.error
        if err == GroupErrors.MEMBER_ID_REQUIRED:
            self.member_id = msg.member_id
            self._join(epoch)
        elif err in (GroupErrors.UNKNOWN_MEMBER_ID, GroupErrors.FENCED_INSTANCE_ID):
            self.member_id = ""
            self._later(self._join, epoch)
        elif err in (GroupErrors.NOT_COORDINATOR, GroupErrors.COORDINATOR_NOT_AVAILABLE,
                     GroupErrors.COORDINATOR_LOAD_IN_PROGRESS):
            self._later(self._find, epoch)
        elif err != 0:
            self._later(self._join, epoch)
        else:
            self.member_id = msg.member_id
            self.generation = msg.generation_id
            given: tuple[tuple[str, bytes], ...] = ()
            if msg.leader == msg.member_id and not msg.skip_assignment:
                given = self._assign_ranges([m.member_id for m in msg.members])
            self._sync(epoch, given)

    def _assign_ranges(self, members: list[str]) -> tuple[tuple[str, bytes], ...]:
        """Round-robin of the sorted partitions over the sorted members; an
        assignment is its keys, comma-separated (only these clients read it)."""
        ids = sorted(members)
        tps = sorted(self.tps, key=str)
        shares: dict[str, list[str]] = {m: [] for m in ids}
        for i, tp in enumerate(tps):
            shares[ids[i % len(ids)]].append(str(tp))
        return tuple((m, ",".join(shares[m]).encode()) for m in ids)

    def _sync(self, epoch: int, given: tuple[tuple[str, bytes], ...]) -> None:
        req = partial(SyncGroupRequest, group_id=self.group_id, generation_id=self.generation,
                      member_id=self.member_id, assignments=given, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_sync(epoch, msg),
                        self.REBALANCE_MS + self.cfg.request_timeout_ms)

    def _on_sync(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if not isinstance(msg, SyncGroupResponse) or msg.error in (GroupErrors.NOT_COORDINATOR,
                                                                   GroupErrors.COORDINATOR_NOT_AVAILABLE):
            self._later(self._find, epoch)
            return
        if msg.error != 0:
            self._rejoin(epoch, forget_id=msg.error in (GroupErrors.UNKNOWN_MEMBER_ID, GroupErrors.FENCED_INSTANCE_ID))
            return
        keys = [k for k in msg.assignment.decode().split(",") if k] if msg.assignment else []
        self.assigned = [self.by_key[k] for k in keys if k in self.by_key]
        self.stable = True
        self.rebalance_log.append({"event": "assigned", "keys": sorted(keys)})
        self._fetch_offsets(epoch)
        self.sim.loop.after(self.HEARTBEAT_MS, self._heartbeat, epoch)

    def _revoke(self) -> None:
        if self.assigned:
            self.rebalance_log.append({"event": "revoked", "keys": sorted(str(tp) for tp in self.assigned)})
        self.assigned, self.ready = [], []

    def _fetch_offsets(self, epoch: int) -> None:
        tps = tuple(self.assigned)
        if not tps:
            return
        self.ep.request(self.coordinator, lambda ref: OffsetFetchRequest(ref, self.group_id, tps),
                        lambda msg: self._on_offsets(epoch, msg), self.cfg.request_timeout_ms)

    def _on_offsets(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        if not isinstance(msg, OffsetFetchResponse) or msg.error != 0:
            self._later(self._fetch_offsets, epoch)
            return
        for o in msg.offsets:
            self.positions[o.tp] = o.offset if o.offset >= 0 else 0
        self.ready = list(self.assigned)

    def _heartbeat(self, epoch: int) -> None:
        if not self._live(epoch):
            return
        req = partial(HeartbeatRequest, group_id=self.group_id, generation_id=self.generation,
                      member_id=self.member_id, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_heartbeat(epoch, msg),
                        self.cfg.request_timeout_ms)

    def _on_heartbeat(self, epoch: int, msg: Any) -> None:
        if not self._live(epoch):
            return
        err = msg.error if isinstance(msg, HeartbeatResponse) else GroupErrors.NOT_COORDINATOR
        if err == 0:
            self.sim.loop.after(self.HEARTBEAT_MS, self._heartbeat, epoch)
        elif err in (GroupErrors.NOT_COORDINATOR, GroupErrors.COORDINATOR_NOT_AVAILABLE):
            self.coordinator = -1
            self._rejoin(epoch)
        else:  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID
            self._rejoin(epoch, forget_id=err in (GroupErrors.UNKNOWN_MEMBER_ID, GroupErrors.FENCED_INSTANCE_ID))

    # -- polls ------------------------------------------------------------------------------------------
    def partitions(self) -> list[TopicPartition]:
        """What the group gave this member (none yet: an empty poll)."""
        return self.ready

    def _finish(self, st: _Poll, got: dict[str, list[list[Any]]], extra: dict[str, Any]) -> None:
        """Commit what the poll read (commitSync), then complete it."""
        if self.rebalance_log:
            extra["rebalance-log"], self.rebalance_log = self.rebalance_log, []
        offsets = tuple(CommittedOffset(self.by_key[k], pairs[-1][0] + 1) for k, pairs in got.items() if pairs)
        if not offsets:
            super()._finish(st, got, extra)
            return
        if not self.stable or self.coordinator < 0:
            extra["commit-error"] = "not-in-group"
            super()._finish(st, got, extra)
            return
        gen = st.gen
        req = partial(OffsetCommitRequest, group_id=self.group_id, generation_id=self.generation,
                      member_id=self.member_id, offsets=offsets, group_instance_id=self.instance_id)
        self.ep.request(self.coordinator, lambda ref: req(ref), lambda msg: self._on_commit(gen, got, extra, msg),
                        self.cfg.request_timeout_ms)

    def _on_commit(self, gen: int, got: dict[str, list[list[Any]]], extra: dict[str, Any], msg: Any) -> None:
        st = self._poll
        if st is None or st.gen != gen:
            return
        if not isinstance(msg, OffsetCommitResponse):
            extra["commit-error"] = "commit-timeout"
        else:
            errs = sorted({e for _, e in msg.results if e})
            if errs:
                extra["commit-error"] = group_error_name(errs[0])
        if st.crash >= 0:
            self._crashed(st)
            return
        super()._finish(st, got, extra)
