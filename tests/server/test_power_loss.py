"""The lose-unfsynced fault on a real node process: in memory-cache storage
mode, ``POST /power-loss`` reverts every file to its last fsync and exits.
Kafka does not fsync appends by default (log.flush.interval.messages unset,
seed 003: durability comes from replication), so a single replica loses its
un-fsynced tail; with a flush after every message nothing is lost."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reference_impl.server.launcher import ClusterError, LocalCluster
from reference_impl.server.procs import alive

pytestmark = pytest.mark.integration


def _run(tmp_path, flush_every: str | None) -> tuple[int, int]:
    """Produce 100 acks=1 messages to a one-node cluster, cut the power,
    restart; return (acked, high watermark after restart)."""
    # the restarted node leads again once its lost incarnation's broker
    # session has expired: a short session keeps that wait short
    cfg = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
           **({"log.flush.interval.messages": flush_every} if flush_every else {})}
    c = LocalCluster.plan(str(tmp_path), 1, 1, 0, combined=True, config=cfg, storage_mode="memory-cache")
    c.up(60)
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        # the lone replica's restart is unclean, so KIP-966 takes it out of ISR and
        # ELR: only an unclean election brings the partition back
        topic = NewTopic("pl", 1, 1, config={"unclean.leader.election.enable": "true"})
        for f in admin.create_topics([topic]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 0})
        acked = []
        for i in range(100):
            p.produce("pl", b"%d" % i, partition=0, on_delivery=lambda e, m: acked.append(e))
            p.poll(0)
        p.flush(30)
        n = c.nodes[0]
        pid = n.pid
        with pytest.raises(ClusterError):  # the process exits before it can answer
            c.control(n.node_id, "POST", "/power-loss")
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid)
        c.start_node(n.node_id)
        c.wait_ready(60)
        assert c.control(n.node_id, "GET", "/status")["clean_start"] is False
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g", "enable.auto.commit": False})
        deadline = time.monotonic() + 30
        while True:
            try:
                md = admin.list_topics("pl", timeout=5).topics["pl"].partitions[0]
                if md.leader < 0:
                    raise RuntimeError("no leader yet")
                _, hw = cons.get_watermark_offsets(TopicPartition("pl", 0), timeout=5)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        cons.close()
        return sum(e is None for e in acked), hw
    finally:
        c.down(30)


def test_power_loss_drops_unfsynced_appends_of_a_single_replica(tmp_path):
    acked, hw = _run(tmp_path, None)
    assert acked == 100
    assert hw < 100


def test_power_loss_keeps_appends_fsynced_by_flush_interval(tmp_path):
    acked, hw = _run(tmp_path, "1")
    assert acked == 100
    assert hw == 100
