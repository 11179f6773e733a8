"""When Kafka 4.4's active controller looks for expired broker sessions: the
schedule of its periodic task ``maybeFenceStaleBroker``, on the model's
monotonic clock.

Kafka 4.4 does not fence a broker at its session's deadline. It fences at
the first run of a periodic task after the deadline (kafka-metadata 4.4.0,
lines by the jar's line tables):

* The task is registered in ``QuorumController``'s constructor
  (``QuorumController.java:1641-1645``) with the period
  ``maybeFenceStaleBrokerPeriodNs(sessionTimeoutNs) =
  max(1 ms, sessionTimeoutNs / 8)`` (``QuorumController.java:1689``): 1125 ms
  for the default 9 s session timeout. (The builder's
  ``setFenceStaleBrokerIntervalNs`` would override it; ``ControllerServer``
  never calls it.)
* It is scheduled only while the controller is active: registration while
  inactive cancels it; ``PeriodicTaskControlManager.activate``
  (``PeriodicTaskControlManager.java:222-232``), called from
  ``CompleteActivationEvent.processBatchEndOffset`` (``QuorumController.java:1210``)
  right after ``claim`` has given every unfenced broker a fresh session
  (``QuorumController.java:1172``), schedules its first run one period
  later; ``renounce`` deactivates it (``QuorumController.java:1226``), which
  cancels it (``PeriodicTaskControlManager.java:238-248``). So the schedule restarts on every activation, in phase with it.
* After each run ``PeriodicTaskOperation.get`` reschedules it from the time
  the run ended (``PeriodicTaskControlManager.java:111``, ``reschedule`` at
  ``:201-216``, ``nextDelayTimeNs`` at ``:183-196``): 10 ms later
  (``PeriodicTask.DEFAULT_IMMEDIATE_PERIOD_NS``, ``PeriodicTask.java:53``) if the run
  returned true, that is, if ``maybeFenceOneStaleBroker`` took a session
  from the tracker (``ReplicationControlManager.java:1769-1795``); one
  period later if it found none. A fence therefore shifts the phase of
  every later run.
* A session is expired when ``contact + sessionTimeout < now`` (and
  ``now > contact``), strictly (``BrokerHeartbeatTracker.isExpired``,
  ``BrokerHeartbeatTracker.java:132``).

The model counts whole milliseconds. A run at the model time *t* stands for
a run an instant after *t*: Kafka's run always comes after the moment it was
scheduled for, and the contact time ``activate`` gives every session is
taken before the task is scheduled, so the run eight periods after an
activation already finds those sessions expired (9000 ms after the contact
plus the scheduling's own nanoseconds). A session whose deadline (contact
plus timeout) is *t* is therefore expired at a run at *t* (the tracker's
``remove_expired`` compares inclusively). The period is rounded down to a
whole millisecond (exact for session timeouts that are multiples of 8 ms).

Runs that find nothing change nothing but the schedule, so the model does
not wake for them: it keeps the time of the next run and steps it on by
whole periods (:meth:`FencingTaskSchedule.skip_idle_runs`), waking only for
the run at which the first session will have expired
(:meth:`FencingTaskSchedule.first_run_at_or_after`). A node that wakes late
(paused) runs the task once, then, as Kafka reschedules from the run's end.

Pure values, no clock: the caller passes monotonic times.
"""

from __future__ import annotations

from dataclasses import dataclass

#: PeriodicTask.DEFAULT_IMMEDIATE_PERIOD_NS (PeriodicTask.java:53): the delay before
#: the fencing task runs again after a run that took a session
IMMEDIATE_PERIOD_MS = 10

#: the floor of maybeFenceStaleBrokerPeriodNs (QuorumController.java:1689)
_MIN_PERIOD_MS = 1


def fence_stale_broker_period_ms(session_timeout_ms: int) -> int:
    """``QuorumController.maybeFenceStaleBrokerPeriodNs``
    (QuorumController.java:1689): an eighth of the session timeout, at least
    1 ms; in whole milliseconds."""
    return max(_MIN_PERIOD_MS, session_timeout_ms // 8)


@dataclass
class FencingTaskSchedule:
    """The ``maybeFenceStaleBroker`` task's next run on the active controller,
    or None while the controller is inactive (the task is cancelled)."""

    period_ms: int
    next_run: int | None = None

    def activate(self, mono_now: int) -> None:
        """``PeriodicTaskControlManager.activate``: the first run one period
        after activation, whatever the schedule was before."""
        self.next_run = mono_now + self.period_ms

    def deactivate(self) -> None:
        """``PeriodicTaskControlManager.deactivate``: the task is cancelled."""
        self.next_run = None

    def due(self, mono_now: int) -> bool:
        return self.next_run is not None and self.next_run <= mono_now

    def skip_idle_runs(self, mono_now: int) -> None:
        """The runs scheduled up to ``mono_now`` found nothing: each put the
        next one a period later, so the next run is the first one after
        ``mono_now`` on this grid."""
        if self.next_run is None or self.next_run > mono_now:
            return
        self.next_run += ((mono_now - self.next_run) // self.period_ms + 1) * self.period_ms

    def ran(self, mono_now: int, took_session: bool) -> None:
        """``PeriodicTaskOperation.get``'s reschedule after a run at ``mono_now``:
        10 ms later if it took a session, else a period later."""
        self.next_run = mono_now + (IMMEDIATE_PERIOD_MS if took_session else self.period_ms)

    def first_run_at_or_after(self, t: int) -> int | None:
        """The run that first sees a session whose deadline is ``t``, if
        every run before it finds nothing."""
        if self.next_run is None:
            return None
        if t <= self.next_run:
            return self.next_run
        return self.next_run - (-(t - self.next_run) // self.period_ms) * self.period_ms


__all__ = ["IMMEDIATE_PERIOD_MS", "FencingTaskSchedule", "fence_stale_broker_period_ms"]
