"""Each db's cluster contract is built from small parts, one protocol each
(harness/dbs/parts.py; Jepsen's db.clj / net/proto.clj split), and no db
returns itself as a part. The node control over a backend's hosts is
exercised on real daemons of the local hosts (sleeping processes)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from harness.config import TestConfig
from harness.dbs.kafka.db import FaketimeClock, KafkaDB, KafkaObserver
from harness.dbs.parts import NoNetwork, RemoteNodes, Topology
from harness.dbs.reference.local import LocalNodes, ProxiedCluster, ProxyNetwork, contract
from harness.rundir.state import RunState
from harness.runtimes.local import LocalHosts
from nemesis.control import (Clock, Network, NodeControl, Observer, Reassignments, ShutdownOutcomes, TornWrites,
                             Unsupported)


def _state(tmp_path: Path) -> RunState:
    return RunState.create(tmp_path / "out", "parts", tmp_path)


def _assert_parts(db: object, cluster: object) -> None:
    parts = [cluster.nodes, cluster.net, cluster.clock, cluster.observer]  # type: ignore[attr-defined]
    assert all(p is not db and p is not cluster for p in parts)
    assert len({id(p) for p in parts}) == 4
    assert isinstance(cluster.nodes, NodeControl) and isinstance(cluster.nodes, ShutdownOutcomes)  # type: ignore
    assert isinstance(cluster.nodes, Reassignments)  # type: ignore[attr-defined]
    assert isinstance(cluster.net, Network) and isinstance(cluster.clock, Clock)  # type: ignore[attr-defined]
    assert isinstance(cluster.observer, Observer)  # type: ignore[attr-defined]


def test_the_local_backends_contract_is_parts_of_the_launchers_cluster(tmp_path):
    cfg = TestConfig(seed=1)
    state = _state(tmp_path)
    try:
        local = ProxiedCluster.for_run(cfg.layout(), tmp_path, state, seed=1)
        parts, endpoints = contract(local, Topology.of(cfg.layout()), cfg.keys())
        _assert_parts(local, parts)
        assert isinstance(parts.nodes, LocalNodes) and isinstance(parts.net, ProxyNetwork)
        assert parts.nodes.dead_nodes() == cfg.node_names()  # nothing started yet
        assert endpoints.status("n1") is None  # a node that is down answers nothing
    finally:
        state.remove()


def test_kafkas_contract_is_parts_and_local_processes_cut_nothing(tmp_path):
    state = _state(tmp_path)
    db = KafkaDB(TestConfig(db="kafka", seed=1), tmp_path, state)
    try:
        _assert_parts(db, db.cluster)
        assert isinstance(db.cluster.nodes, TornWrites) and isinstance(db.cluster.nodes, RemoteNodes)
        assert isinstance(db.cluster.clock, FaketimeClock) and isinstance(db.cluster.observer, KafkaObserver)
        assert isinstance(db.cluster.net, NoNetwork)
        db.cluster.net.cut([])  # a heal is nothing to do
        with pytest.raises(Unsupported, match="partitions need a kernel backend"):
            db.cluster.net.cut([("n1", "n2")])
    finally:
        state.remove()


def _sleepers(tmp_path: Path, state: RunState, marker_left: set[str]) -> tuple[RemoteNodes, LocalHosts]:
    """Node control over real daemons: each node a Python process that, on
    SIGTERM, writes its clean-shutdown marker (if asked to) and exits."""
    hosts = LocalHosts(state)
    topo = Topology.of(TestConfig(brokers=2, controllers=1, rf=2, min_isr=1).layout())
    script = ("import signal, sys, time\n"
              "def down(*_):\n"
              "    if sys.argv[2] == 'yes':\n"
              "        open(sys.argv[1], 'w').close()\n"
              "    sys.exit(0)\n"
              "signal.signal(signal.SIGTERM, down)\n"
              "open(sys.argv[1] + '.ready', 'w').close()\n"
              "time.sleep(60)\n")

    def launch(node: str) -> None:
        argv = [sys.executable, "-c", script, str(tmp_path / f"{node}.clean"), "yes" if node in marker_left else "no"]
        hosts.start_daemon(node, argv, str(tmp_path / f"{node}.log"), {})

    lost: list[str] = []
    nodes = RemoteNodes(topo, hosts, lambda: "", launch, lambda n: str(tmp_path / f"{n}.clean"), 5.0, lost.append)
    return nodes, hosts


def _ended(nodes, node: str, timeout: float = 40.0):
    """How a SIGTERM ended (``last_shutdown_clean``) once its grace thread
    has seen the process end: ``terminate`` returns at once, the node is
    stopping until then (None)."""
    deadline = time.monotonic() + timeout
    while nodes.last_shutdown_clean(node) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return nodes.last_shutdown_clean(node)


def test_node_control_over_hosts_kills_pauses_and_judges_a_sigterm_by_its_marker(tmp_path):
    state = _state(tmp_path)
    nodes, hosts = _sleepers(tmp_path, state, marker_left={"n1"})
    try:
        for n in nodes.node_names():
            nodes.start(n)
        deadline = time.monotonic() + 30  # each daemon hears SIGTERM once its handler is in place
        while not all((tmp_path / f"{n}.clean.ready").exists() for n in nodes.node_names()):
            assert time.monotonic() < deadline, "the daemons did not start"
            time.sleep(0.02)
        assert nodes.dead_nodes() == [] and nodes.live_nodes() == ["n1", "n2", "c1"]
        nodes.pause("n2")
        assert nodes.paused_nodes() == ["n2"] and nodes.live_nodes() == ["n1", "c1"]
        nodes.terminate("n2")  # a paused node is continued, so its SIGTERM is heard
        assert _ended(nodes, "n2") is False and nodes.paused_nodes() == [] and "n2" in nodes.dead_nodes()
        nodes.terminate("n1")
        assert _ended(nodes, "n1") is True
        nodes.kill("c1")
        assert nodes.dead_nodes() == ["n1", "n2", "c1"]
        nodes.start("c1")
        assert nodes.dead_nodes() == ["n1", "n2"]
        with pytest.raises(Exception, match="torn write needs --storage lazyfs"):
            nodes.torn_power_loss("c1")
    finally:
        hosts.teardown()
        state.remove()


def test_a_power_loss_without_a_filesystem_that_loses_writes_goes_to_the_db(tmp_path):
    state = _state(tmp_path)
    hosts = LocalHosts(state)
    lost: list[str] = []
    nodes = RemoteNodes(Topology.of(TestConfig().layout()), hosts, lambda: "", lambda n: None, lambda n: "", 1.0,
                        lost.append)
    try:
        nodes.power_loss("n3")
        assert lost == ["n3"]
    finally:
        state.remove()


def test_the_signals_a_kill_sends(tmp_path):
    """SIGCONT before SIGKILL: a paused process is continued so it can die
    at once (recorded by a host that only counts)."""

    class Counting(LocalHosts):
        def __init__(self, state: RunState) -> None:
            super().__init__(state)
            self.sent: list[int] = []

        def signal(self, node: str, sig: int) -> None:
            self.sent.append(sig)
            super().signal(node, sig)

    state = _state(tmp_path)
    hosts = Counting(state)
    nodes = RemoteNodes(Topology.of(TestConfig().layout()), hosts, lambda: "",
                        lambda n: hosts.start_daemon(n, ["sleep", "30"], str(tmp_path / "log"), {}), lambda n: "", 1.0,
                        lambda n: None)
    try:
        nodes.start("n1")
        nodes.kill("n1")
        assert hosts.sent == [signal.SIGCONT, signal.SIGKILL] and nodes.dead_nodes()[0] == "n1"
    finally:
        hosts.teardown()
        state.remove()
