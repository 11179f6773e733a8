import pytest

from reference_impl.server.launcher import LocalCluster

#: fast failure detection so a short run settles quickly
FAST = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500", "replica.lag.time.max.ms": "3000"}


@pytest.fixture(scope="module")
def reference_bootstrap(tmp_path_factory):
    """A real cluster of reference-broker processes (3 brokers, 3 controllers)
    on free loopback ports, which `--db external` knows only by its bootstrap
    address, as it would know any Kafka cluster."""
    c = LocalCluster.plan(str(tmp_path_factory.mktemp("external-cluster")), 3, 3, 0, config=FAST)
    c.up(90)
    try:
        yield c.bootstrap
    finally:
        c.down(40)
