"""One hosted partition replica: the transitions and the follower side.

Seed 000 ("Partition", "Becoming leader or follower", epoch-based
truncation) and seed 001 §2.10 (the replica transitions), §2.2.2 (the
follower's fetch).

A :class:`Partition` owns its :class:`~reference_impl.core.log.PartitionLog`
and its idempotent-producer state. It never sends anything itself: methods
return effects, and the broker (:mod:`reference_impl.core.replica_manager`)
does the networking (fetchers, purgatories, the AlterPartition channel)
through the small :class:`~.partition_state.PartitionContext` it passes in.
Its leader side is :class:`~.partition_leader.LeaderPartition`, its state
:class:`~.partition_state.PartitionState` (that module says why they are
stacked classes).
"""

from __future__ import annotations

from .effects import Effect
from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from .log import epoch_runs_if_several
from .messages import NO_LEADER, Errors, FetchPartitionRequest, FetchPartitionResponse
from .metadata import PartitionRegistration
from .partition_leader import LeaderPartition
from .partition_state import (
    FENCED,
    FETCHING,
    FOLLOWER,
    LEADER,
    NEVER,
    NONE,
    TRUNCATING,
    IsrState,
    PartitionContext,
    ReplicaState,
)


class Partition(LeaderPartition):
    """A hosted replica, leader or follower (see the module docstring)."""

    # ======================================================================
    # Transitions (seed 001 §2.10; Partition.makeLeader / makeFollower)
    # ======================================================================

    def make_leader(self, reg: PartitionRegistration, now: int) -> tuple[list[Effect], bool]:
        """Become (or stay) leader for ``reg``. Returns (effects, hw_changed).

        A registration older than what we know is ignored. In a new leader
        epoch (or on a follower -> leader transition) the leader records the
        leader-epoch start offset (LESO = its LEO), resets every follower's
        state so only fetches in this epoch count, and may advance the HW at
        once (an ISR of one).
        """
        if reg.partition_epoch < self.partition_epoch or (
            self.is_leader and reg.leader_epoch == self.leader_epoch and reg.partition_epoch == self.partition_epoch
        ):
            return [], False
        effects: list[Effect] = []
        new_leader = not self.is_leader
        new_epoch = new_leader or reg.leader_epoch != self.leader_epoch
        self.replicas = tuple(reg.replicas)
        self._min_isr = None
        self.partition_epoch = reg.partition_epoch
        self.leader_recovery_state = reg.leader_recovery_state
        self.state = IsrState.committed(tuple(reg.isr))
        for r in self.replicas:
            if r != self.ctx.node_id and r not in self.remote:
                self.remote[r] = ReplicaState(r)
        for r in list(self.remote):
            if r not in self.replicas or r == self.ctx.node_id:
                del self.remote[r]
        self.remote_changed()
        if new_epoch:
            self.role = LEADER
            self.leader_id = self.ctx.node_id
            self.leader_epoch = reg.leader_epoch
            self.leader_epoch_start_offset = self.log.leo
            effects += self.log.assign_epoch_start(reg.leader_epoch, self.log.leo)
            for rs in self.remote.values():
                rs.reset(now, rs.broker_id in self.state.isr, self.log.leo, new_leader)
            self.fetch_state = FETCHING
            effects.append(
                self._trace(
                    "become_leader",
                    leader_epoch=self.leader_epoch,
                    partition_epoch=self.partition_epoch,
                    isr=list(self.state.isr),
                    leo=self.log.leo,
                    hw=self.log.hw,
                )
            )
        effects.append(self._isr_trace())
        hw_effects, hw_changed = self.maybe_increment_leader_hw(now)
        return effects + hw_effects, hw_changed

    def make_follower(self, reg: PartitionRegistration, now: int) -> tuple[list[Effect], bool]:
        """Become (or stay) a follower. Returns (effects, epoch_changed).

        In a new leader epoch the follower (re)starts fetching from the new
        leader. Its first fetch offset follows Kafka's initialFetchOffset: its
        LEO when it has an epoch cache (the fetch path truncates a divergent
        tail), else its HW. With ``kip101`` off it instead truncates to its HW
        at once, the pre-KIP-101 behaviour whose data loss seed 003 shows.
        """
        if reg.partition_epoch < self.partition_epoch:
            return [], False
        effects: list[Effect] = []
        changed = (
            self.role != FOLLOWER or reg.leader_epoch != self.leader_epoch or reg.leader != self.leader_id
        )
        self.replicas = tuple(reg.replicas)
        self._min_isr = None
        self.partition_epoch = reg.partition_epoch
        self.leader_recovery_state = reg.leader_recovery_state
        self.state = IsrState.committed(tuple(reg.isr))
        if not changed:
            return effects, False
        self.role = FOLLOWER
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.remote.clear()
        self.remote_changed()
        self.leader_epoch_start_offset = -1
        self.fetch_state = FETCHING
        self.fetch_backoff_until = 0
        effects.append(
            self._trace(
                "become_follower",
                leader=self.leader_id,
                leader_epoch=self.leader_epoch,
                partition_epoch=self.partition_epoch,
            )
        )
        if not self.config.variants.kip101 or self.log.epochs.is_empty():
            effects += self._truncate(self.log.hw, "hw")
        return effects, True

    def make_offline(self) -> list[Effect]:
        """No longer a replica (removed from the assignment)."""
        self.role = NONE
        self.leader_id = NO_LEADER
        self.remote.clear()
        self.remote_changed()
        self.state = IsrState.committed(())
        return []

    # ======================================================================
    # Follower side
    # ======================================================================

    def wants_fetch(self, now: int) -> bool:
        return (
            self.role == FOLLOWER
            and self.leader_id != NO_LEADER
            and self.fetch_state == FETCHING
            and now >= self.fetch_backoff_until
        )

    def fetch_request(self) -> FetchPartitionRequest:
        """Fetch offset = LEO, current leader epoch, last fetched epoch (seed
        001 §2.2.2). Without KIP-101 there is no epoch to check divergence by."""
        log = self.log
        last_epoch = log.epochs.latest_epoch if self.config.variants.kip101 else -1
        # the last request, if nothing it carries has moved (compared field
        # by field: a key tuple built per call cost four boxed ints and a tuple)
        cached = self._fetch_req
        if (cached is not None and cached.fetch_offset == log.leo and cached.current_leader_epoch == self.leader_epoch
                and cached.last_fetched_epoch == last_epoch and cached.log_start_offset == log.log_start_offset):
            return cached
        req = FetchPartitionRequest(
            tp=self.tp,
            fetch_offset=log.leo,
            current_leader_epoch=self.leader_epoch,
            last_fetched_epoch=last_epoch,
            log_start_offset=log.log_start_offset,
            max_bytes=self.config.replica_fetch_max_bytes,
        )
        self._fetch_req = req
        return req

    def truncation_offset(self, leader_epoch: int, leader_end: int) -> int:
        """Where to truncate given the leader's (epoch, end offset) for our
        last epoch (AbstractFetcherThread.getOffsetTruncationState)."""
        leo = self.log.leo
        if leader_end == UNDEFINED_EPOCH_OFFSET:
            return self.log.hw
        if leader_epoch == UNDEFINED_EPOCH:
            return min(leader_end, leo)
        f_epoch, f_end = self.log.end_offset_for_epoch(leader_epoch)
        if f_epoch == UNDEFINED_EPOCH:
            return min(leader_end, leo)
        if f_epoch != leader_epoch:
            # we never saw the leader's epoch: cut to the end of our own
            # largest epoch below it; the next fetch checks again
            return min(f_end, leo)
        return min(leader_end, f_end, leo)

    def handle_fetch_response(self, resp: FetchPartitionResponse, now: int) -> tuple[list[Effect], str | None]:
        """Apply one partition of a fetch response on the follower.

        Returns (effects, follow_up) where follow_up is None, ``"offsets_for_leader_epoch"``
        (ask the leader for the end of its current epoch) or ``"backoff"``.
        """
        effects: list[Effect] = []
        return effects, self.handle_fetch_response_into(resp, now, effects)

    def handle_fetch_response_into(self, resp: FetchPartitionResponse, now: int, effects: list[Effect]) -> str | None:
        """:meth:`handle_fetch_response`, its effects appended to ``effects``
        (the fetcher's, for the whole response); returns the follow-up.
        Every partition of every replica fetch answered: no list and no
        tuple made per partition."""
        if self.role != FOLLOWER:
            return None
        if resp.error == Errors.NONE:
            if resp.diverging_epoch is not None:
                epoch, end = resp.diverging_epoch
                effects += self._truncate(self.truncation_offset(epoch, end), "diverging-epoch")
                return None
            leo = self.log.leo
            batches = resp.batches
            fresh = batches if batches and batches[0].base_offset == leo else tuple(
                b for b in batches if b.base_offset + b.count > leo
            )
            if fresh:
                first = fresh[0]
                if first.base_offset > self.log.leo:
                    # the leader's log starts past ours (Kafka's truncateFullyAndStartAt)
                    effects += self._truncate_fully(first.base_offset)
                elif first.base_offset < self.log.leo:
                    # our last batch ends inside one of the leader's: it diverged
                    # mid-batch. Cut back to a batch boundary; if that is not the
                    # leader's boundary the next fetch (from the new LEO) retries.
                    effects += self._truncate(first.base_offset, "diverging-epoch")
                    if self.log.leo != first.base_offset:
                        return None
                self.log.append_as_follower_into(fresh, effects)
                for b in fresh:
                    self.producers.record(b)
                last = fresh[-1]
                effects.append(self._append_trace(first.base_offset, last.next_offset - first.base_offset,
                                                  last.leader_epoch, epoch_runs_if_several(fresh), FOLLOWER))
            if resp.high_watermark >= 0 and self.log.set_follower_hw(resp.high_watermark):
                effects.append(self._hw_trace())
            return None
        if resp.error == Errors.OFFSET_OUT_OF_RANGE:
            if resp.log_start_offset > self.log.leo:
                # behind the leader's log start: restart our log there
                effects += self._truncate_fully(resp.log_start_offset)
                return None
            self.fetch_state = TRUNCATING
            self.truncation_request_at = now
            return "offsets_for_leader_epoch"
        if resp.error == Errors.FENCED_LEADER_EPOCH:
            # the leader is in a newer epoch than we know: wait for metadata
            self.fetch_state = FENCED
            return None
        self.fetch_backoff_until = now + self.config.replica_fetch_backoff_ms
        return "backoff"

    def handle_offset_for_leader_epoch_response(self, error: int, epoch: int, end_offset: int, now: int) -> list[Effect]:
        """Truncate to the leader's answer, then resume fetching."""
        if self.role != FOLLOWER or self.fetch_state != TRUNCATING:
            return []
        if error != Errors.NONE:
            self.fetch_state = FETCHING
            self.fetch_backoff_until = now + self.config.replica_fetch_backoff_ms
            return []
        self.fetch_state = FETCHING
        # asked for the leader's current epoch: its end is the leader's LEO,
        # and a log longer than the leader's is cut back to it (Kafka's
        # handleOutOfRangeError, e.g. after an unclean election)
        target = self.log.hw if end_offset == UNDEFINED_EPOCH_OFFSET else min(end_offset, self.log.leo)
        return self._truncate(target, "diverging-epoch")


__all__ = ["Partition", "PartitionContext", "ReplicaState", "IsrState", "NEVER", "LEADER", "FOLLOWER", "NONE",
           "FETCHING", "TRUNCATING", "FENCED"]
