"""Suite-wide settings. Area fixtures live in tests/<area>/conftest.py."""

import os

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _private_run_registry(tmp_path_factory):
    """Runs started by the suite register in a registry of their own, so a
    test's `kraftwerk cleanup` never touches runs outside the suite."""
    os.environ.setdefault("KRAFTWERK_RUNTIME_DIR", str(tmp_path_factory.mktemp("run-registry")))
    yield
