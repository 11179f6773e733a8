"""Ports the launcher gives nodes cannot be taken by a connection.

A port chosen by ``bind(0)`` comes from the kernel's ephemeral range, the
same range every outgoing connection's source port is drawn from: between
the choice and the node's own bind, a node started earlier (connecting to
its peers) or any other process could be handed it, and the node exits
with "address already in use". The launcher chooses outside that range.
"""

from __future__ import annotations

import socket

from harness.runtimes.local import allocate_ports
from reference_impl.server.ports import HOST, ephemeral_range, free_ports, port_in_use


def test_free_ports_are_distinct_bindable_and_outside_the_kernels_ephemeral_range():
    lo, hi = ephemeral_range()
    ports = free_ports(40)
    assert len(set(ports)) == 40
    assert not any(lo <= p <= hi for p in ports)
    assert not any(port_in_use(p) for p in ports)


def test_source_ports_of_many_connections_never_land_on_a_port_the_launcher_chose():
    ports = set(free_ports(20))
    server = socket.create_server((HOST, 0), backlog=512)
    clients = [socket.create_connection(server.getsockname()) for _ in range(200)]
    try:
        sources = {c.getsockname()[1] for c in clients}
        assert not sources & ports
        lo, hi = ephemeral_range()
        assert all(lo <= p <= hi for p in sources)  # where the kernel draws them from
    finally:
        for c in clients:
            c.close()
        server.close()


def test_the_harness_allocates_its_proxies_and_nodes_ports_outside_the_ephemeral_range_too():
    """harness.runtimes.local.allocate_ports (local nodes, partition
    proxies) draws from the same pool: with bind(0) a proxy's port was
    taken by another worker's connection before it bound ("proxy failed to
    start: address already in use")."""
    lo, hi = ephemeral_range()
    ports = allocate_ports(30)
    assert len(set(ports)) == 30 and not any(lo <= p <= hi for p in ports)
