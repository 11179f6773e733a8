"""Real Apache Kafka 4.4: the contract's Observer names the broker epoch of
a broker's running process (its server.log line ``Successfully registered
broker N with broker epoch E``, counted from the process's start), none
while it is down, and only the new process's own after a restart."""

import time

import pytest

pytestmark = pytest.mark.integration


def test_a_kafka_brokers_epoch_is_its_running_processes_registration(tmp_path):
    from harness.config import build_config
    from harness.dbs.kafka.db import KafkaDB
    from harness.rundir.state import RunState

    cfg = build_config(None, {"db": "kafka", "brokers": 1, "controllers": 1, "combined": True, "rf": 1,
                              "min_isr": 1, "nemesis": ["kill"], "seed": 5})
    st = RunState.create(tmp_path / "out", "observer", tmp_path)
    db = KafkaDB(cfg, tmp_path, st)
    try:
        db.setup(ready_timeout=120, topics=False)
        obs = db.cluster.observer
        before = None
        for _ in range(120):
            before = obs.broker_epoch("n1")
            if before is not None:
                break
            time.sleep(0.5)
        assert isinstance(before, int)
        db.nodes.kill("n1")
        assert obs.broker_epoch("n1") is None
        db.nodes.start("n1")
        after = None
        for _ in range(240):
            after = obs.broker_epoch("n1")
            if after is not None:
                break
            time.sleep(0.5)
        assert after is not None and after > before
    finally:
        db.teardown()
        st.remove()
