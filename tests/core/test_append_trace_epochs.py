"""The ``append`` trace event names the leader epoch of every batch it covers
(``epochs: [[epoch, start], ...]``), emitted by the core itself so that every
runtime's traces carry it: a follower's fetch may return batches of several
epochs, and the Log Matching check (seed 000, "Leader epochs & epoch-based
truncation": two logs with the same epoch at an offset agree up to it)
compares replicas run by run."""

from __future__ import annotations

from reference_impl.core.effects import AppendTrace
from reference_impl.core.messages import Batch
from tests.core.brokerkit import traces
from tests.core.test_partition_follower import answer, fetch_sent, follower
from tests.core.test_partition_leader import leader_with, produce


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


def _append_effect(effects):
    (ev,) = [e for e in effects if isinstance(e, AppendTrace)]
    return ev


def test_an_append_of_one_epoch_spells_its_run_only_when_read() -> None:
    """effects.AppendTrace: a one-epoch append (the leader's, nearly every
    follower's) is built with no epochs list (``one_run``); reading
    ``epochs`` spells the run ``[[epoch, base]]``, as the core built before."""
    b, _, effects = follower()
    s = fetch_sent(effects)
    ev = _append_effect(answer(b, s, Batch(0, 1, 4, None), Batch(4, 1, 2, None), hw=0))
    assert ev.one_run and (ev.base, ev.epoch) == (0, 1)
    assert ev.epochs == [[1, 0]] and ev.data["epochs"] == [[1, 0]]
    b, _, effects = follower()
    s = fetch_sent(effects)
    ev = _append_effect(answer(b, s, Batch(0, 0, 3, None), Batch(3, 2, 2, None), hw=0))
    assert not ev.one_run and ev.epochs == [[0, 0], [2, 3]]


def test_a_leaders_append_is_one_run_of_its_epoch() -> None:
    b, _ = leader_with()
    produce(b, 3, 1)
    ev = _append_effect(produce(b, 2, 2))
    assert (ev.base, ev.count) == (3, 2)
    assert ev.one_run and ev.role == "leader"
    assert ev.data["epochs"] == [[ev.epoch, ev.base]]


def test_the_monitor_checks_a_one_run_append_as_its_spelt_run() -> None:
    """InvariantMonitor.observe_append given ``epochs=None`` (one run) keeps
    the same runs and verdicts as given ``[[epoch, base]]``, on the common
    path and on a gap's (a batch not at the LEO)."""
    from checkers.invariants import InvariantMonitor

    steps = [(0, 3, 0, 3), (3, 2, 0, 5), (5, 4, 1, 9), (12, 1, 1, 13), (4, 2, 2, 6)]  # (base, count, epoch, leo)
    seen = []
    for spelt in (False, True):
        m = InvariantMonitor(seed=0)
        for base, count, epoch, leo in steps:
            m.observe_append(2, 1, "t-0", base, count, epoch, [[epoch, base]] if spelt else None, leo)
        seen.append((m._rep(2, "t-0").runs, m.counts))
    assert seen[0] == seen[1] and seen[0][0] == [(0, 0), (4, 2)] and seen[0][1] == {"append-not-at-leo": 2}
