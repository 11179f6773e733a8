"""An acknowledged write that no replica fsynced is lost by the filesystem,
on every backend that mounts it (netns, docker, ssh): a one-node reference
cluster on plain file storage (``--storage lazyfs``: its data directory is a
``kraftwerk fs`` mount on the node's host), a hundred acks=all writes, then
the nemesis's power loss (``lose-unfsynced``, or ``torn-write``: each file
keeps a seeded prefix of its un-fsynced writes) through the cluster
contract. Half the writes are made durable first (as the kernel's
periodic write-back would). What the restarted node serves is a prefix of
what was acknowledged: all of the durable half, and of the rest nothing
(power loss) or a torn prefix (torn write); no mount outlives the cluster.

One node keeps each case short (docker and ssh pay for every command); the
lone replica's restart is unclean, so the topic allows an unclean election
to come back at all.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from harness.config import TestConfig
from harness.dbs.reference.hosted import HostedReference
from harness.lazyfs import mounts
from harness.dbs import open_db
from harness.lifecycle.runner import preflight
from harness.rundir.state import RunState
from nemesis.faults import Fault, FaultSpec

pytestmark = pytest.mark.integration

N = 100


def config(backend: str, **extra) -> TestConfig:
    return TestConfig(backend=backend, brokers=1, controllers=1, combined=True, rf=1, min_isr=1, partitions=1,
                      storage="lazyfs", seed=11, variants={"unclean_election": True}, **extra)


def produce(bootstrap: str, topic: str, first: int, end: int) -> list[bytes]:
    """acks=all writes ``first..end-1``, one at a time; the values acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 0})
    acked: list[bytes] = []
    for i in range(first, end):
        p.produce(topic, b"v%03d" % i, partition=0,
                  on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)
        p.flush(10)
    return acked


def watermarks(bootstrap: str, topic: str, deadline: float) -> tuple[int, int]:
    """The partition's offsets once its restarted leader serves it.

    Each try uses a new consumer: a restarted broker answers Metadata before
    it has replayed the topic (UNKNOWN_TOPIC_OR_PARTITION), and librdkafka
    keeps that answer for a consumer's life rather than asking again."""
    while True:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify"})
        try:
            return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            c.close()


def read_back(bootstrap: str, topic: str, timeout: float = 90) -> list[tuple[int, bytes]]:
    """Everything the partition serves once it has a leader again."""
    deadline = time.monotonic() + timeout
    lo, hi = watermarks(bootstrap, topic, deadline)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, lo)])
        got: list[tuple[int, bytes]] = []
        while (not got or got[-1][0] < hi - 1) and hi > lo and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    got.append((m.offset(), m.value()))
                elif m.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consumer error {m.error()}")
        return got
    finally:
        c.close()


def lose_acknowledged_writes(tmp_path: Path, cfg: TestConfig, kind: str) -> tuple[list[bytes], list, HostedReference]:
    """Boot, write, power loss of the node (``kind``) through the contract,
    restart, read back; the db, torn down, is returned for what it made."""
    run_dir = tmp_path / "run"
    (run_dir / "nodes").mkdir(parents=True)
    state = RunState.create(tmp_path, f"fs-{cfg.backend}", run_dir)
    db = open_db(cfg, run_dir, state, preflight(cfg))
    try:
        db.setup()
        topic = cfg.keys()[0].rpartition("-")[0]
        acked = produce(db.client_bootstrap(), topic, 0, N // 2)
        db.nodes.disks.sync("n1")  # the first half reaches the disk, as the kernel's write-back would
        acked += produce(db.client_bootstrap(), topic, N // 2, N)
        fault = Fault(FaultSpec(kind, "all"), db.cluster, random.Random(3))
        value = fault.start()
        assert value["nodes"] == ["n1"] and db.nodes.dead_nodes() == ["n1"]
        fault.stop()
        db.wait_ready(60)
        got = read_back(db.client_bootstrap(), topic)
        if hasattr(db.nodes.disks, "mounted_points"):  # the node's own host holds the mount
            assert db.nodes.disks.mounted_points("n1") == [db.nodes.disks.data_dir("n1")]
    finally:
        db.teardown()
        state.remove()
    return acked, got, db


def assert_lost_a_suffix(acked: list[bytes], got: list) -> None:
    assert len(acked) == N, "every write was acknowledged before the power loss"
    assert N // 2 <= len(got) < len(acked), "no acknowledged write was lost (or a durable one was)"
    assert [o for o, _ in got] == list(range(len(got)))
    assert [v for _, v in got] == acked[:len(got)], "what survived is not a prefix of what was acknowledged"


def assert_torn_as_asked(tmp_path: Path, kind: str, got: list) -> None:
    """A plain power loss keeps exactly what was written back; a torn one
    keeps a prefix of the rest too, cut inside a batch, which the broker's
    start-up recovery truncates (its log says how many torn bytes)."""
    log = (tmp_path / "run" / "nodes" / "n1" / "node.log").read_text()
    if kind == "lose-unfsynced":
        assert len(got) == N // 2 and "torn bytes cut" not in log
    else:
        assert len(got) > N // 2 or "torn bytes cut" in log, "the torn crash kept nothing un-fsynced"


def assert_nothing_mounted(tmp_path: Path) -> None:
    assert not [m for m in mounts.mountinfo() if m["point"].startswith(str(tmp_path))], "a mount outlived the run"
    assert not [r for r in mounts.records() if r["mountpoint"].startswith(str(tmp_path))]


@pytest.mark.parametrize("kind", ["lose-unfsynced", "torn-write"])
def test_netns_an_acknowledged_unfsynced_write_is_lost_by_the_filesystem(tmp_path, kind):
    acked, got, db = lose_acknowledged_writes(tmp_path, config("netns"), kind)
    assert_lost_a_suffix(acked, got)
    assert_torn_as_asked(tmp_path, kind, got)
    assert (tmp_path / "run" / "nodes" / "n1" / "durable").is_dir()
    assert_nothing_mounted(tmp_path)


@pytest.fixture(scope="module")
def docker_engine():
    from tests.docker_engine import shared_engine  # late: the Docker SDK, for the docker cases only

    with shared_engine() as client:
        yield client


@pytest.mark.parametrize("kind", ["lose-unfsynced", "torn-write"])
def test_docker_an_acknowledged_unfsynced_write_is_lost_by_the_filesystem(tmp_path, docker_engine, kind):
    """The container mounts its own data directory (/dev/fuse, SYS_ADMIN);
    the mount goes with the container."""
    acked, got, db = lose_acknowledged_writes(tmp_path, config("docker"), kind)
    assert_lost_a_suffix(acked, got)
    assert_torn_as_asked(tmp_path, kind, got)
    assert docker_engine.containers.list(all=True, filters={"label": f"kraftwerk.tag={db.hosts.tag}"}) == []
    assert_nothing_mounted(tmp_path)


@pytest.fixture(scope="module")
def ssh_hosts(tmp_path_factory):
    from harness.runtimes.throwaway import down, up

    d = tmp_path_factory.mktemp("fs-hosts")
    up(1, d)
    yield d
    down(d)


def host_mounts(hosts_dir: Path) -> list[str]:
    """kraftwerk fs mounts in the ssh host's mount table (its sshd's)."""
    pid = int((hosts_dir / "h1" / "sshd.pid").read_text())
    lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    return [line.split()[4] for line in lines if f" - {mounts.FSTYPE} " in line]


@pytest.mark.parametrize("kind", ["lose-unfsynced", "torn-write"])
def test_ssh_an_acknowledged_unfsynced_write_is_lost_by_the_filesystem(tmp_path, ssh_hosts, kind):
    """The host mounts the node's data directory (``kraftwerk fs`` from the
    bundle), owned by the harness's ssh connection."""
    acked, got, db = lose_acknowledged_writes(tmp_path, config("ssh", hosts=str(ssh_hosts / "hosts.yaml")), kind)
    assert_lost_a_suffix(acked, got)
    assert_torn_as_asked(tmp_path, kind, got)
    assert host_mounts(ssh_hosts) == []
    assert_nothing_mounted(tmp_path)


def test_ssh_a_mount_goes_with_the_connection_that_made_it(ssh_hosts):
    """A harness that dies (its ssh connection drops) leaves no mount on the
    host: ``kraftwerk fs mount --owner-ssh`` is owned by that connection's
    sshd process, and its server unmounts itself once it is gone."""
    from harness.runtimes.ssh import SshHosts
    from harness.runtimes.ssh import preflight as ssh_preflight
    from harness.lazyfs.nodes import RemoteDisks

    checked = ssh_preflight(str(ssh_hosts / "hosts.yaml"), ["n1"])
    hosts = SshHosts(checked, None, "owner")
    hosts.install()
    disks = RemoteDisks(hosts, seed=1)
    disks.mount("n1")
    assert host_mounts(ssh_hosts) == [disks.data_dir("n1")]
    checked["n1"][1].close()  # as when the harness is SIGKILLed
    deadline = time.monotonic() + 20
    while host_mounts(ssh_hosts) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host_mounts(ssh_hosts) == []
