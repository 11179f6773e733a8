"""The KRaft quorum states as a table of allowed moves (raft/state.py,
Kafka 4.4's QuorumState): each event moves a replica to the state Kafka
names, a move the table does not allow raises IllegalStateTransition, and
under random drops, crashes and partitions every move a replica makes is
one of the table's and every state is reached."""

from __future__ import annotations

import random

import pytest

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import Send
from reference_impl.core.errors import IllegalStateTransition, LocalProtocolError
from reference_impl.core.messages import Errors, TopicRecord, VoteRequest, VoteResponse
from reference_impl.core.raft import RaftReplica
from reference_impl.core.raft.state import (
    CANDIDATE,
    FOLLOWER,
    LEADER,
    OBSERVER,
    OBSERVER_STATES,
    PROSPECTIVE,
    RESIGNED,
    STATES,
    TRANSITIONS,
    UNATTACHED,
    VOTED,
    QuorumStateMachine,
)
from reference_impl.core.raft.testkit import Loop
from reference_impl.core.storage import METADATA_LOG, QUORUM_STATE, QuorumState, StoredState

VOTERS = (1, 2, 3)
CFG = ProtocolConfig()


def _stored(epoch=0, voted_for=-1, leader=-1) -> StoredState:
    s = StoredState()
    s.logs[METADATA_LOG] = []
    s.files[QUORUM_STATE] = QuorumState(epoch, voted_for, leader)
    return s


def _replica(node_id=1, st=None, observer=False, voters=VOTERS, seed=0) -> RaftReplica:
    r = RaftReplica(node_id, voters, st or StoredState(), CFG, random.Random(seed), observer=observer)
    r.start(0)
    return r


def test_a_move_the_table_does_not_allow_raises_illegal_state_transition():
    q = QuorumStateMachine(observer=False)
    for to in (LEADER, CANDIDATE, RESIGNED):  # an unattached voter must pre-vote first
        with pytest.raises(IllegalStateTransition, match=f"from unattached to {to}"):
            q.transition(to)
    assert q.state == UNATTACHED  # a refused move changes nothing
    q.transition(FOLLOWER)
    with pytest.raises(IllegalStateTransition):
        q.transition(LEADER)
    obs = QuorumStateMachine(observer=True)
    for to in (VOTED, PROSPECTIVE, CANDIDATE, LEADER, RESIGNED):
        with pytest.raises(IllegalStateTransition, match="an observer"):
            obs.transition(to)
    with pytest.raises(IllegalStateTransition):
        QuorumStateMachine(observer=True, state=RESIGNED)
    assert issubclass(IllegalStateTransition, LocalProtocolError)  # ours: a bug of the core


def test_the_table_joins_every_state_and_an_observer_only_unattached_and_follower():
    assert set(TRANSITIONS) == set(STATES)
    assert all(tos <= set(STATES) for tos in TRANSITIONS.values())
    assert {to for tos in TRANSITIONS.values() for to in tos} == set(STATES)  # each state can be entered
    # the way to leading is Kafka's: pre-vote, then candidate, then leader
    assert [s for s in STATES if CANDIDATE in TRANSITIONS[s]] == [PROSPECTIVE]
    assert [s for s in STATES if LEADER in TRANSITIONS[s]] == [CANDIDATE]
    assert [s for s in STATES if RESIGNED in TRANSITIONS[s]] == [LEADER]
    assert all(OBSERVER_STATES <= TRANSITIONS[s] for s in OBSERVER_STATES)


def test_a_voter_with_no_leader_is_unattached_and_granting_a_vote_makes_it_voted():
    r = _replica(2)
    assert (r.quorum.state, r.role) == (UNATTACHED, FOLLOWER)
    (resp,) = [e.msg for e in r.handle(VoteRequest(1, 1, -1, 0), 5, 1) if isinstance(e, Send)]
    assert resp.vote_granted
    assert (r.quorum.state, r.voted_for, r.role) == (VOTED, 1, FOLLOWER)


def test_a_voter_restarted_after_leading_resumes_resigned_and_votes_for_no_one_else_in_its_epoch():
    """Kafka's QuorumState.initialize: a replica that led its last epoch
    starts Resigned in it, so it cannot vote for another in the same epoch."""
    r = _replica(1, _stored(epoch=3, voted_for=1, leader=1))
    assert (r.quorum.state, r.leader_id, r.role) == (RESIGNED, -1, FOLLOWER)
    (resp,) = [e.msg for e in r.handle(VoteRequest(2, 3, 5, 100), 10, 2) if isinstance(e, Send)]
    assert not resp.vote_granted and r.quorum.state == RESIGNED


def test_an_election_goes_prospective_then_candidate_then_leader_and_resigning_makes_it_resigned():
    r = _replica(1, seed=1)
    r.tick(10_000)
    assert (r.quorum.state, r.epoch) == (PROSPECTIVE, 0)  # pre-vote: no epoch yet
    r.handle(VoteResponse(2, Errors.NONE, 0, -1, True, pre_vote=True), 10_001, 2)
    assert (r.quorum.state, r.role, r.epoch) == (CANDIDATE, CANDIDATE, 1)
    r.handle(VoteResponse(2, Errors.NONE, 1, -1, True), 10_002, 2)
    assert (r.quorum.state, r.role) == (LEADER, LEADER)
    r.resign(10_003)
    assert (r.quorum.state, r.role, r.leader_id) == (RESIGNED, FOLLOWER, -1)


def test_a_quorum_of_one_passes_through_prospective_and_candidate_to_leader_at_start():
    r = _replica(5, voters=(5,))
    assert (r.quorum.state, r.epoch) == (LEADER, 1)


def test_a_candidate_whose_election_times_out_pre_votes_again_in_its_epoch():
    r = _replica(1, seed=1)
    r.tick(10_000)
    r.handle(VoteResponse(2, Errors.NONE, 0, -1, True, pre_vote=True), 10_001, 2)
    assert r.quorum.state == CANDIDATE
    r.tick(60_000)
    assert (r.quorum.state, r.epoch, r.voted_for) == (PROSPECTIVE, 1, 1)


def test_an_observer_is_unattached_until_a_voter_names_the_leader_then_follows():
    o = _replica(7, observer=True)
    assert (o.quorum.state, o.role) == (UNATTACHED, OBSERVER)


@pytest.mark.parametrize("seed", range(8))
def test_every_move_under_drops_crashes_and_partitions_is_in_the_table_and_every_state_is_reached(seed):
    """A run of three voters and an observer under random faults: no replica
    raises (every move it makes is one of the table's), and between them the
    replicas pass through every state (the observer through its two)."""
    rnd = random.Random(seed)
    loop = Loop(latency=2)
    seen: dict[int, set[str]] = {}

    def build(node_id: int, st: StoredState, observer: bool = False) -> RaftReplica:
        return RaftReplica(node_id, VOTERS, st, CFG, random.Random(rnd.random()), observer=observer)

    def watch(node_id, _effects) -> None:
        seen.setdefault(node_id, set()).add(loop.nodes[node_id].quorum.state)  # type: ignore[attr-defined]

    loop.on_effects = watch
    for v in VOTERS:
        loop.add(v, build(v, StoredState()))
    loop.add(20, build(20, StoredState(), observer=True))
    loop.drop = lambda src, dst, msg: rnd.random() < 0.1
    for step in range(60):
        loop.run_for(rnd.randint(50, 600))
        leaders = [v for v in VOTERS if v not in loop.down and loop.nodes[v].is_leader]  # type: ignore[attr-defined]
        if leaders:
            r = loop.nodes[leaders[0]]
            r.append([TopicRecord(f"w{step}")], loop.now)  # type: ignore[attr-defined]
            loop._apply(leaders[0], r.drain_effects())  # type: ignore[attr-defined]
            if rnd.random() < 0.1:
                loop._apply(leaders[0], r.resign(loop.now))  # type: ignore[attr-defined]
        roll = rnd.random()
        if roll < 0.1:
            victim = rnd.choice(VOTERS)
            loop.restart(victim, lambda st, v=victim: build(v, st), lose_unfsynced=rnd.random() < 0.5)
        elif roll < 0.25:
            loop.cuts.clear()
            loop.isolate(rnd.choice(VOTERS))
        elif roll < 0.35:
            loop.cuts.clear()
    loop.heal()
    loop.run_for(20_000)
    voters_seen = set().union(*(seen[v] for v in VOTERS))
    assert {UNATTACHED, PROSPECTIVE, CANDIDATE, LEADER, FOLLOWER} <= voters_seen
    assert seen[20] <= OBSERVER_STATES and FOLLOWER in seen[20]


def test_over_many_runs_a_voter_is_seen_voted_and_resigned_too():
    """The two states a short run may miss: a vote granted to another
    candidate (voted), a leader cut off or resigning (resigned)."""
    seen: set[str] = set()
    for seed in range(8):
        rnd = random.Random(seed)
        loop = Loop(latency=2)
        loop.on_effects = lambda n, _e, loop=loop: seen.add(loop.nodes[n].quorum.state)  # type: ignore[attr-defined]
        for v in VOTERS:
            loop.add(v, RaftReplica(v, VOTERS, StoredState(), CFG, random.Random(rnd.random())))
        for _ in range(20):
            loop.run_for(rnd.randint(200, 3000))
            loop.cuts.clear()
            loop.isolate(rnd.choice(VOTERS))
        loop.heal()
        loop.run_for(5000)
    assert {VOTED, RESIGNED} <= seen
