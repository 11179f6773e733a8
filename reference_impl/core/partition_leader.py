"""The leader side of a hosted partition replica (seed 000: maybeIncrementLeaderHW,
maybeShrinkIsr / maybeExpandIsr, the AlterPartition round trip, serving
fetches and ListOffsets, appendRecordsToLeader; seed 001 §2.9; Kafka's
Partition.scala). See :mod:`.partition_state` for how the partition's
classes stack.
"""

from __future__ import annotations

from typing import Final

from .effects import Effect
from .messages import (
    AlterPartitionItem,
    AlterPartitionResult,
    Batch,
    Errors,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchPartitionRequest,
    FetchPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    NodeId,
    TopicPartition,
)
from .partition_state import LEADER, IsrState, PartitionState, ReplicaState
from .producer_state import SequenceCheck

#: the answer of a leader that checks no producer sequences (variant
#: producer_sequence_checks off): no error, no duplicate
_UNCHECKED: Final = SequenceCheck()

#: AlterPartition errors after which the leader waits for fresh metadata
#: (the controller's view moved on; seed 000, "AlterPartition rejected")
WAIT_FOR_METADATA_ERRORS: Final = frozenset(
    {
        Errors.INVALID_UPDATE_VERSION,
        Errors.FENCED_LEADER_EPOCH,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.INVALID_REQUEST,
        Errors.NEW_LEADER_ELECTED,
    }
)
#: authoritative "not applied": reset to the last committed ISR
RESET_ERRORS: Final = frozenset({Errors.INELIGIBLE_REPLICA, Errors.OPERATION_NOT_ATTEMPTED})

#: a replica fetch's partition answer with nothing in it, not built yet
#: (``serve_replica_fetch_into(lazy=True)``): a stand-in, never sent
NOTHING_YET: Final = FetchPartitionResponse(TopicPartition("", -1), Errors.NONE)


def _has(ids: tuple[NodeId, ...], x: NodeId) -> bool:
    """``x in ids``, as a native loop over the ints: compiled, ``in`` on a
    tuple is a generic containment test of boxed values (an ISR test on
    every follower fetch and every HW computed)."""
    for i in ids:
        if i == x:
            return True
    return False


class LeaderPartition(PartitionState):
    """The leader side (the class below :class:`~.partition.Partition`)."""

    def _stale_broker_epoch(self, replica_id: NodeId, broker_epoch: int) -> bool:
        """Seed 000 (Replica.updateFetchStateOrThrow): a fetch whose broker
        epoch is older than the one the metadata holds for that live broker
        comes from a previous incarnation and is fenced with
        NOT_LEADER_OR_FOLLOWER, so its LEO never feeds the HW. The metadata,
        not the follower's previous fetch: after a leader change the new
        leader has no previous fetch to compare with. A fenced or unknown
        broker has no live epoch to compare with (Kafka's
        getAliveBrokerEpoch), and -1 bypasses the check."""
        b = self._image.brokers.get(replica_id)
        return b is not None and not b.fenced and b.broker_epoch > broker_epoch

    def _is_replica_isr_eligible(self, r: ReplicaState) -> bool:
        """isReplicaIsrEligible: broker registered, not fenced, not in
        controlled shutdown, and the broker epoch of its fetch matches the one
        the metadata knows (a fetch that sent -1 bypasses the check)."""
        b = self._image.brokers.get(r.broker_id)
        if b is None or b.fenced or b.in_controlled_shutdown:
            return False
        return r.broker_epoch == -1 or r.broker_epoch == b.broker_epoch

    def maybe_increment_leader_hw(self, now: int) -> tuple[list[Effect], bool]:
        """maybeIncrementLeaderHW (seed 000 pseudo-code) plus the min-ISR gate.

        HW = min LEO over the maximal ISR, also held back by any replica that
        is caught up and ISR-eligible though not yet in the ISR; it never
        advances while the committed ISR is smaller than the effective min ISR
        (variant ``min_isr_hw_gate`` on: KAFKA-15583, Kafka's
        Partition.maybeIncrementLeaderHW from 3.7.0, whose ``isUnderMinIsr``
        check does not depend on ELR; Partition.scala line 1151 in 3.7.0,
        1175 in trunk of October 2024, 1011 in 4.4.0 by its class file's
        line table).
        """
        effects: list[Effect] = []
        return effects, self.maybe_increment_leader_hw_into(now, effects)

    def maybe_increment_leader_hw_into(self, now: int, effects: list[Effect]) -> bool:
        """:meth:`maybe_increment_leader_hw`, its HW event appended to
        ``effects``; returns whether the HW moved. Every follower fetch and
        every append on a leader asks: no list and no tuple made to answer."""
        if not self.is_leader:
            return False
        if self.config.variants.min_isr_hw_gate and self.is_under_min_isr():
            return False
        leader_leo = self.log.leo
        new_hw = leader_leo
        lag = self.config.replica_lag_time_max_ms
        maximal = self.state.maximal_isr
        for r in self._remotes:  # remote.values(), as a list
            if r.leo < new_hw and (
                _has(maximal, r.broker_id) or (r.is_caught_up(leader_leo, now, lag) and self._is_replica_isr_eligible(r))
            ):
                new_hw = r.leo
        if self.log.maybe_increment_hw(new_hw):
            effects.append(self._hw_trace())
            return True
        return False

    def _set_state(self, state: IsrState) -> list[Effect]:
        self.state = state
        return [self._isr_trace()]

    def _alter_item(self, new_isr: tuple[NodeId, ...]) -> AlterPartitionItem:
        """The proposal with each member's broker epoch (addBrokerEpochToIsr)."""
        with_epochs = []
        for r in new_isr:
            if r == self.ctx.node_id:
                with_epochs.append((r, self.ctx.broker_epoch))
            else:
                st = self.remote.get(r)
                with_epochs.append((r, st.broker_epoch if st is not None else -1))
        return AlterPartitionItem(
            tp=self.tp,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            new_isr=tuple(with_epochs),
            # The leader has finished recovery by the time it proposes any ISR
            # change, so proposals always say RECOVERED (Kafka's
            # prepareIsrExpand/prepareIsrShrink); proposing RECOVERING with
            # more than one member is refused (seed 000, unclean election).
            leader_recovery_state=0,
        )

    def maybe_expand_isr(self, replica_id: NodeId, now: int) -> list[Effect]:
        """maybeExpandIsr: a follower joins when its LEO >= HW and (strict
        variant) >= the leader-epoch start offset, it fetched in the current
        leader epoch and it is ISR-eligible; only with no change in flight.

        The new member is pending: the min-ISR gate and acks=all keep reading
        the committed ISR until the controller commits (seed 002's example:
        ISR [0], maximal ISR [0, 2], min ISR 2, the HW waits). Variant
        ``maximal_isr`` off applies the expansion locally at once, as the
        pre-KIP-497 leader did, so the HW advances on [0, 2] first."""
        if not self.is_leader or self.state.inflight or _has(self.state.isr, replica_id):
            return []
        r = self.remote.get(replica_id)
        if r is None or r.fetch_leader_epoch != self.leader_epoch:
            return []
        if r.leo < self.log.hw:
            return []
        if self.config.variants.strict_isr_expand and r.leo < self.leader_epoch_start_offset:
            return []
        if not self._is_replica_isr_eligible(r):
            return []
        committed = self.state.isr
        proposed = committed + (replica_id,)
        local = committed if self.config.variants.maximal_isr else proposed
        state = IsrState(
            isr=local, maximal_isr=proposed, kind="pending-expand", proposed=proposed, last_committed=committed
        )
        effects = self._set_state(state)
        self.ctx.submit_alter_partition(self, self._alter_item(proposed))
        return effects

    def out_of_sync_replicas(self, now: int) -> list[NodeId]:
        """getOutOfSyncReplicas: ISR members (not the leader) that are not caught up."""
        lag = self.config.replica_lag_time_max_ms
        out = []
        for rid in self.state.isr:
            if rid == self.ctx.node_id:
                continue
            r = self.remote.get(rid)
            if r is None or not r.is_caught_up(self.log.leo, now, lag):
                out.append(rid)
        return out

    def maybe_shrink_isr(self, now: int) -> tuple[list[Effect], bool]:
        """maybeShrinkIsr (run every replica_lag_time_max_ms / 2). With the
        maximal-ISR rule the shrink is only proposed: the HW keeps waiting for
        the old ISR until the controller commits. Variant ``maximal_isr`` off
        applies the shrink locally right away (pre-KIP-497 behaviour)."""
        if not self.is_leader or self.state.inflight:
            return [], False
        out = self.out_of_sync_replicas(now)
        if not out:
            return [], False
        committed = self.state.isr
        proposed = tuple(r for r in committed if r not in out)
        if self.config.variants.maximal_isr:
            state = IsrState(
                isr=committed, maximal_isr=committed, kind="pending-shrink", proposed=proposed, last_committed=committed
            )
        else:
            state = IsrState(
                isr=proposed, maximal_isr=proposed, kind="pending-shrink", proposed=proposed, last_committed=committed
            )
        effects = self._set_state(state)
        self.ctx.submit_alter_partition(self, self._alter_item(proposed))
        hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
        return effects + hw_effects, hw_changed

    def handle_alter_partition_result(
        self, result: AlterPartitionResult, proposed_from: IsrState, now: int
    ) -> tuple[list[Effect], bool, bool]:
        """Apply an AlterPartition answer. Returns (effects, hw_changed, retry).

        Stale answers (the state moved on since the proposal: a metadata
        update or a new election) are ignored. Success installs the committed
        ISR if its partition epoch is not older than ours. INELIGIBLE_REPLICA /
        OPERATION_NOT_ATTEMPTED reset to the last committed ISR;
        INVALID_UPDATE_VERSION and friends wait for metadata; anything else is
        transient and ``retry`` asks the broker to resubmit after the backoff.
        """
        if not self.is_leader or self.state is not proposed_from:
            return [], False, False
        if result.error == Errors.NONE:
            if result.leader_epoch != self.leader_epoch or result.partition_epoch < self.partition_epoch:
                return [], False, False
            self.partition_epoch = result.partition_epoch
            effects = self._set_state(IsrState.committed(tuple(result.isr)))
            hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
            return effects + hw_effects, hw_changed, False
        if result.error in RESET_ERRORS:
            effects = self._set_state(IsrState.committed(self.state.last_committed))
            hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
            return effects + hw_effects, hw_changed, False
        if result.error in WAIT_FOR_METADATA_ERRORS:
            return [], False, False
        return [], False, True

    def retry_alter_partition(self) -> AlterPartitionItem | None:
        """The item to resubmit for the current pending state, if still pending."""
        if not self.is_leader or not self.state.inflight or self.state.proposed is None:
            return None
        return self._alter_item(self.state.proposed)

    # -- serving fetches -----------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> int:
        """FENCED_LEADER_EPOCH for a requester behind us, UNKNOWN_LEADER_EPOCH
        for one ahead of us, NONE when equal or not given (-1)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return Errors.NONE
        if current_leader_epoch < self.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        return Errors.UNKNOWN_LEADER_EPOCH

    def check_leader_request(self, current_leader_epoch: int) -> int:
        """What a request only the leader serves is refused with, in Kafka's
        order (Partition.getLocalLog): the requester's leader epoch first, so
        an ex-leader fences a requester behind it with FENCED_LEADER_EPOCH
        (and waits for one ahead with UNKNOWN_LEADER_EPOCH); only a requester
        in our epoch hears NOT_LEADER_OR_FOLLOWER."""
        err = self.check_leader_epoch(current_leader_epoch)
        if err:
            return err
        return Errors.NONE if self.is_leader else Errors.NOT_LEADER_OR_FOLLOWER

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """Inline divergence (Partition.readRecords): the fetcher's last
        fetched epoch ends earlier here than its fetch offset, or does not
        exist here -> it must truncate to (epoch, end offset)."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return (epoch, end)
        return None

    def _response(
        self, error: int, batches: tuple[Batch, ...] = (), diverging_epoch: tuple[int, int] | None = None,
    ) -> FetchPartitionResponse:
        # every argument by position: the compiled constructor is then a direct call
        log = self.log
        leader = (self.leader_id, self.leader_epoch) if error != Errors.NONE else None
        return FetchPartitionResponse(self.tp, error, log.hw, log.hw, log.log_start_offset, batches, diverging_epoch, leader)

    def _max_batches(self, max_bytes: int) -> int:
        # payloads are opaque to the core; budget about 1 KiB per batch
        return max(1, max_bytes // 1024)

    def empty_response(self) -> FetchPartitionResponse:
        """The answer of a replica fetch with nothing to return now (no
        error, no batches): what :data:`NOTHING_YET` stands for, built when
        the fetch is answered after all."""
        return self._response(Errors.NONE)

    def serve_replica_fetch_into(
        self, req: FetchPartitionRequest, replica_id: NodeId, broker_epoch: int, now: int, effects: list[Effect],
        record: bool = True, lazy: bool = False,
    ) -> tuple[FetchPartitionResponse, bool]:
        """A follower's fetch on the leader. Returns (response, hw_changed);
        its effects go to ``effects`` (the replica manager's, for the whole
        request: no list is made per partition of every replica fetch).
        With ``lazy``, an answer with nothing in it (no error, no batches,
        no divergence) is :data:`NOTHING_YET`, not built: such a fetch is
        mostly parked, its answer never sent (:meth:`empty_response` builds
        it when it is answered at once after all).

        Records the follower's progress (unless ``record`` is False: a parked
        fetch being completed), then tries ISR expansion and HW advancement
        (seed 000, "Recording follower progress").
        """
        err = self.check_leader_request(req.current_leader_epoch)
        if err:
            return self._response(err), False
        r = self.remote.get(replica_id)
        if r is None:
            return self._response(Errors.NOT_LEADER_OR_FOLLOWER), False
        if broker_epoch >= 0 and self._stale_broker_epoch(replica_id, broker_epoch):
            return self._response(Errors.NOT_LEADER_OR_FOLLOWER), False
        log = self.log
        # the common case needs no epoch lookup: the follower is in our latest epoch, not past our LEO
        if req.last_fetched_epoch != log.epochs.latest_epoch or req.fetch_offset > log.leo:
            div = self.diverging_epoch(req.last_fetched_epoch, req.fetch_offset)
            if div is not None:
                return self._response(Errors.NONE, diverging_epoch=div), False
        if req.fetch_offset > log.leo or req.fetch_offset < log.log_start_offset:
            return self._response(Errors.OFFSET_OUT_OF_RANGE), False
        hw_changed = False
        if record:
            leo_before = r.leo
            r.update_fetch_state(
                req.fetch_offset, req.log_start_offset, now, self.log.leo, broker_epoch, self.leader_epoch
            )
            # maybeExpandIsr's first test here: nearly every fetch is an ISR
            # member's, and the call made and freed a list to say no
            expanded = False
            state = self.state
            if not state.inflight and not _has(state.isr, replica_id):
                more = self.maybe_expand_isr(replica_id, now)
                if more:
                    effects += more
                    expanded = True
            if r.leo != leo_before or expanded:
                hw_changed = self.maybe_increment_leader_hw_into(now, effects)
        batches = self.log.read(req.fetch_offset, self.log.leo, self._max_batches(req.max_bytes))
        if lazy and not batches:
            return NOTHING_YET, hw_changed
        return self._response(Errors.NONE, batches=batches), hw_changed

    def serve_client_fetch(self, req: FetchPartitionRequest) -> FetchPartitionResponse:
        """A consumer fetch: only the leader serves, and only below the HW."""
        err = self.check_leader_request(req.current_leader_epoch)
        if err:
            return self._response(err)
        div = self.diverging_epoch(req.last_fetched_epoch, req.fetch_offset)
        if div is not None:
            return self._response(Errors.NONE, diverging_epoch=div)
        if req.fetch_offset > self.log.leo or req.fetch_offset < self.log.log_start_offset:
            return self._response(Errors.OFFSET_OUT_OF_RANGE)
        batches = self.log.read(req.fetch_offset, self.log.hw, self._max_batches(req.max_bytes))
        return self._response(Errors.NONE, batches=batches)

    def list_offset(self, req: ListOffsetsRequest) -> ListOffsetsResponse:
        """ListOffsets on the leader (Partition.fetchOffsetForTimestamp and
        UnifiedLog.fetchOffsetByTimestamp), for a client: everything is
        capped at the HW (read_uncommitted; with no transactions the LSO is
        the HW too, so read_committed answers the same).

        * latest (-1): the HW, refused with OFFSET_NOT_AVAILABLE while the HW
          is below the leader-epoch start offset (a new leader whose HW has
          not caught up);
        * earliest (-2), and earliest local (-4) without tiered storage: the
          log start, with the epoch it was written in;
        * latest tiered (-5) without tiered storage: offset -1, epoch -1;
        * a timestamp (>= 0): the first record at or after it; max timestamp
          (-3): the first record holding the log's largest timestamp. Below
          the HW only: a record at or past it is "none" (offset -1, or
          OFFSET_NOT_AVAILABLE in the lagging-HW state). The core finds the
          batch; the runtime reading the records picks the record in it.
        """
        tp, ref = self.tp, req.ref
        err = self.check_leader_request(req.current_leader_epoch)
        if err:
            return ListOffsetsResponse(ref, tp, err)
        log = self.log
        ts = req.timestamp
        lagging = log.hw < self.leader_epoch_start_offset
        if ts == LATEST_TIMESTAMP:
            if lagging:
                return ListOffsetsResponse(ref, tp, Errors.OFFSET_NOT_AVAILABLE)
            return ListOffsetsResponse(ref, tp, Errors.NONE, log.hw, log.latest_epoch)
        if ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = log.log_start_offset
            return ListOffsetsResponse(ref, tp, Errors.NONE, start, log.epochs.epoch_for_offset(start))
        if ts == LATEST_TIERED_TIMESTAMP:
            return ListOffsetsResponse(ref, tp, Errors.NONE, -1, -1)
        if ts == MAX_TIMESTAMP:
            found = log.batch_of_max_timestamp(log.hw)
        else:  # any other value is a timestamp, as in Kafka (-6 finds the first record)
            found = log.first_batch_at_or_after_timestamp(ts, log.hw)
        if found is None:
            return ListOffsetsResponse(ref, tp, Errors.OFFSET_NOT_AVAILABLE if lagging else Errors.NONE)
        return ListOffsetsResponse(
            ref, tp, Errors.NONE, found.base_offset, found.leader_epoch, found.max_timestamp, found
        )

    def offset_for_leader_epoch(self, leader_epoch: int, current_leader_epoch: int) -> tuple[int, int, int]:
        """lastOffsetForLeaderEpoch on the leader: (error, epoch, end offset)."""
        err = self.check_leader_request(current_leader_epoch)
        if err:
            return err, -1, -1
        epoch, end = self.log.end_offset_for_epoch(leader_epoch)
        return Errors.NONE, epoch, end

    # -- produce -------------------------------------------------------------

    def append_as_leader(
        self, count: int, payload, acks: int, producer_id: int, producer_epoch: int, base_sequence: int, now: int,
        max_timestamp: int = -1,
    ) -> tuple[int, Batch | None, int, list[Effect], bool]:
        """appendRecordsToLeader. Returns (error, batch, required_offset, effects, hw_changed).

        acks=all is refused with NOT_ENOUGH_REPLICAS *before* anything is
        written when the committed ISR is below the effective min ISR. A
        duplicate idempotent batch is not appended: ``batch`` describes the
        original batch (whose base offset the broker returns) and
        ``required_offset`` ends there. ``batch`` is None exactly when
        ``error`` is set. ``required_offset`` is the offset the HW must reach.
        """
        if not self.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER, None, -1, [], False
        if acks == -1 and self.is_under_min_isr():
            return Errors.NOT_ENOUGH_REPLICAS, None, -1, [], False
        if self.config.variants.producer_sequence_checks:
            check = self.producers.check(producer_id, producer_epoch, base_sequence, count)
        else:  # a broker without idempotence appends whatever comes
            check = _UNCHECKED
        if check.error:
            return check.error, None, -1, [], False
        if check.duplicate is not None:
            dup = check.duplicate
            return Errors.NONE, Batch(dup.base_offset, -1, dup.last_offset - dup.base_offset + 1, None), dup.last_offset + 1, [], False
        batch, effects = self.log.append_as_leader(
            self.leader_epoch, count, payload, producer_id, producer_epoch, base_sequence, max_timestamp
        )
        self.producers.record(batch)
        # one batch, one run: [[leader_epoch, base_offset]], built if read (effects.AppendTrace)
        effects.append(self._append_trace(batch.base_offset, batch.count, batch.leader_epoch, None, LEADER))
        hw_changed = self.maybe_increment_leader_hw_into(now, effects)
        return Errors.NONE, batch, batch.next_offset, effects, hw_changed

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """checkEnoughReplicasReachOffset: (done, error) for a parked acks=all produce."""
        if not self.is_leader:
            return True, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.hw >= required_offset:
            if len(self.state.maximal_isr) >= self.effective_min_isr():
                return True, Errors.NONE
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, Errors.NONE
