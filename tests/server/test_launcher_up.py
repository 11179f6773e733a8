"""A cluster that does not come up leaves no node running.

If one node cannot start, the nodes already started would otherwise run on
after ``up`` raised: its caller (a fixture, ``kraftwerk cluster up``) never
got a cluster to take down.

Ports chosen free are free only when chosen: another process may bind one
before the node does (the default suite's workers each start clusters).
``up`` then starts again on fresh ports; ports the user named are an error.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from reference_impl.server.launcher import STATE_FILE, ClusterError, LocalCluster, PortTaken, metadata_brokers
from reference_impl.server.ports import HOST, free_ports


def _running_in(d: Path) -> list[int]:
    """Processes whose working directory is ``d`` (where the launcher starts its nodes)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if Path(os.readlink(p / "cwd")) == d:
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def test_a_node_that_cannot_start_takes_the_nodes_started_before_it_down_with_the_error(tmp_path):
    d = tmp_path / "c"
    c = LocalCluster.plan(str(d), 1, 3, 0)
    started = []
    start_node = c.start_node
    c.start_node = lambda node_id: started.append(start_node(node_id)) or started[-1]  # type: ignore[method-assign]
    third = c.nodes[2]
    os.makedirs(os.path.dirname(third.data_dir), exist_ok=True)
    Path(third.data_dir).write_text("a file where its directory goes: it cannot start")
    with pytest.raises((ClusterError, OSError)):
        c.up(30)
    assert len(started) == 2  # two nodes were running when the third failed
    assert _running_in(d) == []
    assert all(n.pid is None for n in c.nodes)


def _taker(port: int) -> socket.socket:
    s = socket.socket()
    s.bind((HOST, port))
    s.listen()
    return s


def test_a_free_port_taken_before_up_is_replaced_by_a_fresh_one(tmp_path):
    c = LocalCluster.plan(str(tmp_path / "c"), 1, 1, 0, combined=True)
    planned = c.nodes[0].port
    with _taker(planned):
        try:
            c.up(60)
            assert c.nodes[0].port != planned
            assert metadata_brokers(HOST, c.nodes[0].port) == [1]
        finally:
            c.down(10)


def test_a_free_port_taken_between_the_check_and_the_nodes_bind_is_replaced_and_the_start_made_again(tmp_path):
    """The race itself: the port is bound after ``up`` checked it and saved
    the plan, before the node's process (a Python start-up away) binds it;
    the node exits with "address already in use" and ``up`` starts the
    cluster again, from empty data, on fresh ports."""
    d = tmp_path / "c"
    c = LocalCluster.plan(str(d), 1, 1, 0, combined=True)
    planned = c.nodes[0].port
    taken: list[socket.socket] = []

    def take() -> None:
        deadline = time.monotonic() + 30
        while not (d / STATE_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.0005)
        taken.append(_taker(planned))

    th = threading.Thread(target=take)
    th.start()
    try:
        c.up(60)
        th.join()
        assert len(taken) == 1, "the port was bound by the node before the taker: the race was not made"
        assert c.nodes[0].port != planned
        assert metadata_brokers(HOST, c.nodes[0].port) == [1]
    finally:
        th.join()
        c.down(10)
        for s in taken:
            s.close()
    assert _running_in(d) == []


def test_a_named_port_taken_is_a_clear_error_and_starts_nothing(tmp_path):
    base = free_ports(1)[0]
    while not 1024 <= base <= 65535 - 200:
        base = free_ports(1)[0]
    d = tmp_path / "c"
    c = LocalCluster.plan(str(d), 1, 1, base, combined=True)
    with _taker(base):
        with pytest.raises(PortTaken, match=f"port {base} "):
            c.up(30)
    assert c.nodes[0].port == base
    assert _running_in(d) == []
