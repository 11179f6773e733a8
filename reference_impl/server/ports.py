"""Loopback ports for nodes and proxies, chosen so that nothing else on
the machine takes them between the choice and the bind.

A port the kernel hands out for ``bind(0)`` comes from its ephemeral range,
the range every outgoing connection's source port comes from too: on a
machine running several clusters (parallel test workers, a campaign beside
a bench) a node's or proxy's port chosen that way was taken as the source
port of some other connection before the node bound it ("address already in
use"). Ports outside the range are taken only by a process that names them.
"""

from __future__ import annotations

import random
import socket

HOST = "127.0.0.1"


#: where :func:`free_ports` looks, less the kernel's ephemeral range
PORT_POOL = range(10_000, 65_536)


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands out for ``bind(0)`` and as connections'
    source ports (Linux's ``ip_local_port_range``)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = map(int, f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free now, outside the kernel's
    ephemeral range (all bound at once, so no two are the same, then
    released). A port the kernel hands out itself could be taken by any
    process between this choice and the node's bind, a node of this very
    cluster among them (as the source port of its connection to another);
    one outside that range only by a process that names it. ``up`` checks
    each again before it starts a node, so a port taken in between is a
    clear error rather than a node that cannot bind."""
    lo, hi = ephemeral_range()
    pool = [p for p in PORT_POOL if not lo <= p <= hi]
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    try:
        for port in rng.sample(pool, min(len(pool), 50 * count)):
            if len(socks) == count:
                break
            s = socket.socket()
            try:
                s.bind((HOST, port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < count:  # no room outside the ephemeral range: the kernel's choice
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False
