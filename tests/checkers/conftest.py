"""Checker-area fixtures: one SparkSession for the whole test session (it
takes seconds to start), shared by every ``@pytest.mark.spark`` test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark():
    """The pipeline's own process-wide session (local, 2 cores), stopped at
    the end so no JVM outlives the test run."""
    from checkers.pipeline import get_spark, stop_spark

    session = get_spark("local[2]")
    yield session
    stop_spark()
