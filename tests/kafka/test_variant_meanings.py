"""Each protocol variant means one rule, and that rule's counterpart on
Kafka (a setting, a release, or none: refused with the reason)
is harness/config/kafka.py's VARIANT_MEANINGS. Nothing here starts a
cluster: every command is refused or answered before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.kafka import VARIANT_MEANINGS, check_variants, kafka_counterpart, mapping
from harness.errors import UsageError
from reference_impl.core.config import VARIANT_NAMES, Variants

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


def test_every_variant_has_a_meaning_on_kafka() -> None:
    assert sorted(VARIANT_MEANINGS) == sorted(VARIANT_NAMES)


def test_kip966_off_is_the_elr_feature_at_level_0_and_leaves_the_hw_rule_on() -> None:
    assert kafka_counterpart("kip966", False, "4.4.0")[0] == "eligible.leader.replicas.version=0 (format feature)"
    assert Variants().with_overrides({"kip966": False}).min_isr_hw_gate is True


def test_min_isr_hw_gate_off_is_refused_from_kafka_3_7_and_is_3_6_as_it_is() -> None:
    for version in ("4.4.0", "3.7.2"):
        kafka, why = kafka_counterpart("min_isr_hw_gate", False, version)
        assert kafka is None and "KAFKA-15583" in why and "3.6.2" in why
    assert kafka_counterpart("min_isr_hw_gate", False, "3.6.2")[0] == \
        "Kafka 3.6.2 as it is (it predates KAFKA-15583's hold on the high watermark while ISR < min.insync.replicas)"


def test_a_rule_on_is_refused_on_a_release_that_predates_it() -> None:
    assert kafka_counterpart("kip966", True, "3.9.2")[0] is None
    assert kafka_counterpart("min_isr_hw_gate", True, "3.6.2")[0] is None
    assert kafka_counterpart("min_isr_hw_gate", True, "3.7.0")[0] is not None
    assert kafka_counterpart("kip966", True, "4.0.2")[0] == "eligible.leader.replicas.version=1 (format feature)"


@pytest.mark.parametrize("name", ["kip101", "strict_isr_expand", "maximal_isr", "producer_sequence_checks"])
def test_protocol_only_variants_on_are_kafka_as_it_is_and_off_is_refused(name: str) -> None:
    check_variants({name: True})
    with pytest.raises(UsageError, match=f"variant {name} exists only in the reference implementation"):
        check_variants({name: False})


def test_the_defaults_all_have_a_counterpart_on_the_default_release() -> None:
    rows = mapping(Variants().as_dict())
    assert all(r["kafka"] for r in rows.values()) and len(rows) == len(VARIANT_NAMES)


def test_run_on_db_kafka_refuses_min_isr_hw_gate_off_in_one_line(tmp_path) -> None:
    r = kraftwerk("run", "--db", "kafka", "--out", str(tmp_path / "r"), "--variant", "min_isr_hw_gate=off")
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "min_isr_hw_gate=off has no counterpart on Kafka 4.4.0" in line and "KAFKA-15583" in line
    assert not (tmp_path / "r").exists()


def test_compare_prints_the_mapping_and_refuses_a_default_the_release_cannot_run(tmp_path) -> None:
    """Kafka 3.9.2 has no ELR: comparing it with the reference's default
    (kip966 on) would test different rules on the two sides."""
    r = kraftwerk("compare", "--out", str(tmp_path / "c"), "--kafka-version", "3.9.2")
    assert r.returncode == 2, r.stderr
    assert "variants, reference -> Kafka 3.9.2:" in r.stdout
    assert "kip966=on -> refused: Kafka 3.9.2 predates KIP-966's eligible leader replicas" in r.stdout
    assert "min_isr_hw_gate=on -> always" in r.stdout
    (line,) = r.stderr.strip().splitlines()
    assert "variant kip966=on has no counterpart on Kafka 3.9.2" in line
    assert not (tmp_path / "c").exists()


def test_compare_mapping_of_kip966_off_keeps_the_hw_gate_on_both_sides() -> None:
    """What was wrong: kip966=off switched the HW rule off on the reference
    while Kafka formatted with ELR level 0 kept it."""
    rows = mapping({**Variants().as_dict(), "kip966": False})
    assert rows["kip966"]["kafka"] == "eligible.leader.replicas.version=0 (format feature)"
    assert rows["min_isr_hw_gate"] == {"on": True, "kafka": "always (Partition.maybeIncrementLeaderHW; no setting)"}
