"""Every finding the checkers can name has a one-line meaning for the report
(:mod:`checkers.glossary`), including the systematic variants."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checkers.durability import LOSS_ANOMALY
from checkers.glossary import MEANINGS, describe
from checkers.queue.checker import KNOWN_ANOMALIES
from checkers.queue.graph import CLASSES, RW_CLASSES

INVARIANTS = Path(__file__).resolve().parents[2] / "checkers" / "invariants.py"


def _invariant_kinds() -> set[str]:
    """The kinds the invariant monitor reports: every ``_violate("<kind>"``."""
    return set(re.findall(r'_violate\(\s*"([a-z0-9-]+)"', INVARIANTS.read_text()))


def test_every_queue_and_durability_anomaly_is_described() -> None:
    names = set(KNOWN_ANOMALIES) | set(LOSS_ANOMALY.values()) | {c[0] for c in CLASSES + RW_CLASSES}
    assert len(names) > 30
    assert sorted(n for n in names if not describe(n)) == []


def test_every_processing_anomaly_is_described() -> None:
    from checkers.queue.processing import ANOMALY_TYPES

    assert sorted(n for n in ANOMALY_TYPES if not describe(n)) == []


def test_every_invariant_violation_kind_is_described() -> None:
    kinds = _invariant_kinds()
    assert {"committed-truncated", "leader-completeness", "node-crash"} <= kinds
    assert sorted(k for k in kinds if not describe(k)) == []


def test_linearizability_finding_is_described() -> None:
    assert "real time" in describe("nonlinearizable")


def test_the_three_acks1_loss_names_each_say_their_own_definition() -> None:
    """One lost acks=1 record can be reported three ways; the meanings tell
    the definitions apart and all name the acks level."""
    lines = [describe(n) for n in ("lost-acks1-write", "lost-write-acks1", "unseen-acks1")]
    assert len(set(lines)) == 3
    assert all("acks=1" in line for line in lines)
    assert "final reads" in lines[0] and "highest position" in lines[1] and "never returned" in lines[2]


@pytest.mark.parametrize("name, part", [
    ("unverified-unseen", "no complete final read"),
    ("G1c-realtime", "real-time order"),
    ("G0-process", "process order"),
    ("G2-item-realtime", "write skew"),
])
def test_variants_build_on_their_base_meaning(name: str, part: str) -> None:
    line = describe(name)
    assert line is not None and part in line


def test_unknown_names_have_no_meaning() -> None:
    assert describe("no-such-anomaly") is None
    assert describe("unverified-no-such") is None
    assert describe("no-such-acks1") is None


def test_every_meaning_is_one_line() -> None:
    assert all("\n" not in m and m == m.strip() and m[0].islower() for m in MEANINGS.values())


def test_every_availability_finding_is_described() -> None:
    from checkers.availability import DESIGN, STUCK

    assert "stuck" in describe(STUCK) and "by the election rules" in describe(DESIGN)
