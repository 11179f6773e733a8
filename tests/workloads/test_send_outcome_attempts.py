"""The send outcome follows what the client can know (workloads/queue.py,
the rule in workloads/outcome.py):
a broker refuses acks=all with NOT_ENOUGH_REPLICAS before appending, so the
answer proves nothing was written only when it answers the record's one
attempt; after an earlier attempt (a resend), that attempt may have appended
the record and the send is ``info``. The attempts are librdkafka's own
produce requests, counted from its ``msg`` debug log, against real
reference-broker processes whose ISR has shrunk below min ISR."""

import os
import signal
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from reference_impl.server.launcher import LocalCluster
from workloads.outcome import send_outcome
from workloads.queue import ProduceAttempts, QueueClient

from .conftest import FAST


def test_not_enough_replicas_is_a_definite_fail_only_on_the_records_only_attempt(tmp_path):
    c = LocalCluster.plan(str(tmp_path / "c"), 3, 1, 0, config=FAST)
    c.up(90)
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        topic = NewTopic("ner", num_partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic])["ner"].result(timeout=30)
        leader = -1
        deadline = time.monotonic() + 60
        while leader < 0:
            assert time.monotonic() < deadline, "no leader for ner-0"
            parts = admin.list_topics("ner", timeout=10).topics["ner"].partitions
            leader = parts[0].leader if 0 in parts and len(parts[0].isrs) == 3 else -1
            time.sleep(0.2)
        for n in c.brokers:
            if n.node_id != leader:
                os.kill(n.pid, signal.SIGKILL)
        boot = f"127.0.0.1:{c.node(leader).port}"  # the one broker left
        admin = AdminClient({"bootstrap.servers": boot, "log_level": 0})
        deadline = time.monotonic() + 60
        while admin.list_topics("ner", timeout=10).topics["ner"].partitions[0].isrs != [leader]:
            assert time.monotonic() < deadline, "the ISR never shrank to the leader"
            time.sleep(0.5)

        # the workload's producer (retries=0): one request, a definite fail
        client = QueueClient(boot, ["ner-0"], "all", 0, op_timeout=10)
        client.open()
        try:
            res = client.invoke({"f": "send", "value": [["send", "ner-0", 1]]})
        finally:
            client.close()
        assert (res["type"], res["error"]) == ("fail", "NOT_ENOUGH_REPLICAS")
        assert client.attempts.of("ner", 0) == 1

        # the same answer after resends: librdkafka's log shows three
        # requests, so an earlier one may have appended the record
        attempts = ProduceAttempts()
        p = Producer({"bootstrap.servers": boot, "acks": "all", "retries": 2, "retry.backoff.ms": 50,
                      "linger.ms": 0, **ProduceAttempts.CONF, "logger": attempts})
        box = []
        attempts.reset("ner", 0)
        p.produce("ner", b"2", partition=0, on_delivery=lambda err, msg: box.append(err))
        p.flush(30)
        assert box and box[0].name() == "NOT_ENOUGH_REPLICAS"
        assert attempts.of("ner", 0) == 3
        assert send_outcome(box[0].name(), "all", ambiguous_before=attempts.of("ner", 0) > 1) == "info"
    finally:
        c.down(20)
