"""Suite-wide settings. Area fixtures live in tests/<area>/conftest.py."""

import os

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# as the CLI does (harness/cli/__init__.py): numpy's import here and in every
# process the suite starts would otherwise spin a thread per core
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _private_run_registry(tmp_path_factory):
    """Runs started by the suite register in a registry of their own, so a
    test's `kraftwerk cleanup` never touches runs outside the suite."""
    os.environ.setdefault("KRAFTWERK_RUNTIME_DIR", str(tmp_path_factory.mktemp("run-registry")))
    yield


def pytest_sessionfinish(session):
    """The suite's Docker bookkeeping (tests/docker_engine.py) goes when the
    whole run is done: in the controlling process only, since pytest-xdist's
    workers finish one by one."""
    if hasattr(session.config, "workerinput"):
        return
    from tests.docker_engine import remove_home  # late: it imports the Docker SDK

    remove_home()
