"""A broker serves no client before it has caught up with the metadata log.

Kafka's BrokerServer (4.4, ``startup``) waits for its initial metadata
catch-up before ``socketServer.enableRequestProcessing`` starts accepting:
a client that connects earlier gets no answer at all, never an answer from
a broker that has not replayed the cluster's state yet (a topic it has not
seen would be UNKNOWN_TOPIC_OR_PARTITION, which librdkafka keeps for the
client's life). Here a broker restarted while every controller is down
cannot register, so it never catches up until they are back: a Metadata
request sent to it in between is answered only once they are.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from reference_impl.server.launcher import HOST, ClusterError, recv_exact
from tests.server.test_integration import _checked_cluster, create_topic

pytestmark = pytest.mark.integration


def send_metadata(port: int, topic: str) -> socket.socket:
    s = socket.create_connection((HOST, port), timeout=5)
    req = MetadataRequest[1](topics=[topic])
    req.with_header(correlation_id=7, client_id="catch-up-test")
    s.sendall(req.encode(header=True, framed=True))
    return s


def read_metadata(s: socket.socket) -> tuple[int, int]:
    """(topic error code, partition count) of the answer."""
    size = struct.unpack(">i", recv_exact(s, 4))[0]
    resp = MetadataResponse.decode(recv_exact(s, size)[4:], version=1)
    (t,) = resp.topics
    return t[0], len(t[3])


@pytest.fixture
def cluster(tmp_path):
    yield from _checked_cluster(str(tmp_path / "cluster"), min_steps=20)


def test_a_restarted_broker_answers_no_client_until_it_has_caught_up_with_the_metadata_log(cluster):
    create_topic(cluster, "caught")
    broker = cluster.brokers[0]
    controllers = [n.node_id for n in cluster.nodes if n.is_controller and not n.is_broker]
    for c in controllers:
        cluster.kill(c)
    cluster.kill(broker.node_id)
    cluster.start_node(broker.node_id)
    deadline = time.monotonic() + 30
    while True:  # up, but with no controller to register with
        try:
            cluster.control(broker.node_id, "GET", "/status")
            break
        except ClusterError:
            assert time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.2)
    held = send_metadata(broker.port, "caught")
    held.settimeout(4)
    with pytest.raises(socket.timeout):
        read_metadata(held)  # no answer while it has not caught up
    for c in controllers:
        cluster.start_node(c)
    held.settimeout(60)
    assert read_metadata(held) == (0, 1), "the waiting request was answered from a replayed image"
    held.close()
    cluster.wait_ready(60)
