"""The variant table of docs/architecture.md ("Variants") is the contract of
each switch: what it changes, where, and the tests that show it. These tests
hold the table to the code and fill what it claimed without a test."""

from __future__ import annotations

import re
from pathlib import Path

from reference_impl.core.config import VARIANT_NAMES
from reference_impl.core.messages import NO_LEADER
from reference_impl.core.metadata import RECOVERING

from tests.core.test_controller import CFG, _lose_isr, three_brokers

ROOT = Path(__file__).resolve().parents[2]


def _variant_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("### Variants"):text.index("### Election order")]
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \([a-z]+\) \|.*$", section, re.M)}


def _test_names() -> set[str]:
    names: set[str] = set()
    for p in (ROOT / "tests").rglob("test_*.py"):
        names |= set(re.findall(r"^(?:async )?def (test_\w+)", p.read_text(encoding="utf-8"), re.M))
    return names


def test_the_variant_table_has_a_row_per_switch_and_every_test_it_names_exists() -> None:
    rows = _variant_rows()
    assert sorted(rows) == sorted(VARIANT_NAMES)
    defined = _test_names()
    for name, row in rows.items():
        named = re.findall(r"`(test_\w+)`", row)
        assert named, f"the {name} row names no test"
        assert [t for t in named if t not in defined] == [], f"the {name} row names tests that do not exist"


def test_the_variant_table_lists_every_use_of_a_switch_in_the_core() -> None:
    """Each ``variants.<name>`` read in reference_impl/core lies in a function
    the switch's row names (the rows say "every use ... is listed")."""
    rows = _variant_rows()
    for p in sorted((ROOT / "reference_impl" / "core").rglob("*.py")):
        func = ""
        for line in p.read_text(encoding="utf-8").splitlines():
            m = re.match(r"\s*def (\w+)", line)
            if m:
                func = m.group(1)
            for name in (n for n in re.findall(r"variants\.(\w+)", line) if n in VARIANT_NAMES):
                assert f".{func}`" in rows[name], f"{p.name}:{func} reads variants.{name}, the table does not say so"


def test_unclean_election_variant_overrides_a_topic_that_disables_unclean_election() -> None:
    """``unclean_election`` on makes *every* topic unclean-electable, even one
    whose own ``unclean.leader.election.enable`` is false."""
    c = three_brokers(config=CFG.with_variants(kip966=False, unclean_election=True),
                      topic_configs=(("unclean.leader.election.enable", "false"),))
    _lose_isr(c)
    p = c.part()
    assert p.leader in (1, 2) and p.leader_recovery_state == RECOVERING


def test_without_the_variant_the_topics_setting_keeps_the_partition_offline() -> None:
    c = three_brokers(config=CFG.with_variants(kip966=False), topic_configs=(("unclean.leader.election.enable", "false"),))
    _lose_isr(c)
    assert c.part().leader == NO_LEADER
