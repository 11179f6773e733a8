"""Disk faults on the reference broker.

* Disk full (a size-limited tmpfs under the data directory): the node fails
  its log directory as Kafka does (LogDirFailure: it halts), records why in
  its trace, which the harness's result names; nothing it acknowledged is
  lost or corrupt: given room again it restarts, recovery cuts the torn tail,
  and every acknowledged record reads back with its CRC intact.
* A flipped byte in a segment: recovery after an unclean shutdown checks each
  batch's CRC from the recovery point on and truncates the log at the first
  bad one (Kafka's LogLoader), dropping it and what follows; the node serves
  what came before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reference_impl.server.launcher import LocalCluster
from reference_impl.server.procs import alive

pytestmark = pytest.mark.integration


#: a restarted node re-registers once its killed incarnation's broker session
#: has expired, and leads again only then: a short session keeps that wait short
FAST = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}


def _cluster(tmp_path: Path, base: int, data: Path | None = None) -> LocalCluster:
    c = LocalCluster.plan(str(tmp_path / "c"), 1, 1, base, combined=True, config=FAST)
    if data is not None:
        c.nodes[0].log_dir = c.nodes[0].data_dir  # the run layout keeps trace and log
        c.nodes[0].data_dir = str(data)
    return c


def _create(c: LocalCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)


def _read_all(c: LocalCluster, topic: str, timeout: float = 30) -> list[tuple[int, bytes]]:
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g", "enable.auto.commit": False,
                     "check.crcs": True, "auto.offset.reset": "earliest", "log_level": 0})
    cons.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    while True:  # a restarted node leads again once it has re-registered
        try:
            lo, hi = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "no leader after the restart"
            time.sleep(0.5)
    while (not got or got[-1][0] < hi - 1) and time.monotonic() < deadline and hi > 0:
        m = cons.poll(1.0)
        if m is not None:
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
    cons.close()
    return got


def test_disk_full_fails_the_log_directory_and_loses_nothing_acknowledged(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(data)], check=True)
    c = _cluster(tmp_path, 27000 + (os.getpid() % 200) * 5, data / "1")
    try:
        c.up(60)
        _create(c, "full")
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 5, "message.timeout.ms": 8000, "log_level": 0,
                      "retries": 0})
        acked: dict[int, bytes] = {}

        def cb(err, msg):
            if err is None:
                acked[msg.offset()] = msg.value()

        deadline = time.monotonic() + 60
        i = 0
        while alive(c.nodes[0].pid) and time.monotonic() < deadline:
            p.produce("full", f"{i:08d}".encode() * 1000, callback=cb)
            i += 1
            p.poll(0.001 if i % 20 else 0.05)
        # what never left the queue can no longer be acknowledged: drop it
        # rather than wait out its delivery timeout; sent requests still end
        # in their answers or their connection's failure
        p.purge(in_queue=True, in_flight=False)
        p.flush(15)
        assert not alive(c.nodes[0].pid), "the node kept running on a full disk"
        assert len(acked) > 50
        trace = Path(c.nodes[0].log_dir) / "trace.jsonl"
        fails = [json.loads(x) for x in trace.read_text().splitlines() if '"log_dir_failure"' in x]
        assert fails and fails[0]["errno"] == 28, fails
        assert "LogDirFailure" in (Path(c.nodes[0].log_dir) / "node.log").read_text()
        from harness.lifecycle.checking import node_faults

        assert [f["node"] for f in node_faults(c.dir)] == ["n1"]

        subprocess.run(["mount", "-o", "remount,size=64m", str(data)], check=True)
        c.start_node(1)
        c.wait_ready(60)
        got = dict(_read_all(c, "full"))
        assert all(got.get(off) == v for off, v in acked.items()), "an acknowledged record is lost or changed"
        assert sorted(got) == list(range(len(got)))
    finally:
        c.down(20)
        subprocess.run(["umount", "-l", str(data)])


def test_flipped_byte_in_a_segment_is_found_by_crc_and_the_log_truncated_there(tmp_path):
    c = _cluster(tmp_path, 27500 + (os.getpid() % 200) * 5)
    try:
        c.up(60)
        _create(c, "flip")
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 0, "batch.num.messages": 1})
        for i in range(20):
            p.produce("flip", f"value-{i:04d}".encode() * 20)
            p.flush(10)  # one batch per record
        before = _read_all(c, "flip")
        assert [o for o, _ in before] == list(range(20))
        os.kill(c.nodes[0].pid, signal.SIGKILL)  # unclean: recovery checks CRCs
        time.sleep(0.5)
        seg = next(Path(c.nodes[0].data_dir, "flip-0").glob("*.log"))
        raw = bytearray(seg.read_bytes())
        at = raw.find(b"value-0015")  # inside the 16th batch's records
        raw[at] ^= 0x01
        seg.write_bytes(bytes(raw))
        c.start_node(1)
        c.wait_ready(60)
        st = c.control(1, "GET", "/status")
        rec = [r for r in st["recovery"] if r["log"] == "flip-0"][0]
        assert rec["truncated_bytes"] > 0 and rec["entries"] == 15
        after = _read_all(c, "flip")
        assert after == before[:15]  # everything before the bad batch, intact
    finally:
        c.down(20)
