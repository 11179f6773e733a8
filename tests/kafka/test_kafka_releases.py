"""Kafka 3.3 .. 4.4 as dbs: the one release table (``harness.dbs.kafka.releases``)
and what the harness does from it, without starting Kafka: the storage format's
features, the variants each release can behave as, the keys it knows, and the
refusal of a version that does not exist (one line, exit 2, nothing left in the
cache). Also the observer's samplers (``harness.dbs.kafka.watch``) on made-up
reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.dbs.kafka import dist, props, releases
from harness.dbs.kafka.props import NodePlan
from harness.dbs.kafka.watch import QuorumWatch, SmallIsrSamples
from harness.errors import HarnessError, UsageError

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": "", **env})


def test_the_table_has_every_kraft_era_minor_and_its_latest_patch() -> None:
    assert list(releases.RELEASES) == ["3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9",
                                       "4.0", "4.1", "4.2", "4.3", "4.4"]
    assert releases.MATRIX == ("3.3.2", "3.4.1", "3.5.2", "3.6.2", "3.7.2", "3.8.1", "3.9.2",
                               "4.0.2", "4.1.2", "4.2.2", "4.3.2", "4.4.0")
    assert releases.MATRIX[-1] == dist.DEFAULT_VERSION
    assert releases.is_listed("3.7.0") and not releases.is_listed("3.7.9")


@pytest.mark.parametrize("version, features", [
    ("3.3.2", []), ("3.7.2", []),  # 3.3-3.7: format refuses --feature
    ("3.8.1", []),                  # accepts it, ignores an unknown feature
    ("3.9.2", []),                  # refuses eligible.leader.replicas.version
    ("4.0.2", ["eligible.leader.replicas.version=1"]),
    ("4.4.0", ["eligible.leader.replicas.version=1"]),
])
def test_the_elr_feature_is_given_at_format_only_where_the_release_has_it(version, features) -> None:
    assert props.format_features({}, version) == features


def test_kip966_off_formats_elr_off_from_4_0_and_means_no_elr_before() -> None:
    assert props.format_features({"kip966": False}, "4.1.2") == ["eligible.leader.replicas.version=0"]
    assert props.format_features({"kip966": False}, "3.9.2") == []
    assert not releases.elr_on("3.9.2", {}) and releases.elr_on("4.0.2", {}) and releases.elr_on("4.1.2", {})
    releases.check_variants("3.6.2", {"kip966": False})


def test_kip966_on_is_refused_on_a_release_without_elr_in_one_line() -> None:
    with pytest.raises(UsageError, match=r"kip966=on: Kafka 3\.9\.2 has no eligible leader replicas"):
        releases.check_variants("3.9.2", {"kip966": True})
    releases.check_variants("4.0.2", {"kip966": True})


def test_unclean_election_is_refused_where_kraft_ignores_it() -> None:
    with pytest.raises(UsageError, match="KAFKA-12670"):
        releases.check_variants("3.8.1", {"unclean_election": True})
    releases.check_variants("3.9.2", {"unclean_election": True})


def test_share_coordinator_keys_are_written_from_4_0_only() -> None:
    node = NodePlan("n1", 1, ("broker", "controller"), "127.0.0.1", 9001, 9002)
    p = props.server_properties(node, [node], "/d", brokers=3, rf=3, min_isr=2, partitions=1, variants={},
                                overrides={})
    assert not any(k.startswith("share.") for k in releases.applicable("3.9.2", p))
    assert releases.applicable("4.0.2", p) == p and "share.coordinator.state.topic.min.isr" in p


@pytest.mark.parametrize("version, words", [
    ("9.9.9", "not a KRaft-era release kraftwerk knows (3.3.0 .. 4.4.0"),
    ("2.8.2", "not a KRaft-era release"),
    ("3.7.2-rc1", "must be MAJOR.MINOR.PATCH"),
])
def test_a_version_outside_the_table_is_refused_before_maven(version, words) -> None:
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(".", r"\.")):
        releases.release_for(version)


def test_a_distributions_own_build_is_read_by_its_minor() -> None:
    assert releases.release_for("4.1.0-SNAPSHOT", home=True).minor == "4.1"


def test_the_observer_describes_partitions_by_metadata_before_3_8() -> None:
    assert [r.minor for r in releases.RELEASES.values() if not r.describe_partitions] == [
        "3.3", "3.4", "3.5", "3.6", "3.7"]


#: 3.7.9 is a patch of a known minor that Central never served: the real Maven is asked
@pytest.mark.parametrize("version", ["9.9.9", "2.8.2", "latest", "3.7.9"])
def test_kraftwerk_run_refuses_a_wrong_version_with_exit_2_and_leaves_no_cache(tmp_path, version) -> None:
    cache = tmp_path / "cache"
    r = kraftwerk("run", "--db", "kafka", "--kafka-version", version, "--out", str(tmp_path / "r"),
                  env={"KRAFTWERK_CACHE": str(cache)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--kafka-version" in lines[0] and "Traceback" not in r.stderr
    assert not cache.exists() and not (tmp_path / "r").exists()


def test_a_variant_the_release_lacks_is_refused_before_anything_starts(tmp_path) -> None:
    cache = tmp_path / "cache"
    r = kraftwerk("run", "--db", "kafka", "--kafka-version", "3.7.2", "--variant", "kip966=on",
                  "--out", str(tmp_path / "r"), env={"KRAFTWERK_CACHE": str(cache)})
    assert r.returncode == 2 and "predates KIP-966's eligible leader replicas" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not cache.exists()


#: Maven 3.8's last line for a release Central does not have (first try, then within its update interval)
MISSING = ("[ERROR] Failed to execute goal on project kraftwerk-kafka-runtime: Could not resolve dependencies for "
           "project kraftwerk:kraftwerk-kafka-runtime:pom:1: The following artifacts could not be resolved: "
           "org.apache.kafka:kafka_2.13:jar:3.7.9, org.apache.kafka:kafka-clients:jar:3.7.9: Could not find "
           "artifact org.apache.kafka:kafka_2.13:jar:3.7.9 in central (https://repo.maven.apache.org/maven2) "
           "-> [Help 1]")
CACHED = ("\x1b[0m[ERROR] Failed to execute goal on project kraftwerk-kafka-runtime: Could not resolve dependencies "
          "for project kraftwerk:kraftwerk-kafka-runtime:pom:1: org.apache.kafka:kafka_2.13:jar:3.7.9 was not found "
          "in https://repo.maven.apache.org/maven2 during a previous attempt.")


@pytest.mark.parametrize("output", [MISSING, CACHED])
def test_mavens_not_found_is_a_usage_error_naming_the_release(output) -> None:
    e = dist.maven_error("3.7.9", output, 1)
    assert isinstance(e, UsageError) and str(e).startswith("--kafka-version 3.7.9: Kafka 3.7.9 is not on Maven")


def test_any_other_maven_failure_is_the_harness_s_with_mavens_words_whole() -> None:
    e = dist.maven_error("3.7.2", "[ERROR] Failed to execute goal on project x: Could not transfer artifact "
                                  "org.apache.kafka:kafka_2.13:jar:3.7.2 from/to central: Connection reset", 1)
    assert isinstance(e, HarnessError) and "Connection reset" in str(e) and "Failed to execute" not in str(e)


def test_a_failed_fetch_leaves_no_directory_in_the_cache(tmp_path, monkeypatch) -> None:
    """The real Maven, asked for a patch of a known minor that Central never
    served: exit 2's error, and the cache as it was (no version directory, no
    lock file, no cache root made for it)."""
    if dist.shutil.which("mvn") is None:
        pytest.skip("mvn is not installed (scripts/bootstrap installs it)")
    monkeypatch.setenv("KRAFTWERK_CACHE", str(tmp_path / "cache"))
    with pytest.raises(UsageError, match="is not on Maven Central"):
        dist.ensure("3.7.9")
    assert not (tmp_path / "cache").exists()


# --- the observer's samplers -----------------------------------------------------------------


def test_quorum_watch_emits_changes_and_marks_a_restarted_nodes_old_file_not_fresh() -> None:
    reads = iter([
        {"c1": (1, {"leaderId": 101, "leaderEpoch": 1, "votedId": -1})},
        {"c1": (1, {"leaderId": 101, "leaderEpoch": 1, "votedId": -1})},   # unchanged: nothing
        {"c1": (1, None)},                                                  # down
        {"c1": (2, {"leaderId": 101, "leaderEpoch": 1, "votedId": -1})},   # back, old file
        {"c1": (2, {"leaderId": 102, "leaderEpoch": 2, "votedId": -1})},   # its own write
        {"c1": (3, {"leaderId": 102, "leaderEpoch": 2, "votedId": -1})},   # restarted unseen, same file
        {"c1": (3, {"leaderId": 102, "leaderEpoch": 2, "votedId": -1}, True)},  # sent a SIGTERM
    ])
    out: list[tuple[str, str, dict]] = []
    w = QuorumWatch(lambda: next(reads), {101: "c1", 102: "c2"})
    for _ in range(7):
        w.poll(lambda kind, node, data: out.append((kind, node, data)))
    assert [k for k, _n, _d in out].count("quorum_poll") == 7  # every look marked, changed or not
    out = [o for o in out if o[0] == "quorum_state"]
    got = [(d.get("alive"), d.get("leader"), d.get("epoch"), d.get("fresh")) for _k, _n, d in out]
    assert got == [(True, "c1", 1, True), (False, None, None, None), (True, "c1", 1, False),
                   (True, "c2", 2, True), (True, "c2", 2, False), (True, "c2", 2, False)]
    assert [d.get("stopping") for _k, _n, d in out] == [None] * 5 + [True]


def test_small_isr_samples_cover_every_poll_while_small_and_the_first_after() -> None:
    s = SmallIsrSamples(min_isr=2)
    out: list[dict] = []
    states = [{"t-0": (1, 4, (1, 2, 3), (1, 2, 3))}, {"t-0": (1, 4, (1, 2, 3), (1,))},
              {"t-0": (1, 4, (1, 2, 3), (1,))}, {"t-0": (1, 4, (1, 2, 3), (1, 2))}, {"t-0": (1, 4, (1, 2, 3), (1, 2))}]
    for i, st in enumerate(states):
        s.after_poll(st, {"t-0": 10 * i}, lambda kind, node, data: out.append(data))
    assert [(d["poll"], d["small"], d["hw"]) for d in out] == [(2, True, 10), (3, True, 20), (4, False, 30)]
