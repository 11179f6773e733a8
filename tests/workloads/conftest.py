import pytest


@pytest.fixture(scope="module")
def mock_bootstrap():
    """librdkafka's mock cluster hosted in this test process: a Kafka
    implementation nobody in this project wrote."""
    from harness.db.mock_cluster import start

    holder, bootstrap = start(3)
    yield bootstrap
    del holder
