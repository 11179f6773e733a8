"""Configuration rules: bad input is rejected before anything starts."""

import pytest

from harness.config import TestConfig, build_config, parse_variants
from harness.errors import UsageError


def test_defaults_are_acks_all_rf3_min_isr2_with_seed():
    c = build_config(None, {})
    assert (c.acks, c.rf, c.min_isr, c.brokers) == ("all", 3, 2, 3)
    assert isinstance(c.seed, int)
    assert c.keys() == ["t0-0", "t0-1"]


def test_flags_override_file_values():
    c = build_config({"time_limit": 9, "rate": 5, "variants": {"kip101": False}}, {"rate": 7.0, "variants": {"kip966": False}})
    assert c.time_limit == 9 and c.rate == 7.0
    assert c.variants == {"kip101": False, "kip966": False}


@pytest.mark.parametrize(
    "flags, words",
    [
        ({"rf": 4, "brokers": 3}, "--rf 4 exceeds --brokers 3"),
        ({"nemesis": "partition,bogus"}, "unknown nemesis 'bogus'"),
        ({"time_limit": 0}, "time limit must be positive"),
        ({"time_limit": -3}, "time limit must be positive"),
        ({"min_isr": 3, "rf": 2}, "--min-isr 3 exceeds --rf 2"),
        ({"db": "external"}, "needs --bootstrap"),
        ({"db": "external", "bootstrap": "h:1", "nemesis": "kill"}, "node faults are impossible"),
        ({"variants": {"nope": True}}, "unknown variant"),
    ],
)
def test_bad_settings_are_one_line_usage_errors(flags, words):
    with pytest.raises(UsageError) as e:
        build_config(None, flags)
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_variant_flags_parse_on_off():
    assert parse_variants(["kip966=off", "unclean_election=on"]) == {"kip966": False, "unclean_election": True}
    with pytest.raises(UsageError):
        parse_variants(["kip966"])


def test_mixed_acks_split_processes_by_thread_parity():
    c = TestConfig(acks="mixed", seed=1)
    assert [c.acks_for_thread(t) for t in range(4)] == ["all", "1", "all", "1"]


def test_lose_unfsynced_selects_page_cache_storage():
    assert TestConfig(nemesis=["lose-unfsynced"], seed=1).storage == "pagecache"
    assert TestConfig(nemesis=["kill"], seed=1).storage == "file"


@pytest.mark.parametrize(
    "flags, words",
    [
        ({"safe": True, "acks": "1"}, "--safe means acks=all"),
        ({"safe": True, "min_isr": 1}, "min.insync.replicas 2 or more"),
        ({"safe": True, "rf": 2, "min_isr": 2}, "replication factor 3 or more"),
        ({"safe": True, "variants": {"unclean_election": True}}, "no unclean leader election"),
        ({"safe": True, "db": "kafka", "kafka_config": ["unclean.leader.election.enable=true"]},
         "no unclean leader election"),
        ({"safe": True, "db": "kafka", "kafka_config": ["unclean.leader.election.enable=TRUE"]},
         "no unclean leader election"),
        ({"idempotent": True, "retries": 0}, "needs retries"),
        ({"retries": -1}, "--retries"),
        ({"backend": "sim", "acks": "0"}, "--acks 0 is for real clients"),
        ({"backend": "sim", "auto_offset_reset": "earliest"}, "--auto-offset-reset is for real clients"),
        ({"workload": "txn", "db": "kafka", "acks": "1"}, "acks=all"),
        ({"workload": "txn", "db": "kafka", "retries": 0}, "needs retries"),
    ],
)
def test_client_settings_against_each_other_are_one_line_usage_errors(flags, words):
    with pytest.raises(UsageError) as e:
        build_config(None, flags)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_safe_is_kafkas_documented_no_loss_settings_and_test_json_records_them():
    """acks=all, idempotence, RF 3, min ISR 2, no unclean election: --safe
    turns idempotence on and keeps the rest; every client setting goes to
    test.json, so a replay runs the same clients."""
    c = build_config(None, {"safe": True, "retries": 5, "auto_offset_reset": "earliest",
                            "isolation_level": "read_uncommitted"})
    assert (c.acks, c.idempotent, c.rf, c.min_isr, c.variants.get("unclean_election")) == ("all", True, 3, 2, None)
    assert c.idempotent_for_thread(0) and c.idempotent_for_thread(1)
    t = c.test_json()
    assert (t["safe"], t["retries"], t["auto_offset_reset"], t["isolation_level"], t["idempotent"]) == \
        (True, 5, "earliest", "read_uncommitted", True)
    assert t["workload"] == "queue" and t["txn"] is False


def test_a_non_idempotent_retry_makes_not_enough_replicas_indeterminate():
    """The queue client passes whether it may retry to the shared rule
    (workloads/outcome.py, whose tests pin the rule itself): with --retries
    NOT_ENOUGH_REPLICAS is info, without it fail."""
    from workloads.queue import QueueClient

    once = QueueClient("127.0.0.1:9", ["t-0"], "all", 0, op_timeout=1)
    retrying = QueueClient("127.0.0.1:9", ["t-0"], "all", 0, op_timeout=1, retries=5)
    assert once._outcome("NOT_ENOUGH_REPLICAS", once._retried()) == "fail"
    assert retrying._outcome("NOT_ENOUGH_REPLICAS", retrying._retried()) == "info"
    assert retrying._outcome("MSG_SIZE_TOO_LARGE", retrying._retried()) == "fail"
    assert QueueClient("127.0.0.1:9", ["t-0"], "0", 0, op_timeout=1)._outcome(None, False) == "info"


def test_a_run_is_named_after_its_workload_unless_named():
    assert build_config(None, {"workload": "txn", "db": "kafka"}).name == "txn"
    assert build_config(None, {}).name == "queue"
    assert build_config(None, {"workload": "txn", "db": "kafka", "name": "mine"}).name == "mine"


def test_a_reassignment_needs_a_broker_outside_the_replica_set_so_rf_equal_to_brokers_is_refused():
    """With as many brokers as replicas every reassign would be skipped: a
    run that claims membership faults and makes none."""
    with pytest.raises(UsageError) as e:
        build_config(None, {"db": "kafka", "nemesis": "reassign"})
    assert "needs more brokers than --rf" in str(e.value) and "\n" not in str(e.value)
    assert build_config(None, {"db": "kafka", "nemesis": "reassign", "brokers": 4}).brokers == 4


def test_latency_is_taken_on_every_kernel_backend_for_both_dbs():
    """Latency is made by a packet delayer on netns, docker and ssh hosts
    (harness/netdelay), so no kernel backend refuses it."""
    for backend in ("netns", "docker"):
        for db in ("reference", "kafka"):
            cfg = build_config(None, {"backend": backend, "db": db, "nemesis": "latency"})
            assert [s.kind for s in cfg.nemesis] == ["latency"]
