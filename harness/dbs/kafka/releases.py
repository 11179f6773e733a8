"""What differs between the KRaft-era Kafka releases, in one table.

``--kafka-version`` takes any release from 3.3 to 4.4. Everything the
harness does differently per release is read from :data:`RELEASES` (one row
per minor version) and nowhere else: which ``kafka-storage format`` flags
exist, which features it can be given, whether the release has KIP-966's
eligible leader replicas (ELR), which ``server.properties`` keys it knows,
and which admin APIs the observer can ask. docs/kafka-releases.md has the
same table for readers, with where each fact was checked (the released jars
and Kafka's git history).

A version is refused in one line, before Maven is asked, when it is not
``MAJOR.MINOR.PATCH`` or its minor version is not a row here (2.x had no
KRaft worth testing; a 9.9.9 does not exist). A patch this table does not
list (a release newer than the table) is fetched; Maven's "not found" is
then a usage error too (:mod:`harness.dbs.kafka.dist`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import UsageError

#: MAJOR.MINOR.PATCH, nothing else (no -SNAPSHOT, no rc: Maven Central has neither)
VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
#: a distribution's own jars may be a build of one's own
HOME_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(-[A-Za-z0-9.]+)?$")

#: ELR (KIP-966) in a release: absent (3.x: only behind unstable metadata
#: versions), a format-time feature off by default (4.0), on by default (4.1+)
ELR_NONE, ELR_OPT_IN, ELR_DEFAULT = "none", "opt-in", "default"

#: the feature the kip966 variant sets at format time (4.0+)
ELR_FEATURE = "eligible.leader.replicas.version"


@dataclass(frozen=True)
class Release:
    """One minor version's differences, as the harness needs them.

    ``patches``: every patch release Maven Central serves (``maven-metadata.xml``
    of ``org.apache.kafka:kafka_2.13``), the last one the matrix's.
    ``format_feature``: ``kafka-storage format`` accepts ``--feature``
    (3.8+; 3.3-3.7's argparse refuses the flag, exit 1).
    ``elr``: :data:`ELR_NONE` / :data:`ELR_OPT_IN` / :data:`ELR_DEFAULT`.
    ``unclean_auto``: the KRaft controller elects an out-of-ISR leader by
    itself when ``unclean.leader.election.enable`` is true (3.9+; before,
    ``uncleanLeaderElectionEnabledForTopic`` returns false, KAFKA-12670).
    ``share_coordinator``: the ``share.coordinator.*`` keys exist (4.0+).
    ``describe_partitions``: brokers answer DescribeTopicPartitions (API 75,
    KIP-966's admin API: 3.8+; 3.7.2's brokers do not list it in ApiVersions,
    seen here); before, the observer reads Metadata.
    ``metadata_version``: what ``format`` writes by default.
    """

    minor: str
    patches: tuple[str, ...]
    metadata_version: str
    format_feature: bool
    elr: str
    unclean_auto: bool
    share_coordinator: bool
    describe_partitions: bool
    java: int

    @property
    def latest(self) -> str:
        return self.patches[-1]


def _row(minor: str, last_patch: int, mv: str, *, java: int = 8) -> Release:
    major, mi = (int(x) for x in minor.split("."))
    v = (major, mi)
    elr = ELR_DEFAULT if v >= (4, 1) else ELR_OPT_IN if v == (4, 0) else ELR_NONE
    return Release(minor, tuple(f"{minor}.{p}" for p in range(last_patch + 1)), mv,
                   format_feature=v >= (3, 8), elr=elr, unclean_auto=v >= (3, 9),
                   share_coordinator=v >= (4, 0), describe_partitions=v >= (3, 8), java=java)


#: minor version -> its row; metadata versions from each release's own
#: ``kafka-storage format`` (docs/kafka-releases.md, "Per-release differences")
RELEASES: dict[str, Release] = {r.minor: r for r in (
    _row("3.3", 2, "3.3-IV3"),
    _row("3.4", 1, "3.4-IV0"),
    _row("3.5", 2, "3.5-IV2"),
    _row("3.6", 2, "3.6-IV2"),
    _row("3.7", 2, "3.7-IV4"),
    _row("3.8", 1, "3.8-IV0"),
    _row("3.9", 2, "3.9-IV0"),
    _row("4.0", 2, "4.0-IV3", java=17),
    _row("4.1", 2, "4.1-IV1", java=17),
    _row("4.2", 2, "4.2-IV1", java=17),
    _row("4.3", 2, "4.3-IV0", java=17),
    _row("4.4", 0, "4.4-IV2", java=17),
)}

#: the matrix: the latest patch of every minor
MATRIX: tuple[str, ...] = tuple(r.latest for r in RELEASES.values())


def known_range() -> str:
    first, last = next(iter(RELEASES.values())), list(RELEASES.values())[-1]
    return f"{first.patches[0]} .. {last.latest}"


def release_for(version: str, home: bool = False) -> Release:
    """The row of ``version``'s minor, or a one-line UsageError (malformed,
    or outside 3.3 .. 4.4). ``home``: the version of a distribution's jars
    (``--kafka-home``), which may carry a suffix (``4.1.0-SNAPSHOT``)."""
    m = (HOME_VERSION_RE if home else VERSION_RE).match(version)
    if not m:
        raise UsageError(f"--kafka-version must be MAJOR.MINOR.PATCH (e.g. 3.7.2), got {version!r}")
    row = RELEASES.get(f"{int(m.group(1))}.{int(m.group(2))}")
    if row is None:
        raise UsageError(f"--kafka-version {version}: not a KRaft-era release kraftwerk knows "
                         f"({known_range()}; latest patches: {', '.join(MATRIX)})")
    return row


def is_listed(version: str) -> bool:
    """Whether Maven Central served ``version`` when this table was written."""
    return version in release_for(version).patches


def check_variants(version: str, variants: dict[str, bool]) -> None:
    """Refuse, in one line, a variant the release cannot behave as: ELR
    (``kip966=on``) on a release without it, and ``unclean_election=on``
    where KRaft ignores the setting. ``kip966`` left unset or off on a
    release without ELR means what that release does: no ELR."""
    row = release_for(version, home=True)
    if variants.get("kip966") is True and row.elr == ELR_NONE:
        raise UsageError(f"variant kip966=on: Kafka {version} has no eligible leader replicas (the "
                         f"{ELR_FEATURE} feature exists from 4.0); drop it, or kip966=off, which is what {row.minor} does")
    if variants.get("unclean_election") and not row.unclean_auto:
        raise UsageError(f"variant unclean_election=on: Kafka {version}'s KRaft controller never elects an "
                         "out-of-ISR leader by itself (KAFKA-12670, honoured from 3.9.0): use 3.9 or later")


def format_features(version: str, variants: dict[str, bool]) -> list[str]:
    """The ``kafka-storage format --feature`` values for ``version``: the
    ELR feature where the release has it (on unless ``kip966`` is off, the
    reference implementation's default), nothing before 4.0 (3.3-3.7 refuse
    the flag, 3.8 ignores an unknown feature, 3.9 refuses this one)."""
    row = release_for(version, home=True)
    if row.elr == ELR_NONE:
        return []
    return [f"{ELR_FEATURE}={1 if variants.get('kip966', True) else 0}"]


def elr_on(version: str, variants: dict[str, bool]) -> bool:
    """Whether a cluster of ``version`` formatted by the harness runs with ELR."""
    return bool(format_features(version, variants)) and variants.get("kip966", True)


def applicable(version: str, props: dict[str, str]) -> dict[str, str]:
    """``props`` without the keys ``version`` does not know (Kafka ignores an
    unknown key without a word, so leaving them in only misleads a reader
    of server.properties): ``share.coordinator.*`` before 4.0."""
    row = release_for(version, home=True)
    if row.share_coordinator:
        return dict(props)
    return {k: v for k, v in props.items() if not k.startswith("share.coordinator.")}


@dataclass(frozen=True)
class Bug:
    """A fixed bug of the KRaft era that kraftwerk finds again on the releases
    that still have it (docs/kafka-releases.md has the evidence). ``affected``:
    the minor versions whose latest patch has it; ``finds``: the findings it
    explains; ``needs``: a fault kind without which those findings cannot
    come from it (the run's faults must name one)."""

    id: str
    summary: str
    affected: tuple[str, ...]
    fixed_in: str
    finds: tuple[str, ...]
    needs: tuple[str, ...] = ()


_3X_TO_36 = ("3.3", "3.4", "3.5", "3.6")

#: the bugs the release campaigns catch (docs/kafka-releases.md, "Measured")
BUGS: tuple[Bug, ...] = (
    Bug("KAFKA-15583", "the high watermark advances while the ISR is below min.insync.replicas", _3X_TO_36,
        "3.7.0", ("hw-advanced-under-min-isr", "lost-read")),
    Bug("KAFKA-15489", "a KRaft leader cut from the other voters never resigns", _3X_TO_36, "3.7.0",
        ("stale-raft-leader",)),
    Bug("KIP-966", "the last replica standing loses its unflushed tail and is re-elected",
        (*_3X_TO_36, "3.7", "3.8", "3.9"), "4.0.0 (ELR; on by default for new clusters from 4.1.0)",
        ("lost-acked-write", "lost-write", "unseen", "lost-read", "committed-truncated", "inconsistent-offsets"),
        needs=("lose-unfsynced", "torn-write", "story", "last-replica-standing")),
)


def explained(version: str, anomaly_types: list[str], faults: list[str]) -> tuple[list[str], list[str]]:
    """(the findings no known bug of ``version`` explains, the bugs that
    explain the rest), for a run whose faults are named in ``faults``
    (the run's flags or fault names)."""
    minor = release_for(version, home=True).minor
    said = " ".join(faults)
    left, bugs = [], []
    for t in anomaly_types:
        hit = [b.id for b in BUGS if minor in b.affected and t in b.finds
               and (not b.needs or any(n in said for n in b.needs))]
        if hit:
            bugs += [b for b in hit if b not in bugs]
        else:
            left.append(t)
    return left, bugs
