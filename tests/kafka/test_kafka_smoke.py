"""Real Apache Kafka 4.4 on this machine: the default suite starts it twice,
briefly. The long campaigns are ``slow`` (bench/kafka_matrix.py runs them).

* ``kraftwerk cluster up --db kafka``: three real clients (confluent-kafka,
  kafka-python, kcat) produce and consume through it, its node logs name
  Kafka 4.4.x, and ``down`` leaves no process behind;
* a short ``kraftwerk run --db kafka`` with process and clock faults (acks=all,
  RF 3, min ISR 2) is valid and loses no acknowledged write.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reference_impl.server.procs import alive

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args, timeout=300):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


@pytest.fixture
def hand_cluster(tmp_path):
    d = tmp_path / "cluster"
    r = kraftwerk("cluster", "up", "--db", "kafka", "--combined", "--dir", str(d), "--json", "--timeout", "120",
                  "--base-port", "0")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    yield d, st
    kraftwerk("cluster", "down", "--dir", str(d), "--timeout", "30")


def test_real_clients_work_against_cluster_up_db_kafka(hand_cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    import kafka

    d, st = hand_cluster
    boot = st["bootstrap"]
    assert st["version"].startswith("4.4.")
    admin = AdminClient({"bootstrap.servers": boot})
    for f in admin.create_topics([NewTopic("smoke", num_partitions=1, replication_factor=3)]).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": boot, "acks": "all"})
    for i in range(10):
        p.produce("smoke", value=f"ck-{i}".encode())
    assert p.flush(30) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=boot, acks="all")
    kp.send("smoke", b"kp-0").get(timeout=30)
    kp.close()
    sent = [f"ck-{i}".encode() for i in range(10)] + [b"kp-0"]
    kc = kafka.KafkaConsumer("smoke", bootstrap_servers=boot, auto_offset_reset="earliest",
                             consumer_timeout_ms=30000, group_id=None)
    got = []
    for m in kc:  # up to what was sent; kcat below reads to the end, so an extra record still fails
        got.append(m.value)
        if len(got) == len(sent):
            break
    kc.close()
    assert got == sent
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by scripts/bootstrap (apt kafkacat)"
    r = subprocess.run([kcat, "-b", boot, "-C", "-t", "smoke", "-e", "-q"], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == [v.decode() for v in got]
    for name in ("n1", "n2", "n3"):
        log = (d / "nodes" / name / "server.log").read_text()
        assert "Kafka version: 4.4." in log


def test_cluster_down_db_kafka_stops_every_process(tmp_path):
    d = tmp_path / "c"
    r = kraftwerk("cluster", "up", "--db", "kafka", "--combined", "--brokers", "1", "--controllers", "1",
                  "--dir", str(d), "--json", "--timeout", "120", "--base-port", "0")
    assert r.returncode == 0, r.stderr
    procs = json.loads((d / "kafka-cluster.json").read_text())["processes"]
    r = kraftwerk("cluster", "down", "--dir", str(d), "--timeout", "30")
    assert r.returncode == 0 and "node n1: stopped" in r.stdout, r.stdout + r.stderr
    assert not any(alive(p["pid"], p["start"]) for p in procs)


def test_short_run_on_real_kafka_with_kills_pauses_and_clock_is_valid(tmp_path):
    out = tmp_path / "results"
    r = kraftwerk("run", "--db", "kafka", "--combined", "--out", str(out), "--json", "--no-report", "--seed", "3",
                  "--nemesis", "kill,pause,clock", "--nemesis-interval", "3", "--time-limit", "12")
    assert r.returncode == 0, r.stderr[-800:]
    res = json.loads(r.stdout)
    run_dir = Path(res["run_dir"])
    nem = [json.loads(l) for l in open(run_dir / "history.jsonl") if '"nemesis"' in l]
    assert any(o["f"].startswith("start-") and o["type"] == "info" and "nodes" in o["value"] or
               "offsets_ms" in o["value"] for o in nem), "no fault was injected"
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0
    assert res["durability"]["acks=all"]["acked"] > 20
    assert "Kafka version: 4.4." in (run_dir / "nodes" / "n1" / "server.log").read_text()
    # glass box from outside: the polled metadata is a trace the invariant monitor read
    seen = [json.loads(l) for l in open(run_dir / "nodes" / "observer" / "trace.jsonl")]
    meta = [e for e in seen if e["kind"] == "partition_metadata"]
    assert {e["tp"] for e in meta} == {"t0-0", "t0-1"}
    assert all(e["leader"] in e["isr"] and set(e["isr"]) <= set(e["replicas"]) for e in meta)
    assert any(e["kind"] == "raft_state" for e in seen) and any(e["kind"] == "observed_hw" for e in seen)
    assert res["invariants"]["valid"] is True and res["invariants"]["steps"] >= len(meta)
    assert not list((out / ".state").glob("*.json")), "state file left behind"
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True).stdout.split()
    assert not left, f"Kafka processes outlived the run: {left}"


def test_clock_offset_moves_the_brokers_wall_clock_while_it_runs(tmp_path):
    """libfaketime reads the node's offset file on every call: a record
    stamped by the broker (LogAppendTime) carries the skewed clock, and after
    the reset the true one."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from harness.config import build_config
    from harness.dbs.kafka.db import KafkaDB
    from harness.rundir.state import RunState

    cfg = build_config(None, {"db": "kafka", "brokers": 1, "controllers": 1, "combined": True, "rf": 1,
                              "min_isr": 1, "nemesis": ["clock"], "seed": 5})
    st = RunState.create(tmp_path / "out", "clock", tmp_path)
    db = KafkaDB(cfg, tmp_path, st)
    try:
        db.setup(ready_timeout=120, topics=False)
        boot = db.client_bootstrap()
        admin = AdminClient({"bootstrap.servers": boot})
        fut = admin.create_topics(
            [NewTopic("clk", 1, 1, config={"message.timestamp.type": "LogAppendTime"})])
        fut["clk"].result(timeout=30)
        p = Producer({"bootstrap.servers": boot})

        def stamp_offset_s(value: bytes) -> float:
            p.produce("clk", value=value)
            assert p.flush(30) == 0
            c = Consumer({"bootstrap.servers": boot, "group.id": "g", "enable.auto.commit": False,
                          "auto.offset.reset": "earliest"})
            from confluent_kafka import TopicPartition
            c.assign([TopicPartition("clk", 0, 0)])
            deadline = time.time() + 30
            while time.time() < deadline:
                m = c.poll(1)
                if m is not None and not m.error() and m.value() == value:
                    c.close()
                    return m.timestamp()[1] / 1000 - time.time()
            raise AssertionError("record not read back")

        assert abs(stamp_offset_s(b"before")) < 5
        db.cluster.clock.set_offset("n1", 600_000)
        assert 590 < stamp_offset_s(b"bumped") < 610
        db.cluster.clock.set_offset("n1", 0)
        assert abs(stamp_offset_s(b"reset")) < 5
    finally:
        db.teardown()
        st.remove()
