"""The KRaft quorum: one replica of the ``__cluster_metadata`` log, sans-IO.

Seed 004 ("Raft Consensus in KRaft") is the rule book. A :class:`RaftReplica`
is either a *voter* (a controller: it votes, can be elected, and its fetch
offset counts towards the high watermark) or an *observer* (a broker: it
fetches the log exactly like a follower but never votes and never counts).

What is implemented, with the rule each piece enforces:

* **Epochs.** Any message carrying a higher epoch makes a replica adopt it and
  drop whatever role it had (seed 004, "Terms (Epochs in KRaft)"). Requests
  with a lower epoch are answered with ``FENCED_EPOCH`` and the current
  ``(leader_id, epoch)`` so the sender catches up.
* **Votes.** A voter grants at most one vote per epoch and only to a candidate
  whose log is at least as up to date: ``(last_offset_epoch, last_offset)``
  compared lexicographically. The vote is persisted — ``FileWrite(QUORUM_STATE)``
  then ``Fsync`` — *before* the ``VoteResponse`` is sent, so a restart cannot
  make a voter vote twice in one epoch.
* **Elections.** Followers time out after ``controller_quorum_fetch_timeout_ms``
  without a successful fetch; replicas with no leader after a randomised
  election timeout in ``[election_timeout, 2 * election_timeout)`` drawn from
  the injected ``rng``; either first runs a pre-vote (below). A candidate bumps the epoch, votes for itself and asks
  the other voters; a majority makes it leader. The new leader announces
  itself with ``BeginQuorumEpochRequest`` and appends a :class:`NoOpRecord`
  in its epoch.
* **Pull replication.** Followers and observers send ``RaftFetchRequest``
  (fetch offset = their log end offset, plus the epoch of their last entry).
  The leader validates the pair against its own epoch history: if the
  fetcher's log diverges it answers ``diverging_epoch = (epoch, end_offset)``
  and the fetcher truncates to ``min(end_offset, its own end of that epoch)``
  (the KIP-101/KIP-595 rule). Otherwise it answers with entries and its high
  watermark. Truncating below the fetcher's own high watermark would remove
  committed entries, which a correct quorum never asks for (Leader
  Completeness): as Kafka's Raft client and metadata log do, the replica
  refuses with an exception (``RuntimeError``) instead, which the runtimes
  record as a node crash, a finding. A fetch with nothing new is parked for up to
  :data:`FETCH_MAX_WAIT_MS` and answered as soon as data or the HW changes.
* **Clocks.** Every Raft timer (election, fetch timeout, check quorum,
  BeginQuorumEpoch resend, fetch resend and backoff) reads the wall clock
  ``now``, as Kafka's ``KafkaRaftClient.poll`` reads ``time.milliseconds()``;
  the parked fetch alone expires on the monotonic clock ``mono``, as Kafka's
  fetch purgatory does (``ThresholdPurgatory`` on a ``SystemTimer``,
  ``hiResClockMs``). Kafka's Raft timers belong to the state object (follower,
  leader, candidate) that made them, and a ``Timer`` never moves backwards
  (``Timer.update`` keeps the larger time): a timer reset after a backward
  jump counts from the latest wall time its state has seen. The replica keeps
  that time (``_timer_now``, restarted at every state change) and resets the
  long-lived timers (a follower's fetch timeout, the leader's check quorum and
  BeginQuorumEpoch resend) from it. docs/architecture.md, "Clocks".
* **Commit.** A voter appends fetched entries with ``LogAppend`` + ``Fsync``
  before it sends its next fetch, so a fetch offset is a durable
  acknowledgement. The leader's high watermark is the largest offset held by a
  majority of voters, and it only advances over an entry of the leader's
  *current* epoch (the Raft commitment rule; the NoOp makes that possible
  right after an election).
* **Pre-vote** (KIP-996). Before bumping its epoch a replica asks the voters
  whether they would vote for it; a voter that still hears from a leader
  says no, and nobody changes state. A voter cut off from the quorum thus
  cannot force a leader change when it comes back. A voter stuck in a higher
  epoch (from an election it lost) is found by the leader re-announcing
  itself with ``BeginQuorumEpochRequest`` to voters that went quiet.
* **Check quorum.** A leader that has not heard from a majority of voters for
  ``1.5 * controller_quorum_fetch_timeout_ms`` resigns, so a partitioned
  controller stops acting as the active controller.
* **Observers** learn the leader from any voter: every fetch answer carries
  ``leader_id`` and ``epoch``. With no leader known an observer tries the
  voters in turn.

Only committed entries (below the high watermark) are handed upward, in order,
through :meth:`RaftReplica.take_committed`.

API (what ``core/node.py`` and :mod:`.controller` call)::

    raft = RaftReplica(node_id, voters, stored, config, rng, observer=False)
    raft.start(now, mono)            -> list[Effect]   # once, after (re)start
    raft.handle(msg, now, src, mono) -> list[Effect]   # msg one of RAFT_MESSAGES
    raft.tick(now, mono)             -> list[Effect]   # whenever a Timer fires
    # mono: the monotonic clock (None: the same as now)
    raft.append(records)       -> tuple[MetadataEntry, ...]  # leader only; () = refused
    raft.drain_effects()       -> list[Effect]   # effects produced by append()
    raft.take_committed()      -> list[MetadataEntry]  # newly committed since last call
    raft.leader_id, raft.epoch, raft.is_leader, raft.role, raft.high_watermark,
    raft.end_offset, raft.epoch_start_offset

``append`` returns its effects through :meth:`drain_effects` (``handle`` and
``tick`` also prepend anything pending), because the caller is usually in the
middle of handling some other message. Every returned effect list ends with a
``Timer`` for the replica's next deadline.

The replica restarts from :class:`~.storage.StoredState`: the metadata log
(``logs[METADATA_LOG]``, entries are :class:`MetadataEntry`) and the quorum
state file (``files[QUORUM_STATE]``). The high watermark is not persisted: a
restarted replica learns it again from the leader and re-delivers committed
entries from offset 0, which rebuilds the metadata image from the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Iterable, Protocol

from ..config import ProtocolConfig
from ..effects import Effect, FileWrite, Fsync, LogAppend, LogTruncate, Send, Timer, TraceEvent
from ..messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    Errors,
    MetadataEntry,
    MetadataRecord,
    NodeId,
    NoOpRecord,
    RaftFetchRequest,
    RaftFetchResponse,
    VoteRequest,
    VoteResponse,
)
from ..errors import CommittedTruncation, UnroutableMessage
from ..storage import METADATA_LOG, QUORUM_STATE, QuorumState, StoredState

#: the messages :meth:`RaftReplica.handle` accepts
RAFT_MESSAGES: Final = (
    VoteRequest,
    VoteResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    RaftFetchRequest,
    RaftFetchResponse,
)

#: how long the leader parks a fetch that has nothing new (KRaft's fetch max wait)
FETCH_MAX_WAIT_MS: Final = 500
#: a fetch with no answer after this long is sent again (lost request or
#: response), judged on the wall clock from its send, as Kafka's
#: ``RequestManager.ConnectionState.hasRequestTimedOut`` judges it with the
#: ``time.milliseconds()`` of ``KafkaRaftClient.poll`` (Kafka's
#: ``controller.quorum.request.timeout.ms`` is 2 s)
FETCH_RESEND_MS: Final = FETCH_MAX_WAIT_MS + 500
#: pause before retrying after an error answer
RETRY_BACKOFF_MS: Final = 50

LEADER: Final = "leader"
CANDIDATE: Final = "candidate"
FOLLOWER: Final = "follower"
OBSERVER: Final = "observer"


class Rng(Protocol):
    """The randomness the core takes (``random.Random`` has it): injected, so a
    seed replays, and never the module-level generator (sans-IO)."""

    def random(self) -> float: ...

    def randint(self, a: int, b: int) -> int: ...


@dataclass
class _Parked:
    req: RaftFetchRequest
    src: NodeId
    #: on the monotonic clock (Kafka's fetch purgatory runs on a SystemTimer)
    deadline: int


class RaftReplica:
    """One member (voter or observer) of the KRaft quorum. See the module docstring."""

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
        self.role: str = OBSERVER if self.observer else FOLLOWER

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
        self._parked: dict[NodeId, _Parked] = {}
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
    # entry points
    # ------------------------------------------------------------------

    def _clock(self, now: int, mono: int | None) -> None:
        self._now = now
        if now > self._timer_now:
            self._timer_now = now
        self._mono = now if mono is None else mono
        self._skew = now - self._mono

    def start(self, now: int, mono: int | None = None) -> list[Effect]:
        """Begin after a (re)start: resume the persisted epoch in a non-leader role.

        A replica that was leader before the restart cannot lead that epoch
        again (its volatile replication state is gone); it waits as a follower
        without a leader and takes part in the next election.
        """
        self._clock(now, mono)
        self._timer_now = now
        out: list[Effect] = []
        if self.observer:
            self.role = OBSERVER
            self._next_fetch_at = now
            self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
        else:
            if self.leader_id == self.node_id:
                self.leader_id = NO_LEADER
            self.role = FOLLOWER
            if self.leader_id != NO_LEADER:
                self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
                self._next_fetch_at = now
            else:
                self._reset_election_timer(now)
            if len(self.voters) == 1:
                out += self._become_candidate(now)
        out.append(self._trace_state())
        return self._finish(out)

    def handle(self, msg: Any, now: int, src: NodeId | None = None, mono: int | None = None) -> list[Effect]:
        self._clock(now, mono)
        out: list[Effect] = []
        if isinstance(msg, VoteRequest):
            out += self._on_vote_request(msg, now)
        elif isinstance(msg, VoteResponse):
            out += self._on_vote_response(msg, now)
        elif isinstance(msg, BeginQuorumEpochRequest):
            out += self._on_begin_epoch(msg, now)
        elif isinstance(msg, BeginQuorumEpochResponse):
            out += self._on_begin_epoch_response(msg, now)
        elif isinstance(msg, EndQuorumEpochRequest):
            out += self._on_end_epoch(msg, now)
        elif isinstance(msg, RaftFetchRequest):
            out += self._on_fetch_request(msg, now, msg.replica_id if src is None else src)
        elif isinstance(msg, RaftFetchResponse):
            out += self._on_fetch_response(msg, now, src)
        else:
            raise UnroutableMessage(f"RaftReplica cannot handle {type(msg).__name__}")
        return self._finish(out)

    def tick(self, now: int, mono: int | None = None) -> list[Effect]:
        self._clock(now, mono)
        out: list[Effect] = []
        if self.role == LEADER:
            out += self._leader_tick(now)
        elif self.role == CANDIDATE:
            if self._election_deadline is not None and now >= self._election_deadline:
                # lost or split election: back to asking before bumping the epoch again
                out += self._become_unattached(self.epoch, now)
                out += self._start_prevote(now)
        elif self.role == FOLLOWER:
            if self._prevotes is not None:
                if self._election_deadline is not None and now >= self._election_deadline:
                    out += self._start_prevote(now)
            elif self.leader_id == NO_LEADER:
                if self._election_deadline is not None and now >= self._election_deadline:
                    out += self._start_prevote(now)
            elif self._fetch_deadline is not None and now >= self._fetch_deadline:
                # seed 004: no word from the leader within the fetch timeout -> election
                out += self._start_prevote(now)
            if self.role == FOLLOWER and self.leader_id != NO_LEADER:
                out += self._maybe_fetch(now)
        else:  # observer
            if self._fetch_deadline is not None and now >= self._fetch_deadline:
                self.leader_id = NO_LEADER
                self._inflight = None
                self._next_fetch_at = now
                self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
                out.append(self._trace_state())
            out += self._maybe_fetch(now)
        return self._finish(out)

    def append(self, records: Iterable[MetadataRecord], now: int | None = None) -> tuple[MetadataEntry, ...]:
        """Leader only: append records in the current epoch.

        Returns the new entries (their offsets are final unless this leader
        loses its epoch before they commit), or ``()`` when this replica is not
        the leader. The disk effects are collected by :meth:`drain_effects`.
        """
        if now is not None:
            self._now = max(self._now, now)
        if self.role != LEADER:
            return ()
        start = self.end_offset
        entries = tuple(MetadataEntry(start + i, self.epoch, r) for i, r in enumerate(records))
        if not entries:
            return ()
        self._append_local(entries, self._outbox)
        self._voter_offsets[self.node_id] = self.end_offset
        self._outbox += self._leader_advance_hw(self._now)
        self._outbox += self._complete_parked(force=True)
        return entries

    def drain_effects(self) -> list[Effect]:
        out, self._outbox = self._outbox, []
        return out

    def take_committed(self) -> list[MetadataEntry]:
        """Entries that became committed since the last call, in offset order."""
        out, self._committed = self._committed, []
        return out

    def next_deadline(self) -> int | None:
        cands: list[int] = []
        if self.role == LEADER:
            cands += [p.deadline + self._skew for p in self._parked.values()]
            if self._begin_resend_at is not None:
                cands.append(self._begin_resend_at)
            cands.append(self._now + self.config.controller_quorum_fetch_timeout_ms // 2)
        elif self.role == CANDIDATE:
            if self._election_deadline is not None:
                cands.append(self._election_deadline)
        else:
            if self.role == FOLLOWER and (self.leader_id == NO_LEADER or self._prevotes is not None):
                if self._election_deadline is not None:
                    cands.append(self._election_deadline)
            if self.leader_id != NO_LEADER or self.role == OBSERVER:
                if self._fetch_deadline is not None and self._prevotes is None:
                    cands.append(self._fetch_deadline)
                if self._inflight is not None:
                    cands.append(self._inflight[1] + FETCH_RESEND_MS)
                elif self._next_fetch_at is not None:
                    cands.append(self._next_fetch_at)
        return min(cands) if cands else None

    # ------------------------------------------------------------------
    # log helpers
    # ------------------------------------------------------------------

    def _check_contiguous(self) -> None:
        for i, e in enumerate(self.log):
            if e.offset != self.log_start + i:
                # a torn tail: keep the contiguous prefix only
                del self.log[i:]
                return

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
    # state transitions
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

    def _become_unattached(self, epoch: int, now: int, leader: NodeId = NO_LEADER) -> list[Effect]:
        """Adopt ``epoch`` (>= current) without a vote; follow ``leader`` if known."""
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
        if self.observer:
            self.role = OBSERVER
            self._next_fetch_at = now
            self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
        else:
            self.role = FOLLOWER
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
        when it comes back. Nothing is persisted and no epoch changes."""
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
        self.role = CANDIDATE
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
        self.role = LEADER
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
    # votes
    # ------------------------------------------------------------------

    def _on_vote_request(self, req: VoteRequest, now: int) -> list[Effect]:
        out: list[Effect] = []
        if self.observer or req.candidate_id not in self.voters:
            out.append(Send(req.candidate_id, VoteResponse(self.node_id, Errors.INVALID_REQUEST, self.epoch, self.leader_id, False)))
            return out
        if req.pre_vote:
            return self._on_prevote_request(req, now)
        if req.candidate_epoch < self.epoch:
            out.append(Send(req.candidate_id, VoteResponse(self.node_id, Errors.FENCED_EPOCH, self.epoch, self.leader_id, False)))
            return out
        if req.candidate_epoch > self.epoch:
            out += self._become_unattached(req.candidate_epoch, now)
        # one vote per epoch, none once a leader is known in this epoch, and
        # only for a log at least as up to date as ours (seed 004)
        log_ok = (req.last_offset_epoch, req.last_offset) >= (self.last_epoch, self.end_offset)
        free = self.voted_for in (-1, req.candidate_id) and self.leader_id == NO_LEADER
        grant = log_ok and free and self.role == FOLLOWER
        if grant:
            if self.voted_for != req.candidate_id:
                self.voted_for = req.candidate_id
                self._persist(out)  # FileWrite + Fsync precede the response
            self._reset_election_timer(now)
        out.append(Send(req.candidate_id, VoteResponse(self.node_id, Errors.NONE, self.epoch, self.leader_id, grant)))
        return out

    def _on_prevote_request(self, req: VoteRequest, now: int) -> list[Effect]:
        """Answer a pre-vote without changing any state (KIP-996)."""
        # the prospective candidate's own epoch is candidate_epoch - 1
        stale = req.candidate_epoch - 1 < self.epoch
        log_ok = (req.last_offset_epoch, req.last_offset) >= (self.last_epoch, self.end_offset)
        leader_alive = self.role == LEADER or (
            self.role == FOLLOWER
            and self.leader_id != NO_LEADER
            and self._fetch_deadline is not None
            and now < self._fetch_deadline
        )
        grant = not stale and log_ok and not leader_alive
        err = Errors.FENCED_EPOCH if stale else Errors.NONE
        return [Send(req.candidate_id, VoteResponse(self.node_id, err, self.epoch, self.leader_id, grant, pre_vote=True))]

    def _on_vote_response(self, resp: VoteResponse, now: int) -> list[Effect]:
        out: list[Effect] = []
        if resp.epoch > self.epoch:
            leader = resp.leader_id if resp.leader_id != self.node_id else NO_LEADER
            return self._become_unattached(resp.epoch, now, leader)
        if resp.pre_vote:
            if self._prevotes is not None and self.role == FOLLOWER and resp.epoch == self.epoch and resp.vote_granted:
                self._prevotes.add(resp.voter_id)
                if len(self._prevotes) >= self.majority:
                    out += self._become_candidate(now)
            return out
        if self.role != CANDIDATE or resp.epoch != self.epoch:
            return out
        if resp.vote_granted and resp.voter_id in self.voters:
            self._votes.add(resp.voter_id)
            if len(self._votes) >= self.majority:
                out += self._become_leader(now)
        return out

    # ------------------------------------------------------------------
    # BeginQuorumEpoch / EndQuorumEpoch
    # ------------------------------------------------------------------

    def _on_begin_epoch(self, req: BeginQuorumEpochRequest, now: int) -> list[Effect]:
        out: list[Effect] = []
        if req.leader_epoch < self.epoch:
            out.append(Send(req.leader_id, BeginQuorumEpochResponse(self.node_id, Errors.FENCED_EPOCH, self.epoch, self.leader_id)))
            return out
        if req.leader_epoch > self.epoch or (self.leader_id == NO_LEADER and self.role != LEADER):
            out += self._become_unattached(req.leader_epoch, now, req.leader_id)
        elif self.leader_id == req.leader_id and self.role in (FOLLOWER, OBSERVER):
            self._fetch_deadline = self._timer_now + self.config.controller_quorum_fetch_timeout_ms
        out.append(Send(req.leader_id, BeginQuorumEpochResponse(self.node_id, Errors.NONE, self.epoch, self.leader_id)))
        return out

    def _on_begin_epoch_response(self, resp: BeginQuorumEpochResponse, now: int) -> list[Effect]:
        if resp.epoch > self.epoch:
            return self._become_unattached(resp.epoch, now, resp.leader_id if resp.leader_id != self.node_id else NO_LEADER)
        if self.role == LEADER and resp.epoch == self.epoch and resp.error == Errors.NONE:
            self._begin_acked.add(resp.voter_id)
        return []

    def _on_end_epoch(self, req: EndQuorumEpochRequest, now: int) -> list[Effect]:
        """The leader resigned gracefully: stand for election soon, preferred successors first."""
        if req.leader_epoch != self.epoch or req.leader_id != self.leader_id or self.role == LEADER:
            return []
        out = self._become_unattached(self.epoch, now) if not self.observer else []
        if not self.observer:
            self.leader_id = NO_LEADER
            rank = req.preferred_successors.index(self.node_id) if self.node_id in req.preferred_successors else len(self.voters)
            self._election_deadline = now + rank * 50 + self.rng.randint(0, 50)
        return out

    def resign(self, now: int, mono: int | None = None) -> list[Effect]:
        """Leader stepping down (controlled shutdown): tell the voters to elect now."""
        self._clock(now, mono)
        out: list[Effect] = []
        if self.role != LEADER:
            return self._finish(out)
        successors = tuple(sorted((v for v in self.voters if v != self.node_id), key=lambda v: -self._voter_offsets.get(v, -1)))
        for v in successors:
            out.append(Send(v, EndQuorumEpochRequest(self.node_id, self.epoch, successors)))
        out += self._become_unattached(self.epoch, now)
        return self._finish(out)

    # ------------------------------------------------------------------
    # fetch: leader side
    # ------------------------------------------------------------------

    def _fetch_error(self, req: RaftFetchRequest, dst: NodeId, error: int) -> Send:
        return Send(dst, RaftFetchResponse(self.leader_id, self.epoch, error, req.correlation_id, self.high_watermark))

    def _on_fetch_request(self, req: RaftFetchRequest, now: int, src: NodeId) -> list[Effect]:
        out: list[Effect] = []
        if req.epoch > self.epoch and req.replica_id in self.voters and not self.observer:
            out += self._become_unattached(req.epoch, now)
        if req.epoch < self.epoch:
            out.append(self._fetch_error(req, src, Errors.FENCED_EPOCH))
            return out
        if self.role != LEADER or req.epoch > self.epoch:
            out.append(self._fetch_error(req, src, Errors.NOT_LEADER_OR_FOLLOWER))
            return out
        is_voter = req.replica_id in self.voters
        if is_voter:
            self._last_heard[req.replica_id] = self._timer_now  # check quorum: never backwards
            self._begin_acked.add(req.replica_id)
        # divergence check against our epoch history (KIP-595 fetch validation)
        if req.fetch_offset > self.log_start or req.last_fetched_epoch >= 0:
            ep, end = self.end_offset_for_epoch(req.last_fetched_epoch)
            if ep != req.last_fetched_epoch or end < req.fetch_offset:
                out.append(
                    Send(
                        src,
                        RaftFetchResponse(
                            self.node_id, self.epoch, Errors.NONE, req.correlation_id, self.high_watermark,
                            diverging_epoch=(ep, end),
                        ),
                    )
                )
                return out
        if is_voter and req.fetch_offset > self._voter_offsets.get(req.replica_id, -1):
            self._voter_offsets[req.replica_id] = req.fetch_offset
            out += self._leader_advance_hw(now)
        if req.fetch_offset >= self.end_offset and self._hw_sent.get(src) == self.high_watermark:
            # nothing new to say: park until data arrives or the HW moves
            self._parked[src] = _Parked(req, src, self._mono + FETCH_MAX_WAIT_MS)
            return out
        self._parked.pop(src, None)
        out.append(self._fetch_answer(req, src))
        return out

    def _fetch_answer(self, req: RaftFetchRequest, dst: NodeId) -> Send:
        lo = max(req.fetch_offset, self.log_start) - self.log_start
        entries = tuple(self.log[lo : lo + max(req.max_entries, 1)])
        self._hw_sent[dst] = self.high_watermark
        return Send(dst, RaftFetchResponse(self.node_id, self.epoch, Errors.NONE, req.correlation_id, self.high_watermark, entries))

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

    def _leader_tick(self, now: int) -> list[Effect]:
        out: list[Effect] = []
        out += self._complete_parked(force=False)
        if self._begin_resend_at is not None and now >= self._begin_resend_at:
            # a voter that has gone quiet may be stuck in a higher epoch it
            # reached in a lost election (pre-votes keep it from disrupting us,
            # and it has no leader to fetch from): announcing ourselves again
            # lets it answer FENCED_EPOCH, and we step down so the quorum
            # moves past that epoch
            quiet = self.config.controller_quorum_fetch_timeout_ms // 2
            for v in self.voters:
                if v != self.node_id and now - self._last_heard.get(v, now) >= quiet:
                    self._begin_acked.discard(v)
            out += self._send_begin_epoch(now)
        # check quorum: resign when a majority has been silent too long
        limit = self.config.controller_quorum_fetch_timeout_ms * 3 // 2
        heard = sum(1 for v in self.voters if v == self.node_id or now - self._last_heard.get(v, now) < limit)
        if heard < self.majority:
            out += self._become_unattached(self.epoch, now)
        return out

    # ------------------------------------------------------------------
    # fetch: follower / observer side
    # ------------------------------------------------------------------

    def _fetch_target(self) -> NodeId | None:
        if self.leader_id != NO_LEADER:
            return self.leader_id
        if not self.observer:
            return None
        others = [v for v in self.voters if v != self.node_id]
        if not others:
            return None
        target = others[self._observer_probe % len(others)]
        self._observer_probe += 1
        return target

    def _maybe_fetch(self, now: int) -> list[Effect]:
        if self._inflight is not None:
            if now < self._inflight[1] + FETCH_RESEND_MS:
                return []
            self._inflight = None  # lost: send again
            self._next_fetch_at = now
        if self._next_fetch_at is None or now < self._next_fetch_at:
            return []
        dst = self._fetch_target()
        if dst is None or dst == self.node_id:
            return []
        self._corr += 1
        self._inflight = (self._corr, now, dst)
        self._next_fetch_at = None
        return [Send(dst, RaftFetchRequest(self.node_id, self.epoch, self.end_offset, self.last_epoch, self._corr))]

    def _on_fetch_response(self, resp: RaftFetchResponse, now: int, src: NodeId | None) -> list[Effect]:
        out: list[Effect] = []
        if self._inflight is None or resp.correlation_id != self._inflight[0]:
            # stale or duplicated; still learn a newer epoch from it
            if resp.epoch > self.epoch:
                out += self._become_unattached(resp.epoch, now, resp.leader_id)
            return out
        self._inflight = None
        if self.role in (LEADER, CANDIDATE) and resp.epoch <= self.epoch:
            return out
        if resp.epoch > self.epoch or (resp.epoch == self.epoch and resp.leader_id != self.leader_id and resp.leader_id != NO_LEADER):
            out += self._become_unattached(resp.epoch, now, resp.leader_id if resp.leader_id != self.node_id else NO_LEADER)
            return out
        if resp.error != Errors.NONE or src != self.leader_id or resp.leader_id != self.leader_id:
            self._next_fetch_at = now + RETRY_BACKOFF_MS
            return out
        # a good answer from the leader of our epoch: it is alive after all
        # (the fetch timer is the follower state's: never backwards)
        self._fetch_deadline = self._timer_now + self.config.controller_quorum_fetch_timeout_ms
        self._prevotes = None
        if resp.diverging_epoch is not None:
            ep, end = resp.diverging_epoch
            _lep, lend = self.end_offset_for_epoch(ep)
            self._truncate_to(min(end, lend), out, "diverging-epoch")
            self._next_fetch_at = now
            return out
        if resp.entries and resp.entries[0].offset == self.end_offset:
            self._append_local(tuple(resp.entries), out)  # fsynced before the next fetch acknowledges it
        if self._catchup_target is None:
            self._catchup_target = resp.high_watermark
        self._set_hw(min(resp.high_watermark, self.end_offset), out)
        if not self.caught_up and self.high_watermark >= self._catchup_target:
            self.caught_up = True
            self._deliver()
        self._next_fetch_at = now
        out += self._maybe_fetch(now)
        return out

    # ------------------------------------------------------------------

    def _finish(self, out: list[Effect]) -> list[Effect]:
        if self.role in (FOLLOWER, OBSERVER) and self.leader_id != NO_LEADER or (self.observer):
            out += self._maybe_fetch(self._now)
        effects = self.drain_effects() + out
        deadline = self.next_deadline()
        if deadline is not None:
            effects.append(Timer(max(deadline, self._now)))
        return effects
