"""What the test configuration knows of ``--db kafka``'s settings, to refuse
a configuration Kafka cannot run before anything starts (the properties
themselves are written by :mod:`harness.dbs.kafka.props`)."""

from __future__ import annotations

from harness.errors import UsageError

#: variants with no Kafka setting: Kafka 4.4 always behaves as if they were on
PROTOCOL_ONLY = ("kip101", "strict_isr_expand", "maximal_isr", "producer_sequence_checks")


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` pairs (``--kafka-config``); a malformed one is bad input."""
    out: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--kafka-config wants KEY=VALUE, got {item!r}")
        out[k.strip()] = v.strip()
    return out
