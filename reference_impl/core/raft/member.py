"""A KRaft quorum member's state and its moves between quorum states.

:class:`QuorumMember` holds what a replica of ``__cluster_metadata`` knows
(epoch, vote, leader, the log and its epochs, the high watermark, the
leader's and the fetcher's bookkeeping) and makes the state changes: each
move between quorum states goes through the table of :mod:`.state`, with
its effects (persisting the election, the ``raft_state`` trace event,
timers, the new leader's NoOp). The message handling and the timers that
call these moves are :class:`~.replica.RaftReplica`'s, the class built on
this one (the rules are in :mod:`.replica`'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from ..config import ProtocolConfig
from ..effects import Effect, FileWrite, Fsync, LogAppend, LogTruncate, Send, TraceEvent
from ..errors import CommittedTruncation
from ..messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    Errors,
    MetadataEntry,
    NodeId,
    NoOpRecord,
    RaftFetchRequest,
    RaftFetchResponse,
    VoteRequest,
)
from ..storage import METADATA_LOG, QUORUM_STATE, QuorumState, StoredState
from .state import CANDIDATE, FOLLOWER, LEADER, PROSPECTIVE, UNATTACHED, VOTED, QuorumStateMachine


class Rng(Protocol):
    """The randomness the core takes (``random.Random`` has it): injected, so a
    seed replays, and never the module-level generator (sans-IO)."""

    def random(self) -> float: ...

    def randint(self, a: int, b: int) -> int: ...


@dataclass(init=False)
class Parked:
    """A fetch the leader holds until data or the HW moves."""

    req: RaftFetchRequest
    src: NodeId
    #: on the monotonic clock (Kafka's fetch purgatory runs on a SystemTimer)
    deadline: int

    # spelt out (init=False): a dataclass's generated __init__ stays
    # interpreted when compiled (a quorum leader parks most fetches)
    def __init__(self, req: RaftFetchRequest, src: NodeId, deadline: int) -> None:
        self.req = req
        self.src = src
        self.deadline = deadline


class QuorumMember:
    """The state of one member (voter or observer) of the KRaft quorum, and
    its transitions. See the module docstring."""

    def __init__(
        self,
        node_id: NodeId,
        voters: Iterable[NodeId],
        stored: StoredState | None,
        config: ProtocolConfig,
        rng: Rng,
        observer: bool = False,
    ) -> None:
        self.node_id = node_id
        self.voters: tuple[NodeId, ...] = tuple(sorted(set(voters)))
        if not self.voters:
            raise ValueError("a KRaft quorum needs at least one voter")
        self.observer = observer or node_id not in self.voters
        self.config = config
        self.rng = rng
        stored = stored or StoredState()

        # -- the log ----------------------------------------------------
        self.log_start: int = stored.log_start_offsets.get(METADATA_LOG, 0)
        self.log: list[MetadataEntry] = [e for e in stored.logs.get(METADATA_LOG, []) if isinstance(e, MetadataEntry)]
        #: (start, end) of an incomplete batch found at load (truncated at start)
        self._torn: tuple[int, int] | None = None
        self._check_contiguous()
        self._epochs: list[tuple[int, int]] = []  # (epoch, start offset), ascending
        self._rebuild_epochs()

        # -- quorum state -----------------------------------------------
        qs = stored.files.get(QUORUM_STATE)
        self.epoch: int = qs.epoch if isinstance(qs, QuorumState) else 0
        self.voted_for: NodeId = qs.voted_for if isinstance(qs, QuorumState) else -1
        self.leader_id: NodeId = qs.leader_id if isinstance(qs, QuorumState) else NO_LEADER
        if self.observer:
            self.voted_for = -1
        #: the quorum state (state.py's table) and the role it gives
        self.quorum = QuorumStateMachine(self.observer, self._settled_state())
        self.role: str = self.quorum.role

        self.high_watermark: int = self.log_start
        self._delivered: int = self.log_start  # next offset to hand upward
        #: after a (re)start nothing is handed upward until the log has reached
        #: the HW the leader first reported, so the metadata image jumps from
        #: empty to current instead of replaying stale intermediate states
        #: (Kafka's metadata loader waits for the initial catch-up the same way)
        self.caught_up: bool = False
        self._catchup_target: int | None = None
        self._committed: list[MetadataEntry] = []
        self._outbox: list[Effect] = []
        self._now: int = 0
        #: the monotonic clock of the current call, and wall minus monotonic
        #: (a parked fetch's deadline is monotonic, its Timer wall time)
        self._mono: int = 0
        self._skew: int = 0
        #: the time of this state's Kafka Timers: the largest wall time seen
        #: since the last state change (Timer.update never goes backwards)
        self._timer_now: int = 0

        # voter timers
        self._election_deadline: int | None = None
        self._fetch_deadline: int | None = None  # follower: last good fetch + fetch timeout
        # fetcher state (followers and observers)
        self._corr: int = 0
        self._inflight: tuple[int, int, NodeId] | None = None  # (correlation id, sent at, dst)
        self._next_fetch_at: int | None = None
        self._observer_probe: int = 0
        # candidate state
        self._votes: set[NodeId] = set()
        #: pre-vote round in progress (KIP-996): voters that said they would vote
        self._prevotes: set[NodeId] | None = None
        # leader state
        self.epoch_start_offset: int = -1
        self._voter_offsets: dict[NodeId, int] = {}
        self._last_heard: dict[NodeId, int] = {}
        self._begin_acked: set[NodeId] = set()
        self._begin_resend_at: int | None = None
        self._parked: dict[NodeId, Parked] = {}
        self._hw_sent: dict[NodeId, int] = {}  # the HW each fetcher last heard from us

    # ------------------------------------------------------------------
    # public properties
    # ------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    @property
    def end_offset(self) -> int:
        """Log end offset (the offset the next entry gets)."""
        return self.log_start + len(self.log)

    @property
    def last_epoch(self) -> int:
        return self.log[-1].epoch if self.log else -1

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    # ------------------------------------------------------------------
    # clocks and the log
    # ------------------------------------------------------------------

    def _clock(self, now: int, mono: int | None) -> None:
        self._now = now
        if now > self._timer_now:
            self._timer_now = now
        self._mono = now if mono is None else mono
        self._skew = now - self._mono

    def _check_contiguous(self) -> None:
        """Keep the log's contiguous prefix of whole batches: a torn tail
        (entries missing, or an atomic batch cut short by a crash before its
        fsync, so never acknowledged) goes; :meth:`_torn_tail_effects`
        removes it from the disk too."""
        for i, e in enumerate(self.log):
            if e.offset != self.log_start + i:
                del self.log[i:]
                break
        end = len(self.log)
        while end > 0 and not self.log[end - 1].ends_batch:
            end -= 1
        if end < len(self.log):
            self._torn = (self.log_start + end, self.log_start + len(self.log))
            del self.log[end:]

    def _torn_tail_effects(self) -> list[Effect]:
        """Truncate on disk the incomplete batch the load dropped (at start)."""
        if self._torn is None:
            return []
        (offset, leo_before), self._torn = self._torn, None
        return [LogTruncate(METADATA_LOG, offset), Fsync(METADATA_LOG),
                TraceEvent("raft_truncate", {"to": offset, "leo_before": leo_before,
                                             "high_watermark": self.high_watermark, "reason": "incomplete-batch"})]

    def _rebuild_epochs(self) -> None:
        self._epochs = []
        for e in self.log:
            if not self._epochs or self._epochs[-1][0] != e.epoch:
                self._epochs.append((e.epoch, e.offset))

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(largest epoch <= epoch, end offset of that epoch)`` in this log.

        The end offset of an epoch is the start offset of the next epoch, or
        the log end offset for the last one (Kafka's leader-epoch cache
        ``endOffsetFor``). ``(-1, log_start)`` when no such epoch exists.
        """
        found = -1
        end = self.log_start
        for i, (ep, _start) in enumerate(self._epochs):
            if ep <= epoch:
                found = ep
                end = self._epochs[i + 1][1] if i + 1 < len(self._epochs) else self.end_offset
            else:
                break
        return found, end

    def _append_local(self, entries: tuple[MetadataEntry, ...], out: list[Effect]) -> None:
        for e in entries:
            self.log.append(e)
            if not self._epochs or self._epochs[-1][0] != e.epoch:
                self._epochs.append((e.epoch, e.offset))
        out.append(LogAppend(METADATA_LOG, entries))
        out.append(Fsync(METADATA_LOG))

    def _truncate_to(self, offset: int, out: list[Effect], reason: str) -> None:
        if offset >= self.end_offset:
            return
        before = self.end_offset
        offset = max(offset, self.log_start)
        if offset < self.high_watermark:
            raise CommittedTruncation(
                f"{reason} truncation to offset {offset} is below the high watermark {self.high_watermark}: "
                f"it would remove committed metadata entries")
        del self.log[offset - self.log_start :]
        self._rebuild_epochs()
        out.append(LogTruncate(METADATA_LOG, offset))
        out.append(Fsync(METADATA_LOG))
        out.append(
            TraceEvent(
                "raft_truncate",
                {"to": offset, "leo_before": before, "high_watermark": self.high_watermark, "reason": reason},
            )
        )

    def _deliver(self) -> None:
        if not self.caught_up:
            return
        while self._delivered < self.high_watermark:
            self._committed.append(self.log[self._delivered - self.log_start])
            self._delivered += 1

    def _set_hw(self, hw: int, out: list[Effect]) -> None:
        hw = min(hw, self.end_offset)
        if hw <= self.high_watermark:
            return
        self.high_watermark = hw
        self._deliver()
        if not self.observer:
            out.append(TraceEvent("raft_commit", {"high_watermark": hw}))

    # ------------------------------------------------------------------
    # quorum state transitions
    # ------------------------------------------------------------------

    def _persist(self, out: list[Effect]) -> None:
        if self.observer:
            return
        out.append(FileWrite(QUORUM_STATE, QuorumState(self.epoch, self.voted_for, self.leader_id)))
        out.append(Fsync(QUORUM_STATE))

    def _trace_state(self) -> TraceEvent:
        return TraceEvent("raft_state", {"epoch": self.epoch, "role": self.role, "leader": self.leader_id})

    def _election_timeout(self) -> int:
        t = self.config.controller_quorum_election_timeout_ms
        return t + self.rng.randint(0, max(t - 1, 0))

    def _reset_election_timer(self, now: int) -> None:
        self._election_deadline = now + self._election_timeout()

    def _set_state(self, to: str) -> None:
        """Move the quorum state along state.py's table (IllegalStateTransition
        if it does not allow the move) and take the role it gives."""
        self.quorum.transition(to)
        self.role = self.quorum.role

    def _settled_state(self) -> str:
        """The quorum state the leader and vote make, for a member that is not
        leading, resigned or electing: following a known leader, else voted
        or unattached (an observer is never voted)."""
        if self.leader_id != NO_LEADER:
            return FOLLOWER
        return VOTED if self.voted_for != -1 and not self.observer else UNATTACHED

    def _clear_leader_state(self) -> list[Effect]:
        """Forget the leader's bookkeeping. Parked fetches are answered, not
        dropped: Kafka's KafkaRaftClient completes its fetch purgatory
        exceptionally (NOT_LEADER_OR_FOLLOWER) when it resigns or becomes a
        follower, so the fetchers send again at once instead of waiting for
        their own request timeout, which a backward jump of their wall clock
        can postpone for as long as the jump."""
        out: list[Effect] = [
            Send(p.src, RaftFetchResponse(NO_LEADER, self.epoch, Errors.NOT_LEADER_OR_FOLLOWER, p.req.correlation_id, self.high_watermark))
            for p in self._parked.values()
        ]
        self._parked.clear()
        self._hw_sent.clear()
        self._voter_offsets.clear()
        self._last_heard.clear()
        self._begin_acked.clear()
        self._begin_resend_at = None
        self.epoch_start_offset = -1
        return out

    def _become_unattached(self, epoch: int, now: int, leader: NodeId = NO_LEADER, to: str | None = None) -> list[Effect]:
        """Adopt ``epoch`` (>= current) without a vote; follow ``leader`` if
        known. The quorum state is ``to`` (a resignation, or a candidate's
        lost election going to pre-vote) or what the leader and vote make it."""
        out: list[Effect] = []
        changed_epoch = epoch > self.epoch
        was = (self.role, self.leader_id, self.epoch)
        out += self._clear_leader_state()  # answered in the epoch they were parked in
        if changed_epoch:
            self.epoch = epoch
            self.voted_for = -1
        self._votes.clear()
        self._prevotes = None
        self.leader_id = leader
        self._inflight = None
        self._timer_now = now  # a new state, new timers (they start at the wall clock)
        self._set_state(to if to is not None else self._settled_state())
        if self.observer:
            self._next_fetch_at = now
            self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
        else:
            if leader == NO_LEADER:
                self._reset_election_timer(now)
                self._next_fetch_at = None
            else:
                self._election_deadline = None
                self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
                self._next_fetch_at = now
        if changed_epoch or was[1] != self.leader_id:
            self._persist(out)
        if was != (self.role, self.leader_id, self.epoch):
            out.append(self._trace_state())
        return out

    def _start_prevote(self, now: int) -> list[Effect]:
        """KIP-996 pre-vote: ask the voters whether they *would* vote for us in
        the next epoch before bumping it. A voter that still hears from a
        leader says no, so a replica cut off from the quorum cannot disrupt it
        when it comes back. Nothing is persisted and no epoch changes. A
        round that timed out starts the next one in the same state."""
        if self.quorum.state != PROSPECTIVE:
            self._set_state(PROSPECTIVE)
        if len(self.voters) == 1:
            return self._become_candidate(now)
        self._prevotes = {self.node_id}
        self._timer_now = now
        backoff = self.rng.randint(0, self.config.controller_quorum_election_backoff_max_ms)
        self._election_deadline = now + self._election_timeout() + backoff
        req = VoteRequest(self.node_id, self.epoch + 1, self.last_epoch, self.end_offset, pre_vote=True)
        return [Send(v, req) for v in self.voters if v != self.node_id]

    def _become_candidate(self, now: int) -> list[Effect]:
        out: list[Effect] = self._clear_leader_state()
        self._prevotes = None
        self._set_state(CANDIDATE)
        self.epoch += 1
        self.voted_for = self.node_id
        self.leader_id = NO_LEADER
        self._votes = {self.node_id}
        self._inflight = None
        self._timer_now = now
        self._fetch_deadline = None
        backoff = self.rng.randint(0, self.config.controller_quorum_election_backoff_max_ms)
        self._election_deadline = now + self._election_timeout() + backoff
        self._persist(out)  # the self-vote is durable before anyone hears of it
        out.append(self._trace_state())
        req = VoteRequest(self.node_id, self.epoch, self.last_epoch, self.end_offset)
        for v in self.voters:
            if v != self.node_id:
                out.append(Send(v, req))
        if len(self._votes) >= self.majority:
            out += self._become_leader(now)
        return out

    def _become_leader(self, now: int) -> list[Effect]:
        out: list[Effect] = []
        self._set_state(LEADER)
        self.leader_id = self.node_id
        self._timer_now = now
        self._election_deadline = None
        self._fetch_deadline = None
        self._inflight = None
        self._voter_offsets = {v: -1 for v in self.voters}
        self._last_heard = {v: now for v in self.voters}
        self._begin_acked = {self.node_id}
        self.caught_up = True  # the leader's HW is the authority
        self._deliver()
        self._persist(out)
        out.append(self._trace_state())
        # seed 004: a new leader commits earlier epochs' entries only through an
        # entry of its own epoch, so it appends one straight away
        self.epoch_start_offset = self.end_offset
        self._append_local((MetadataEntry(self.end_offset, self.epoch, NoOpRecord()),), out)
        self._voter_offsets[self.node_id] = self.end_offset
        out += self._send_begin_epoch(now)
        out += self._leader_advance_hw(now)
        return out

    def _send_begin_epoch(self, now: int) -> list[Effect]:
        out: list[Effect] = []
        for v in self.voters:
            if v not in self._begin_acked:
                out.append(Send(v, BeginQuorumEpochRequest(self.node_id, self.epoch)))
        self._begin_resend_at = self._timer_now + self.config.controller_quorum_election_timeout_ms // 2
        return out

    # ------------------------------------------------------------------
    # the leader's answers and commit
    # ------------------------------------------------------------------

    def _fetch_answer(self, req: RaftFetchRequest, dst: NodeId) -> Send:
        lo = max(req.fetch_offset, self.log_start) - self.log_start
        log = self.log
        hi = min(lo + max(req.max_entries, 1), len(log))
        if hi > lo and not log[hi - 1].ends_batch:
            hi = self._batch_cut(lo, hi)
        entries = tuple(log[lo:hi])
        self._hw_sent[dst] = self.high_watermark
        return Send(dst, RaftFetchResponse(self.node_id, self.epoch, Errors.NONE, req.correlation_id, self.high_watermark, entries))

    def _batch_cut(self, lo: int, hi: int) -> int:
        """Where an answer from ``lo`` that the entry limit would end at
        ``hi``, inside an atomic batch, ends instead: before that batch, or,
        when it is the answer's first, after it (as Kafka's fetch returns at
        least one whole batch whatever its size limit). A follower thus only
        ever holds whole batches, and its fetch offset, the high watermark
        with it, only ever falls between two."""
        cut = hi
        while cut > lo and not self.log[cut - 1].ends_batch:
            cut -= 1
        if cut > lo:
            return cut
        while hi < len(self.log) and not self.log[hi - 1].ends_batch:
            hi += 1
        return hi

    def _complete_parked(self, force: bool) -> list[Effect]:
        """Answer the parked fetches: all of them (``force``: data or the HW
        moved) or those whose wait ran out on the monotonic clock."""
        out: list[Effect] = []
        mono = self._mono
        for src, p in list(self._parked.items()):
            if force or mono >= p.deadline:
                del self._parked[src]
                out.append(self._fetch_answer(p.req, src))
        return out

    def _leader_advance_hw(self, now: int) -> list[Effect]:
        out: list[Effect] = []
        if self.role != LEADER:
            return out
        offsets = sorted((self._voter_offsets.get(v, -1) for v in self.voters), reverse=True)
        candidate = offsets[self.majority - 1]
        # only an entry of the current epoch commits by counting replicas
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            before = self.high_watermark
            self._set_hw(candidate, out)
            if self.high_watermark != before:
                out += self._complete_parked(force=True)
        return out
