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
* **Atomic batches.** The records of one :meth:`RaftReplica.append` are
  one batch (Kafka's atomic append; the controller appends a CreateTopics
  so): a fetch answer never ends inside a batch (it stops before it, or
  takes the whole first batch whatever the entry limit), so a fetcher's
  offset, and the high watermark with it, falls between batches, and a
  batch commits whole or not at all. A restarted replica drops a tail batch
  its crash cut short (never fsynced, so never acknowledged).
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
  controller stops acting as the active controller. It resigns as a
  controlled shutdown does, with ``EndQuorumEpochRequest`` to the other
  voters, so those it still reaches (a leader resigned by a wall-clock jump
  reaches all) elect a successor at once rather than after their fetch timeout.
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

Structure: the quorum states and the moves allowed between them are a
table in :mod:`.state`; :class:`~.member.QuorumMember` holds the member's
state and makes those moves (persisting, tracing, arming timers);
:class:`RaftReplica`, built on it, handles the messages and timers.

The replica restarts from :class:`~.storage.StoredState`: the metadata log
(``logs[METADATA_LOG]``, entries are :class:`MetadataEntry`) and the quorum
state file (``files[QUORUM_STATE]``). The high watermark is not persisted: a
restarted replica learns it again from the leader and re-delivers committed
entries from offset 0, which rebuilds the metadata image from the log.
"""

from __future__ import annotations

from typing import Any, Final, Iterable

from ..effects import Effect, Send, Timer
from ..errors import UnroutableMessage
from ..messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    Errors,
    MetadataEntry,
    MetadataRecord,
    NodeId,
    RaftFetchRequest,
    RaftFetchResponse,
    VoteRequest,
    VoteResponse,
)
from .member import Parked, QuorumMember, Rng
from .state import CANDIDATE, FOLLOWER, LEADER, OBSERVER, PROSPECTIVE, RESIGNED, UNATTACHED, VOTED

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


def _least(xs: list[int]) -> int:
    """``min(xs)`` of a non-empty list, as a native loop: compiled, ``min``
    is looked up on the builtins module and called generically (the raft
    client asks for its next deadline after every call)."""
    m = xs[0]
    for x in xs:
        if x < m:
            m = x
    return m


class RaftReplica(QuorumMember):
    """One member (voter or observer) of the KRaft quorum: its message
    handling and timers. See the module docstring."""

    # ------------------------------------------------------------------
    # entry points
    # ------------------------------------------------------------------

    def start(self, now: int, mono: int | None = None) -> list[Effect]:
        """Begin after a (re)start: resume the persisted epoch in a non-leader role.

        A replica that was leader before the restart cannot lead that epoch
        again (its volatile replication state is gone); it waits as a follower
        without a leader and takes part in the next election.
        """
        self._clock(now, mono)
        self._timer_now = now
        out: list[Effect] = self._torn_tail_effects()
        if self.observer:
            self.quorum.initialize(self._settled_state())
            self.role = self.quorum.role
            self._next_fetch_at = now
            self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
        else:
            resigned = self.leader_id == self.node_id
            if resigned:
                self.leader_id = NO_LEADER
            # Kafka's QuorumState.initialize: a leader before the restart resigned
            self.quorum.initialize(RESIGNED if resigned else self._settled_state())
            self.role = self.quorum.role
            if self.leader_id != NO_LEADER:
                self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
                self._next_fetch_at = now
            else:
                self._reset_election_timer(now)
            if len(self.voters) == 1:
                out += self._start_prevote(now)  # a quorum of one: pre-vote, candidate and leader at once
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
                out += self._become_unattached(self.epoch, now, to=PROSPECTIVE)
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
                self._set_state(UNATTACHED)
                self._inflight = None
                self._next_fetch_at = now
                self._fetch_deadline = now + self.config.controller_quorum_fetch_timeout_ms
                out.append(self._trace_state())
            out += self._maybe_fetch(now)
        return self._finish(out)

    def append(self, records: Iterable[MetadataRecord], now: int | None = None) -> tuple[MetadataEntry, ...]:
        """Leader only: append records in the current epoch, as one atomic
        batch (Kafka's RaftClient.prepareAppend): one LogAppend and one
        fsync, replicated and committed whole.

        Returns the new entries (their offsets are final unless this leader
        loses its epoch before they commit), or ``()`` when this replica is not
        the leader. The disk effects are collected by :meth:`drain_effects`.
        """
        if now is not None:
            self._now = max(self._now, now)
        if self.role != LEADER:
            return ()
        start = self.end_offset
        batch = list(records)
        last = len(batch) - 1
        entries = tuple(MetadataEntry(start + i, self.epoch, r, i == last) for i, r in enumerate(batch))
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
        return _least(cands) if cands else None

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
                if self.quorum.state == UNATTACHED:
                    self._set_state(VOTED)  # a prospective keeps its state, with the vote
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
        out += self._resign_and_end_epoch(now)
        return self._finish(out)

    def _resign_and_end_epoch(self, now: int) -> list[Effect]:
        """Resign and tell the other voters to elect now, the furthest
        caught-up first (Kafka 4.4 ``KafkaRaftClient.transitionToResigned``
        with ``nonLeaderVotersByDescendingFetchOffset``, then
        ``pollResigned`` sends EndQuorumEpoch: KafkaRaftClient.java:751-757,
        3143-3148 by kafka-raft 4.4.0's line table). A voter that hears it
        stands after a short rank-ordered backoff instead of waiting out its
        fetch timeout."""
        successors = tuple(sorted((v for v in self.voters if v != self.node_id), key=lambda v: -self._voter_offsets.get(v, -1)))
        out: list[Effect] = [Send(v, EndQuorumEpochRequest(self.node_id, self.epoch, successors)) for v in successors]
        out += self._become_unattached(self.epoch, now, to=RESIGNED)
        return out

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
            self._parked[src] = Parked(req, src, self._mono + FETCH_MAX_WAIT_MS)
            return out
        self._parked.pop(src, None)
        out.append(self._fetch_answer(req, src))
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
            # Kafka 4.4 pollLeader: an expired check quorum resigns as a
            # controlled shutdown does, EndQuorumEpoch included
            # (KafkaRaftClient.java:3177-3179)
            out += self._resign_and_end_epoch(now)
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
        if self._prevotes is not None:
            self._set_state(FOLLOWER)  # a prospective whose leader answered
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


__all__ = ["RaftReplica", "Rng", "RAFT_MESSAGES", "FETCH_MAX_WAIT_MS", "FETCH_RESEND_MS", "RETRY_BACKOFF_MS",
           "LEADER", "CANDIDATE", "FOLLOWER", "OBSERVER"]
