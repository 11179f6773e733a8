"""Acknowledged writes lost by design (checkers/expected_loss.py): a run's
losses are Kafka 4.4's own only when every failing anomaly follows from a
by-design leader-completeness violation, on the partitions it rewrote and
within the committed offsets it dropped."""

from __future__ import annotations

from typing import Any

from checkers.availability import set_cause
from checkers.expected_loss import judge

WHY = "broker 1 lost power at 14.4 s (9 log entries not fsynced) and ... without committed offsets [0, 6)"


def _run(lost: int = 4, extra_bad: tuple[str, ...] = (), designed: int = 1, offset: int = 2,
         key: str = "t-0") -> dict[str, Any]:
    """A checked run that lost ``lost`` acks=all writes on ``key`` after
    broker 1, elected last known leader of t-0 after its power loss, lacked
    committed offsets [0, 6)."""
    violations = [{"kind": "leader-completeness", "tp": "t-0", "lost_range": [0, 6], "by_design": designed > 0,
                   "why": WHY, "message": "new leader lacks committed offsets"}]
    return {
        "valid": False,
        "durability": {"acks=all": {"acked": 10, "lost": lost}},
        "anomalies": {"lost-acked-write": [{"key": key, "offset": offset, "value": 3}],
                      "lost-read": [{"key": key, "value": 3}],
                      **{k: [{"key": key}] for k in extra_bad}},
        "checkers": {"durability": {"valid": False, "bad_anomaly_types": ["lost-acked-write"]},
                     "queue": {"valid": False, "bad_anomaly_types": ["lost-read", *extra_bad]}},
        "invariants": {"valid": False, "counts": {"leader-completeness": 1}, "violations": violations,
                       **({"by_design": {"leader-completeness": designed}} if designed else {})},
    }


def test_losses_that_follow_from_a_by_design_election_are_explained_and_the_run_stays_invalid() -> None:
    res = set_cause(_run())
    lb = res["loss_by_design"]
    assert lb["explained"] is True and lb["committed_dropped"] == 6 and lb["partitions"]["t-0"]["from"] == 0
    assert res["valid"] is False
    assert res["cause"].startswith("4 acknowledged acks=all writes lost by design (Kafka 4.4 elects the last known "
                                   "leader too")
    assert WHY in res["cause"]


def test_an_anomaly_that_is_no_lost_log_is_not_explained() -> None:
    lb = judge(_run(extra_bad=("G1c",)))
    assert lb is not None and lb["explained"] is False and "anomalies not of a lost log: G1c" in lb["unexplained"]
    assert "cause" not in set_cause(_run(extra_bad=("G1c",)))


def test_a_loss_on_another_partition_is_not_explained() -> None:
    lb = judge(_run(key="t-1"))
    assert lb is not None and not lb["explained"]
    assert "lost-acked-write on t-1 offset 2 outside the rewritten range" in lb["unexplained"]


def test_more_acks_all_losses_than_committed_offsets_dropped_is_not_explained() -> None:
    lb = judge(_run(lost=7))
    assert lb is not None and not lb["explained"]
    assert "7 acks=all writes lost, more than the 6 committed offsets the elections dropped" in lb["unexplained"]


def test_a_leader_completeness_violation_not_by_design_says_nothing_by_design() -> None:
    res = set_cause(_run(designed=0))
    assert "loss_by_design" not in res and "cause" not in res
