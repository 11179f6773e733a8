"""A KafkaDB's servers take their JVM options from ``jvm_options`` (a
benchmark starts Kafka as its users do), while runs keep the harness's small
heaps and flags and the storage tool always runs with them."""

from __future__ import annotations

from pathlib import Path

from harness.config import TestConfig
from harness.dbs.kafka.db import JVM_FLAGS, KafkaDB, harness_jvm, heap_for
from harness.dbs.kafka.props import NodePlan
from harness.rundir.state import RunState


def _db(tmp_path: Path, **kw: object) -> tuple[KafkaDB, RunState, NodePlan]:
    state = RunState.create(tmp_path / "out", "jvm", tmp_path)
    db = KafkaDB(TestConfig(db="kafka", seed=1), tmp_path, state, **kw)  # type: ignore[arg-type]
    n = NodePlan("n1", 1, ("broker",), "127.0.0.1", 9092, 0)
    db.on_host[n.name] = ("/jars/*", "/log4j2.yaml")
    return db, state, n


def test_runs_start_servers_with_the_harness_heap_and_flags(tmp_path):
    db, state, n = _db(tmp_path)
    try:
        argv = db._java(n, "kafka.Kafka", "server.properties", server=True)
        assert argv[:1 + 1 + len(JVM_FLAGS)] == ["java", heap_for(n.roles), *JVM_FLAGS]
        assert harness_jvm(n.roles) == [heap_for(n.roles), *JVM_FLAGS]
    finally:
        state.remove()


def test_jvm_options_reach_the_server_but_not_the_storage_tool(tmp_path):
    users = ["-Xmx1G", "-Xms1G", "-XX:+UseG1GC"]
    db, state, n = _db(tmp_path, jvm_options=lambda roles: users)
    try:
        server = db._java(n, "kafka.Kafka", "server.properties", server=True)
        assert server[1:4] == users and "-Xmx384m" not in server
        tool = db._java(n, "kafka.tools.StorageTool", "format")
        assert tool[1:2 + len(JVM_FLAGS)] == harness_jvm(n.roles)
    finally:
        state.remove()
