"""--idempotent: acks=all producers use enable.idempotence (Kafka requires
acks=all for it, so acks=1 producers never are); default off. Every send
records its producer's setting so the checker can tell a retry duplicate of
a non-idempotent producer from a broken log."""

from __future__ import annotations

from harness.config import build_config
from workloads.queue import QueueClient


def test_idempotent_flag_applies_to_acks_all_producers_only() -> None:
    c = build_config(None, {"idempotent": True, "acks": "mixed"})
    assert [c.idempotent_for_thread(t) for t in range(4)] == [True, False, True, False]
    assert build_config(None, {"acks": "1", "idempotent": True}).idempotent_for_thread(0) is False


def test_idempotence_is_off_by_default_and_settable_from_yaml() -> None:
    assert build_config(None, {}).idempotent_for_thread(0) is False
    assert build_config({"idempotent": True}, {}).idempotent_for_thread(0) is True


def test_queue_client_is_idempotent_only_with_acks_all() -> None:
    assert QueueClient("127.0.0.1:1", ["t0-0"], "all", 0, 1.0, idempotent=True).idempotent is True
    assert QueueClient("127.0.0.1:1", ["t0-0"], "1", 0, 1.0, idempotent=True).idempotent is False
    assert QueueClient("127.0.0.1:1", ["t0-0"], "all", 0, 1.0).idempotent is False
