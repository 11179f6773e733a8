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
