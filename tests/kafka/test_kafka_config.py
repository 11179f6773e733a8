"""db kafka's configuration: server.properties from the test config, the
variant mapping, and the one-line refusals (exit 2, nothing started)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import TestConfig, build_config
from harness.dbs.kafka.db import capabilities_for as kafka_caps
from harness.dbs.reference.hosted import capabilities_for as reference_caps
from harness.lifecycle.runner import preflight as runner_preflight
from harness.errors import UsageError
from harness.dbs.kafka import dist, props
from harness.dbs.kafka.props import NodePlan

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args, env=None):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": "", **(env or {})})


NODES = [NodePlan("n1", 1, ("broker",), "127.0.0.1", 9001, 9002),
         NodePlan("c1", 101, ("controller",), "127.0.0.1", 9003, 9004),
         NodePlan("n2", 2, ("broker", "controller"), "127.0.0.1", 9005, 9006)]


def _props(node, **kw):
    args = dict(brokers=2, rf=2, min_isr=2, partitions=3, variants={}, overrides={})
    args.update(kw)
    return props.server_properties(node, NODES, "/d", **args)


def test_server_properties_carry_roles_quorum_listeners_and_the_test_settings():
    p = _props(NODES[2], variants={"unclean_election": True})
    assert p["process.roles"] == "broker,controller" and p["node.id"] == "2"
    assert p["controller.quorum.voters"] == "101@127.0.0.1:9004,2@127.0.0.1:9006"
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:9005,CONTROLLER://127.0.0.1:9006"
    assert p["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9005"
    assert (p["min.insync.replicas"], p["default.replication.factor"], p["num.partitions"]) == ("2", "2", "3")
    assert p["unclean.leader.election.enable"] == "true"
    assert p["replica.lag.time.max.ms"] == "3000" and p["log.dirs"] == "/d"


def test_controller_only_node_has_no_broker_listener():
    p = _props(NODES[1])
    assert p["process.roles"] == "controller" and p["listeners"] == "CONTROLLER://127.0.0.1:9004"
    assert "advertised.listeners" not in p and p["unclean.leader.election.enable"] == "false"


def test_kafka_config_overrides_win():
    p = _props(NODES[0], overrides={"replica.lag.time.max.ms": "10000", "log.flush.interval.messages": "1"})
    assert p["replica.lag.time.max.ms"] == "10000" and p["log.flush.interval.messages"] == "1"


def test_kip966_variant_is_the_eligible_leader_replicas_feature():
    assert props.format_features({}, dist.DEFAULT_VERSION) == ["eligible.leader.replicas.version=1"]
    assert props.format_features({"kip966": False}, dist.DEFAULT_VERSION) == ["eligible.leader.replicas.version=0"]


@pytest.mark.parametrize("variant", props.PROTOCOL_ONLY)
def test_protocol_only_variants_are_refused_on_db_kafka(tmp_path, variant):
    r = kraftwerk("run", "--db", "kafka", "--out", str(tmp_path / "r"), "--variant", f"{variant}=off")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"variant {variant} exists only in the reference implementation" in lines[0]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args, words", [
    (["--nemesis", "partition"], "--nemesis partition on --db kafka"),
    (["--nemesis", "kill,latency"], "--nemesis latency on --db kafka"),
    (["--nemesis", "lose-unfsynced"], "--nemesis lose-unfsynced on --db kafka"),
    (["--scenario", "unclean-loss"], "--scenario unclean-loss uses partition on --db kafka"),
    (["--kafka-config", "novalue"], "--kafka-config wants KEY=VALUE"),
    (["--storage", "pagecache"], "--storage pagecache is the reference broker's own emulation"),
    (["--backend", "ssh"], "--backend ssh needs --hosts"),
    (["--kafka-version", "latest"], "--kafka-version"),
])
def test_what_db_kafka_cannot_do_on_local_is_one_line_exit_2(tmp_path, args, words):
    r = kraftwerk("run", "--db", "kafka", "--out", str(tmp_path / "r"), *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert not (tmp_path / "r").exists()


def test_kafka_flags_only_apply_to_db_kafka():
    with pytest.raises(UsageError, match="only for --db kafka"):
        build_config(None, {"kafka_config": ["a=b"]})


def test_kafka_home_that_is_not_a_distribution_is_bad_input(tmp_path):
    r = kraftwerk("run", "--db", "kafka", "--out", str(tmp_path / "r"), "--kafka-home", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert "not a Kafka binary distribution" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_kafka_home_uses_the_distribution_libs(tmp_path):
    cached = dist.ensure()  # the pinned release, fetched on first use
    home = tmp_path / "kafka_2.13-4.4.0"
    home.mkdir()
    (home / "libs").symlink_to(cached.libs)
    got = dist.ensure(home=home)
    assert got.libs == home / "libs" and got.version == cached.version == dist.DEFAULT_VERSION


def test_fetch_resolves_the_pinned_release_into_its_cache(tmp_path, monkeypatch):
    """A fresh cache: Maven resolves kafka_2.13 and its runtime jars once,
    and a second call reuses them without Maven."""
    monkeypatch.setenv("KRAFTWERK_CACHE", str(tmp_path))
    got = dist.ensure(dist.DEFAULT_VERSION)
    libs = tmp_path / "kafka" / dist.DEFAULT_VERSION / "libs"
    assert got.libs == libs
    names = {p.name for p in libs.iterdir()}
    for jar in ("kafka_2.13", "kafka-server", "kafka-raft", "kafka-metadata", "kafka-storage", "kafka-clients",
                "kafka-group-coordinator", "kafka-transaction-coordinator", "kafka-share-coordinator"):
        assert f"{jar}-{dist.DEFAULT_VERSION}.jar" in names, jar
    assert any(n.startswith("log4j-core-") for n in names) and any(n.startswith("log4j-slf4j") for n in names)
    monkeypatch.setenv("PATH", "/nonexistent")  # no mvn now: must come from the cache
    assert dist.ensure(dist.DEFAULT_VERSION) == got


@pytest.mark.parametrize("kw, words", [
    # a story cuts links: the local backend cannot cut a JVM's
    ({"scenario": "isr-crash"}, "story:isr-crash needs partition"),
    # power loss is kraftwerk fs's: not there with storage os
    ({"backend": "netns", "storage": "file", "nemesis": ["lose-unfsynced"]}, "lose-unfsynced needs power-loss"),
])
def test_a_fault_db_kafka_cannot_make_on_its_backend_is_refused_before_anything_starts(kw, words):
    from harness.config import TestConfig
    from harness.lifecycle.runner import preflight

    with pytest.raises(UsageError, match=words):
        preflight(TestConfig(db="kafka", **kw))


@pytest.mark.parametrize("backend", ["netns", "docker", "ssh"])
def test_latency_is_a_capability_of_both_dbs_on_every_kernel_backend(backend, tmp_path):
    extra = {"hosts": str(tmp_path / "hosts.yaml")} if backend == "ssh" else {}
    assert "latency" in kafka_caps(TestConfig(db="kafka", backend=backend, nemesis=["latency"], **extra))
    assert "latency" in reference_caps(TestConfig(backend=backend, nemesis=["latency"], **extra))
    assert "latency" not in kafka_caps(TestConfig(db="kafka", nemesis=["kill"]))  # local: one address per broker


def test_a_kafka_run_with_latency_on_netns_passes_preflight():
    if os.geteuid() != 0:
        pytest.fail("the netns backend needs root (these tests run as root)")
    runner_preflight(TestConfig(db="kafka", backend="netns", nemesis=["latency", "partition"]))


@pytest.mark.parametrize("fault", ["clock", "clock:one", "clock:majority", "clock-strobe", "clock-strobe:primaries"])
def test_every_clock_fault_on_db_kafka_starts_the_jvms_under_libfaketime(fault):
    """Without LD_PRELOAD of libfaketime the JVM never reads the offset
    file, so a clock fault would be recorded but never made."""
    from harness.config import TestConfig
    from harness.dbs.kafka.db import wants_clock

    assert wants_clock(TestConfig(db="kafka", backend="netns", nemesis=[fault]))
    assert not wants_clock(TestConfig(db="kafka", backend="netns", nemesis=["kill:one"]))


def test_db_kafka_mounts_kraftwerk_fs_on_the_host_that_runs_the_jvm(tmp_path):
    """A power loss drops what the JVM did not fsync only if its data
    directory is the kraftwerk fs mount: in a container (or on an ssh host)
    the mount is made there, with ``kraftwerk fs`` on that host; a mount
    made on this machine under a container's bind mount is never seen inside
    it (docker binds are private), so the JVM would write past it."""
    from harness.runtimes.docker import DockerHosts
    from harness.config import TestConfig
    from harness.dbs.kafka.db import KafkaDB
    from harness.lazyfs.nodes import NodeDisks, RemoteDisks

    cfg = TestConfig(db="kafka", backend="docker", nemesis=["lose-unfsynced"])
    assert cfg.storage == "lazyfs"
    hosts = DockerHosts(None, "t0", 7, None, tmp_path)  # no engine needed: nothing is started
    hosts.addresses = {n: f"10.7.0.{i + 2}" for i, n in enumerate(cfg.node_names())}
    disks = KafkaDB(cfg, tmp_path, None, hosts).make_disks()  # type: ignore[arg-type]
    assert isinstance(disks, RemoteDisks) and not isinstance(disks, NodeDisks)
    assert disks.data_dir("n1") == f"{hosts.node_dir('n1')}/data"


def test_a_story_on_db_kafka_on_a_kernel_backend_gets_kraftwerk_fs_for_its_power_loss():
    """A story's power loss on a JVM is made by kraftwerk fs: the default
    storage of such a run is lazyfs (as for lose-unfsynced), and where it
    is not, the refusal says where a power loss can be had."""
    from harness.config import TestConfig
    from harness.lifecycle.runner import preflight

    cfg = TestConfig(db="kafka", backend="netns", scenario="isr-crash")
    assert cfg.storage == "lazyfs"
    preflight(cfg)  # every fault of the story can be made
    with pytest.raises(UsageError, match=r"lose-unfsynced needs power-loss, .*--storage lazyfs"):
        preflight(TestConfig(db="kafka", backend="netns", storage="file", nemesis=["lose-unfsynced"]))
