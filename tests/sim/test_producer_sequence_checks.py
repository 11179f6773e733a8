"""Variant ``producer_sequence_checks``: with it (Kafka since KIP-98) a
leader answers an idempotent producer's retried batch with the original
offsets; without it (a broker without idempotence) the retry is appended
again, and the checker reports the copy as ``duplicate``: idempotent
producers promised exactly one append.

Seed 2 of this test (clients cut from the brokers and partition leaders
killed, every 2 s for 30 s) loses answers to produce requests the leader
had appended, so the simulated librdkafka producer retries with the same
producer id and sequence (seed 1 did under the simulator's driver of old,
seed 8 with the core's atomic CreateTopics batches, seed 7 until the
controller fenced an expired session at its fencing task's next run, as
Kafka does, instead of at the deadline; now 2, 3 and 5 of seeds 1..12 do)."""

from harness.config import build_config
from harness.lifecycle.runner import run_seed

OPTS = {"backend": "sim", "idempotent": True, "nemesis": "partition:clients,kill:primaries",
        "nemesis_interval": 2, "time_limit": 30}


def _run(checks: bool) -> dict:
    cfg = build_config(None, {**OPTS, "variants": {"producer_sequence_checks": checks}})
    return run_seed(cfg, 2)


def test_idempotent_retries_are_appended_once_with_sequence_checks() -> None:
    r = _run(True)
    assert not any("duplicate" in t for t in r["anomaly_types"]) and r["valid"] is True


def test_without_sequence_checks_an_idempotent_producers_retry_is_a_duplicate() -> None:
    r = _run(False)
    assert r["checkers"]["queue"]["counts"].get("duplicate", 0) >= 1
    assert r["valid"] is False
