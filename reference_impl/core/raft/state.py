"""The quorum states of a KRaft replica and the moves allowed between them,
as a table apart from the replica's message handling (as h11 keeps its
connection states in ``_state.py``, apart from ``_connection.py``).

The states are Kafka 4.4's (raft/src/main/java/org/apache/kafka/raft/
QuorumState.java and its EpochState classes), with Kafka's Unattached split
in two, as before KIP-996 merged them:

* ``unattached`` — a voter that knows no leader and has not voted in its
  epoch; an observer that knows no leader;
* ``voted`` — a voter that knows no leader and has voted in its epoch
  (Kafka's Unattached with a voted key);
* ``prospective`` — a voter asking for pre-votes (KIP-996);
* ``candidate`` — a voter that bumped the epoch, voted for itself and asks
  for votes;
* ``leader``;
* ``follower`` — a voter or observer that knows the leader of its epoch;
* ``resigned`` — a former leader of the epoch (a graceful resignation, a
  check-quorum failure, or a restart after leading), which votes for no one
  else in the epoch.

A replica's ``role`` (the ``raft_state`` trace event's, what the rest of
the core reads) is coarser: ``leader``, ``candidate``, ``observer`` for an
observer, else ``follower``.

:data:`TRANSITIONS` is every move the reference implementation makes. Where
Kafka 4.4's QuorumState would not make the same move, the table says so;
the replica's behaviour is the protocol's, only the bookkeeping is named
here:

* ``follower -> voted/unattached`` in the same epoch: on the leader's
  EndQuorumEpoch a voter forgets the leader and stands for election after a
  backoff by rank (Kafka stays a follower with a shortened fetch timeout);
  an observer whose fetch timed out forgets the leader and probes the
  voters (Kafka's observer keeps fetching from the bootstrap servers);
* ``resigned -> prospective``: on its election timeout a resigned leader
  asks for pre-votes in its epoch (Kafka first moves to Unattached in the
  next epoch);
* ``prospective -> prospective`` is no move: a pre-vote round that timed
  out starts the next round in the same state.

An observer is only ever ``unattached`` or ``follower``. A move the table
does not allow raises :class:`~..errors.IllegalStateTransition`.
"""

from __future__ import annotations

from typing import Final

from ..errors import IllegalStateTransition

UNATTACHED: Final = "unattached"
VOTED: Final = "voted"
PROSPECTIVE: Final = "prospective"
CANDIDATE: Final = "candidate"
LEADER: Final = "leader"
FOLLOWER: Final = "follower"
RESIGNED: Final = "resigned"

#: the role of an observer (a state of a voter's role has the state's name,
#: or ``follower`` for every state but leader and candidate)
OBSERVER: Final = "observer"

STATES: Final = (UNATTACHED, VOTED, PROSPECTIVE, CANDIDATE, LEADER, FOLLOWER, RESIGNED)

#: state -> the states it may move to
TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    # a higher epoch; a vote granted; the election timeout; a leader found
    UNATTACHED: frozenset({UNATTACHED, VOTED, PROSPECTIVE, FOLLOWER}),
    # a higher epoch; the election timeout; a leader found
    VOTED: frozenset({UNATTACHED, PROSPECTIVE, FOLLOWER}),
    # a higher epoch or the leader's resignation; a majority of pre-votes; a leader alive or found
    PROSPECTIVE: frozenset({UNATTACHED, VOTED, CANDIDATE, FOLLOWER}),
    # a higher epoch; the election timeout (a lost or split vote); a majority; a leader found
    CANDIDATE: frozenset({UNATTACHED, PROSPECTIVE, LEADER, FOLLOWER}),
    # a higher epoch; resignation or a failed check quorum; a leader of a higher epoch
    LEADER: frozenset({UNATTACHED, RESIGNED, FOLLOWER}),
    # a higher epoch or the leader gone (see above); the fetch timeout; a new leader
    FOLLOWER: frozenset({UNATTACHED, VOTED, PROSPECTIVE, FOLLOWER}),
    # a higher epoch; the election timeout (see above); a leader found
    RESIGNED: frozenset({UNATTACHED, PROSPECTIVE, FOLLOWER}),
}

#: the states an observer can be in
OBSERVER_STATES: Final = frozenset({UNATTACHED, FOLLOWER})


class QuorumStateMachine:
    """A replica's current quorum state; :meth:`transition` moves it along
    :data:`TRANSITIONS` only."""

    def __init__(self, observer: bool, state: str = UNATTACHED) -> None:
        self.observer = observer
        self.state = UNATTACHED
        self.role = OBSERVER if observer else FOLLOWER
        self.initialize(state)

    def initialize(self, state: str) -> None:
        """Take a state without a move: at start, read from the quorum-state
        file (Kafka's QuorumState.initialize)."""
        if state not in TRANSITIONS or (self.observer and state not in OBSERVER_STATES):
            raise IllegalStateTransition(f"a {'observer' if self.observer else 'voter'} cannot start {state}")
        self._enter(state)

    def transition(self, to: str) -> None:
        if to not in TRANSITIONS[self.state] or (self.observer and to not in OBSERVER_STATES):
            who = "an observer" if self.observer else "a voter"
            raise IllegalStateTransition(f"{who} cannot move from {self.state} to {to}")
        self._enter(to)

    def _enter(self, state: str) -> None:
        self.state = state
        if self.observer:
            self.role = OBSERVER
        elif state == LEADER or state == CANDIDATE:
            self.role = state
        else:
            self.role = FOLLOWER
