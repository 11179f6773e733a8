"""What the test configuration knows of ``--db kafka``'s settings, to refuse
a configuration Kafka cannot run before anything starts (the properties
themselves are written by :mod:`harness.dbs.kafka.props`).

Each protocol variant (``reference_impl.core.config.Variants``) means one
rule; :data:`VARIANT_MEANINGS` says, for either setting, the Kafka
configuration or releases that mean the same rule, or that none does.
:func:`kafka_counterpart` answers for one setting and one release, and
:func:`check_variants` refuses, in one line, a setting Kafka cannot behave
as: those given explicitly for ``--db kafka``, and every one (defaults
included) for ``kraftwerk compare``, which must run the same rules on both
sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from harness.errors import UsageError

#: variants with no Kafka setting: Kafka 4.4 always behaves as if they were on
PROTOCOL_ONLY = ("kip101", "strict_isr_expand", "maximal_isr", "producer_sequence_checks")


@dataclass(frozen=True)
class Meaning:
    """A variant's two settings on Kafka. ``on``: what a release from
    ``on_from`` (major, minor) does to behave as ``on``; a release before it
    behaves as ``off`` by itself. ``off``: the configuration that turns the
    rule off on a release from ``on_from``, ``None`` where there is none
    (``why`` says so)."""

    name: str
    rule: str
    on: str
    off: str | None
    on_from: tuple[int, int] = (3, 3)  # the first KRaft-era release kraftwerk runs
    why: str = ""


VARIANT_MEANINGS: dict[str, Meaning] = {m.name: m for m in (
    Meaning("kip101", "KIP-101's epoch-based truncation", "always (no setting)", None,
            why="no KRaft release truncates a new follower to its high watermark"),
    Meaning("kip966", "KIP-966's eligible leader replicas", "eligible.leader.replicas.version=1 (format feature)",
            "eligible.leader.replicas.version=0 (format feature)", on_from=(4, 0)),
    Meaning("min_isr_hw_gate", "KAFKA-15583's hold on the high watermark while ISR < min.insync.replicas",
            "always (Partition.maybeIncrementLeaderHW; no setting)", None, on_from=(3, 7),
            why="Kafka 3.7.0 and later hold the high watermark while the ISR is below min.insync.replicas, "
                "with or without ELR, and have no setting to stop it (KAFKA-15583, "
                "Partition.maybeIncrementLeaderHW); 3.6.2 is the last release without the rule"),
    Meaning("unclean_election", "unclean leader election for every topic", "unclean.leader.election.enable=true",
            "unclean.leader.election.enable=false"),
    Meaning("strict_isr_expand", "the wait for the leader epoch's start offset before an ISR expansion", "always (no setting)",
            None, why="Kafka has no setting for it"),
    Meaning("maximal_isr", "KIP-497's ISR changes counting once committed",
            "always (no setting)", None,
            why="no KRaft release applies an ISR change before the controller commits it"),
    Meaning("producer_sequence_checks", "KIP-98's producer sequence checks", "always (no setting)",
            None, why="Kafka has no setting for it"),
)}


def release_of(version: str) -> tuple[int, int]:
    """(major, minor) of ``MAJOR.MINOR.PATCH[-suffix]``; a malformed version
    is the release the harness runs by default (the test config refuses it
    on its own)."""
    m = re.match(r"^(\d+)\.(\d+)\.", version)
    return (int(m.group(1)), int(m.group(2))) if m else (4, 4)


def kafka_counterpart(name: str, value: bool, version: str = "4.4.0") -> tuple[str | None, str]:
    """(Kafka's counterpart of ``name=value`` on ``version``, or ``None``
    and the reason)."""
    m = VARIANT_MEANINGS[name]
    before = release_of(version) < m.on_from
    since = f"{m.on_from[0]}.{m.on_from[1]}"
    if value:
        if before:
            return None, f"Kafka {version} predates {m.rule}, which arrived in {since}"
        return m.on, ""
    if before:
        return f"Kafka {version} as it is (it predates {m.rule})", ""
    if m.off is None:
        return None, m.why
    return m.off, ""


def check_variants(variants: Mapping[str, bool], version: str = "4.4.0") -> None:
    """Refuse, in one line, a variant setting ``version`` cannot behave as.
    The protocol-only ones keep their words (they exist only in the
    reference implementation)."""
    for name, value in variants.items():
        if name not in VARIANT_MEANINGS:
            continue
        kafka, why = kafka_counterpart(name, bool(value), version)
        if kafka is not None:
            continue
        state = "on" if value else "off"
        if name in PROTOCOL_ONLY and not value:
            raise UsageError(f"variant {name} exists only in the reference implementation (Kafka {version} always "
                             f"behaves as {name}=on): drop it for --db kafka")
        raise UsageError(f"variant {name}={state} has no counterpart on Kafka {version}: {why}")


def mapping(variants: Mapping[str, bool], version: str = "4.4.0") -> dict[str, dict[str, object]]:
    """Per variant: its setting, and its counterpart on Kafka ``version``
    (``None`` and the reason when there is none)."""
    out: dict[str, dict[str, object]] = {}
    for name, value in variants.items():
        if name in VARIANT_MEANINGS:
            kafka, why = kafka_counterpart(name, bool(value), version)
            out[name] = {"on": bool(value), "kafka": kafka, **({"refused": why} if kafka is None else {})}
    return out


def mapping_lines(variants: Mapping[str, bool], version: str = "4.4.0") -> list[str]:
    """One line per variant: its setting and what it is on Kafka ``version``,
    as ``kraftwerk compare`` prints them."""
    return [f"{name}={'on' if row['on'] else 'off'} -> {row['kafka'] or 'refused: ' + str(row['refused'])}"
            for name, row in mapping(variants, version).items()]


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` pairs (``--kafka-config``); a malformed one is bad input."""
    out: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--kafka-config wants KEY=VALUE, got {item!r}")
        out[k.strip()] = v.strip()
    return out
