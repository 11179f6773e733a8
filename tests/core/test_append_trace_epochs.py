"""The ``append`` trace event names the leader epoch of every batch it covers
(``epochs: [[epoch, start], ...]``), emitted by the core itself so that every
runtime's traces carry it: a follower's fetch may return batches of several
epochs, and the Log Matching check (seed 000, "Leader epochs & epoch-based
truncation": two logs with the same epoch at an offset agree up to it)
compares replicas run by run."""

from __future__ import annotations

from reference_impl.core.messages import Batch
from tests.core.brokerkit import traces
from tests.core.test_partition_follower import answer, fetch_sent, follower


def test_follower_append_event_names_each_epoch_run_of_the_fetch() -> None:
    b, _, effects = follower()
    s = fetch_sent(effects)
    effects = answer(b, s, Batch(0, 0, 3, None), Batch(3, 0, 2, None), Batch(5, 2, 4, None), hw=0)
    (ev,) = traces(effects, "append")
    assert ev["role"] == "follower"
    assert (ev["base"], ev["count"], ev["leo"]) == (0, 9, 9)
    assert ev["epochs"] == [[0, 0], [2, 5]]


def test_follower_append_of_one_epoch_has_one_run() -> None:
    b, _, effects = follower()
    s = fetch_sent(effects)
    (ev,) = traces(answer(b, s, Batch(0, 1, 4, None), hw=0), "append")
    assert ev["epochs"] == [[1, 0]]


def test_monitor_tracks_the_runs_of_a_multi_epoch_follower_append() -> None:
    """The invariant monitor takes the runs from the core's event as is: the
    follower's log is epoch 0 on [0, 5) and epoch 2 from 5, not epoch 2
    throughout (which would break Log Matching against the leader's log)."""
    from checkers.invariants import InvariantMonitor

    b, _, effects = follower()
    s = fetch_sent(effects)
    (ev,) = traces(answer(b, s, Batch(0, 0, 5, None), Batch(5, 2, 4, None), hw=0), "append")
    m = InvariantMonitor(seed=0)
    m.observe({"t": 1, "node": 2, "kind": "append", **ev})
    assert m._rep(2, str(ev["tp"])).runs == [(0, 0), (5, 2)]
    assert m.summary()["valid"] is True
