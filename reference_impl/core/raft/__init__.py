"""The KRaft quorum (seed 004). :mod:`.replica` holds the state machine,
:mod:`.testkit` an in-memory loop that runs several nodes deterministically
(for tests and quick experiments; the simulator is the real driver)."""

from .replica import (
    CANDIDATE,
    FETCH_MAX_WAIT_MS,
    FOLLOWER,
    LEADER,
    OBSERVER,
    RAFT_MESSAGES,
    RaftReplica,
    Rng,
)

__all__ = ["RaftReplica", "Rng", "RAFT_MESSAGES", "LEADER", "CANDIDATE", "FOLLOWER", "OBSERVER", "FETCH_MAX_WAIT_MS"]
