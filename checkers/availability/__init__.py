"""Availability: a checker of liveness after the final heal, and the
evidence of how long each partition was down after each fault.

The checker (:func:`check_availability`): after the final heal every node
runs, every link is whole, every clock reset, so every partition should have
a leader again and accept acks=all writes within the run's
:class:`~checkers.availability.bound.LivenessBound`. The final phase writes a
probe to each partition from the heal on (``probe: true`` sends), so the
history says when each partition first took an acks=all write after it. A
partition that took none within the bound is ``unavailable``, with its cause
(:mod:`checkers.availability.cause`) read from the cluster's state when the
bound ran out: down by design (no replica the election rules may elect),
or stuck (a live eligible replica, yet no leader or no write).

Whether an unavailable partition fails the run is the policy
(``liveness`` in test.json, ``--liveness``):

* ``auto`` (default): stuck is invalid (Kafka promises a leader while an
  eligible replica lives), down by design is reported and does not fail,
  a cause that cannot be told makes the verdict unknown;
* ``strict``: any unavailability after the heal is invalid;
* ``report``: reported, never changes the verdict.

A run whose history has no writes after the heal (no probes: a history of
an older run, a transactional workload) is judged by its final reads: a
partition whose final read did not complete is unavailable.
"""

from .bound import LivenessBound, liveness_bound
from .cause import FinalState
from .checker import DESIGN, POLICIES, STUCK, check_availability, merge_availability, set_cause, unknown_cause
from .facts import HistoryFacts
from .gather import facts_of, facts_of_jsonl
from .leaders import Timeline, read_timeline, timeline_of
from .snapshot import check_run_dir

__all__ = ["LivenessBound", "liveness_bound", "FinalState", "Timeline", "read_timeline", "timeline_of",
           "HistoryFacts", "facts_of", "facts_of_jsonl", "check_availability", "merge_availability",
           "set_cause", "unknown_cause", "check_run_dir", "POLICIES", "STUCK", "DESIGN"]
