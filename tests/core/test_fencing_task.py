"""When the active controller looks for expired broker sessions: not at a
session's deadline but at the runs of Kafka 4.4's periodic task
``maybeFenceStaleBroker`` (kafka-metadata 4.4.0, lines by the jar's line
tables): every ``max(1 ms, sessionTimeout / 8)`` (``QuorumController.java:1689``),
first one period after activation (``PeriodicTaskControlManager.java:222-232``,
``QuorumController.java:1210``), 10 ms after a run that took a session and
a period after one that found none, each counted from the run
(``PeriodicTaskControlManager.java:111, 183-196``); a session expired when
``contact + timeout < now`` (``BrokerHeartbeatTracker.java:132``)."""

from __future__ import annotations

import pytest

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.controller.fencing_task import (
    IMMEDIATE_PERIOD_MS,
    FencingTaskSchedule,
    fence_stale_broker_period_ms,
)
from reference_impl.core.messages import BrokerHeartbeatRequest

from .test_controller import Cluster

CFG = ProtocolConfig()


# ---------------------------------------------------------------------------
# the schedule (pure)
# ---------------------------------------------------------------------------


def test_the_fencing_tasks_period_is_an_eighth_of_the_session_timeout_and_at_least_1_ms():
    """``maybeFenceStaleBrokerPeriodNs = max(MILLISECONDS.toNanos(1),
    sessionTimeoutNs / 8)`` (QuorumController.java:1689): 1125 ms for the
    default 9 s session, as Kafka logs it ("Registering periodic task
    maybeFenceStaleBroker to run every 1125 ms")."""
    assert fence_stale_broker_period_ms(9000) == 1125
    assert fence_stale_broker_period_ms(3000) == 375
    assert fence_stale_broker_period_ms(7) == 1


def test_runs_that_find_nothing_keep_the_schedules_phase_and_a_run_that_fences_moves_it():
    """Each run reschedules from its own time: a period after an idle run,
    10 ms after one that took a session; activation starts afresh."""
    s = FencingTaskSchedule(period_ms=100)
    assert not s.due(0) and s.first_run_at_or_after(50) is None  # inactive
    s.activate(1000)
    assert s.next_run == 1100 and not s.due(1099) and s.due(1100)
    assert s.first_run_at_or_after(1100) == 1100
    assert s.first_run_at_or_after(1101) == 1200
    assert s.first_run_at_or_after(1350) == 1400
    s.skip_idle_runs(1350)  # runs at 1100, 1200, 1300 found nothing
    assert s.next_run == 1400
    s.ran(1400, took_session=True)
    assert s.next_run == 1400 + IMMEDIATE_PERIOD_MS
    s.ran(1410, took_session=False)
    assert s.next_run == 1510  # the grid now runs 10 ms later than before
    s.activate(2003)
    assert s.next_run == 2103
    s.deactivate()
    assert not s.due(10**9)


# ---------------------------------------------------------------------------
# the controller
# ---------------------------------------------------------------------------


def _beat(c: Cluster, brokers) -> None:
    """Heartbeats of ``brokers`` handled now, at the controller's own clock."""
    for b in brokers:
        c.loop.deliver(c.active_id(), BrokerHeartbeatRequest(b, c.epochs[b], c.active.image.offset), b)


def _run_to(c: Cluster, t: int, alive=()) -> None:
    """Run the loop to ``t``, the brokers in ``alive`` heartbeating every 500 ms."""
    while c.loop.now < t:
        c.loop.run_until(min(t, c.loop.now + 500))
        if c.loop.now < t:
            _beat(c, alive)


def _fenced(c: Cluster, b: int) -> bool:
    """Fenced in the active controller's working image: at the moment the
    fencing record is written, before it commits."""
    work = c.active.writer.work
    assert work is not None
    return work.brokers[b].fenced


def _started(config: ProtocolConfig = CFG) -> tuple[Cluster, int]:
    """A single-voter controller and brokers 0, 1, 2, the controller then
    restarted; the monotonic time at which it became active again. On this
    activation every unfenced broker gets the same contact time (read back
    from the sessions' deadlines: contact plus the session timeout) and the
    task its first run a period later."""
    c = Cluster(config=config)
    c.start_brokers(0, 1, 2)
    c.loop.restart(100, lambda stored: c._build(100, stored))
    assert c.loop.run_until_true(lambda: c.active_id() is not None, 30_000)
    assert not any(r.fenced for r in c.active.image.brokers.values())
    deadlines = set(c.active.cluster.sessions.deadlines.values())
    assert len(deadlines) == 1, deadlines  # no heartbeat since activation
    return c, deadlines.pop() - config.broker_session_timeout_ms


@pytest.mark.parametrize("session_ms", [9000, 3000])
def test_a_broker_whose_session_expires_between_two_runs_of_the_task_is_fenced_at_the_next_run_not_at_its_deadline(session_ms):
    """Broker 0 last heartbeats at ``h``; its session's deadline, ``h`` plus
    the session timeout, falls half a period after a run of the task, so
    Kafka fences it at the next run, one period after activation plus a
    whole number of periods: up to a period (1125 ms by default) late."""
    config = ProtocolConfig(broker_session_timeout_ms=session_ms)
    period = session_ms // 8
    c, activated = _started(config)
    h = activated + 2 * period + period // 2
    _run_to(c, h, alive=(0, 1, 2))
    _beat(c, (0, 1, 2))
    deadline = h + session_ms
    next_run = activated + ((deadline - activated) // period + 1) * period
    assert deadline < next_run < deadline + period
    _run_to(c, next_run - 1, alive=(1, 2))
    assert not _fenced(c, 0), "fenced before the task's run"
    _run_to(c, next_run, alive=(1, 2))
    assert _fenced(c, 0) and not _fenced(c, 1) and not _fenced(c, 2)


def test_after_a_run_that_fences_the_task_runs_10_ms_later_and_its_period_counts_from_there():
    """Broker 0's session expires exactly at a run (fenced then); broker 1's
    expires 5 ms into the next period. The run that fenced 0 put the next
    one 10 ms later (PeriodicTask.DEFAULT_IMMEDIATE_PERIOD_NS), which found
    nothing and put the next a period after itself: broker 1 is fenced a
    period and 10 ms after broker 0, not at its deadline, and not on the
    schedule the task had before the fence."""
    period = fence_stale_broker_period_ms(CFG.broker_session_timeout_ms)
    c, activated = _started()
    g = activated + 12 * period  # a run of the task
    h0 = g - CFG.broker_session_timeout_ms  # broker 0's deadline is g
    _run_to(c, h0, alive=(0, 1, 2))
    _beat(c, (0, 1, 2))
    h1 = h0 + period + 5  # broker 1's deadline is g + period + 5
    _run_to(c, h1, alive=(1, 2))
    _beat(c, (1, 2))
    _run_to(c, g - 1, alive=(2,))
    assert not _fenced(c, 0)
    _run_to(c, g, alive=(2,))
    assert _fenced(c, 0) and not _fenced(c, 1)
    refenced = g + IMMEDIATE_PERIOD_MS + period
    _run_to(c, refenced - 1, alive=(2,))
    assert not _fenced(c, 1), "fenced at its deadline or on the old schedule"
    _run_to(c, refenced, alive=(2,))
    assert _fenced(c, 1) and not _fenced(c, 2)


def test_brokers_a_new_controller_gives_sessions_are_fenced_at_the_run_eight_periods_after_activation():
    """``ClusterControlManager.activate`` gives every unfenced broker a contact
    time (QuorumController.java:1172) just before the task is scheduled a
    period later (:1210): eight periods of a 9 s session are the session
    timeout, and the eighth run, an instant past the deadline, finds the
    sessions expired (``contact + timeout < now``). The model's run at a
    whole millisecond stands for that instant: a deadline equal to the
    run's time has passed (a strict comparison would fence a period late)."""
    c, reactivated = _started()
    period = fence_stale_broker_period_ms(CFG.broker_session_timeout_ms)
    assert reactivated + CFG.broker_session_timeout_ms == reactivated + 8 * period
    _run_to(c, reactivated + 8 * period - 1)
    assert not any(_fenced(c, b) for b in (0, 1, 2))
    _run_to(c, reactivated + 8 * period)
    assert sum(_fenced(c, b) for b in (0, 1, 2)) == 1  # one per run, 10 ms apart
    _run_to(c, reactivated + 8 * period + 2 * IMMEDIATE_PERIOD_MS)
    assert all(_fenced(c, b) for b in (0, 1, 2))
