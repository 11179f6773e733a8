"""A node's connection and memory bounds, each a setting under Kafka's name
where Kafka has one (Kafka 4.4, ``org.apache.kafka.network.SocketServerConfigs``;
enforced as ``kafka.network.SocketServer`` and its ``ConnectionQuotas`` do,
see :mod:`.listener`), given with ``kraftwerk node --set KEY=VALUE``.

=====================================  ===========  ============================
setting                                default      Kafka's default
=====================================  ===========  ============================
``socket.request.max.bytes``           100 MiB      100 MiB
``queued.max.request.bytes``           100 MiB      -1 (unbounded)
``max.connections``                    2000         2^31-1 (unbounded)
``max.connections.per.ip``             1000         2^31-1 (unbounded)
``max.connections.per.ip.overrides``   (none)       (none)
``connections.max.idle.ms``            600000       600000
``socket.listen.backlog.size``         1024         50
``connections.handshake.timeout.ms``   10000        (no such setting)
``socket.request.read.timeout.ms``     30000        (no such setting)
=====================================  ===========  ============================

Where ours are bounded and Kafka's are not, it is because one node process
serves clients and peers on one port and a local user with no privileges can
reach it: every bound here is what that user could otherwise take from the
cluster. The two settings Kafka lacks close what its idle timer leaves open:
Kafka counts any byte as activity, so a socket that trickles half a frame, or
sends nothing after connecting, holds its slot for ``connections.max.idle.ms``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field, fields
from typing import Mapping

MIB = 1024 * 1024


class LimitsError(ValueError):
    """A bound that is not a positive number, or an override that names no address."""


@dataclass(frozen=True)
class Limits:
    #: socket.request.max.bytes: the largest client request frame
    max_request_bytes: int = 100 * MIB
    #: queued.max.request.bytes: bytes of unfinished frames and of answers
    #: clients have not taken, every connection together (an authenticated
    #: peer's frames aside); also the largest frame of a peer without the secret
    queued_max_request_bytes: int = 100 * MIB
    #: max.connections: every socket on the port, clients and peers
    max_connections: int = 2000
    #: max.connections.per.ip: sockets from one address
    max_connections_per_ip: int = 1000
    #: max.connections.per.ip.overrides: address -> its own cap
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    #: connections.max.idle.ms: nothing read and nothing owed for this long
    idle_ms: int = 600_000
    #: socket.listen.backlog.size: connections the kernel queues before we accept
    listen_backlog: int = 1024
    #: connections.handshake.timeout.ms: from accept to the first complete
    #: frame (a client's first request, a peer's magic and hello)
    handshake_timeout_ms: int = 10_000
    #: socket.request.read.timeout.ms: from a frame's first byte to its last
    request_read_timeout_ms: int = 30_000

    def max_for(self, address: str) -> int:
        """max.connections.per.ip for ``address``, its override if it has one."""
        return self.max_connections_per_ip_overrides.get(address, self.max_connections_per_ip)


#: setting -> Limits field
SETTINGS: dict[str, str] = {
    "socket.request.max.bytes": "max_request_bytes",
    "queued.max.request.bytes": "queued_max_request_bytes",
    "max.connections": "max_connections",
    "max.connections.per.ip": "max_connections_per_ip",
    "max.connections.per.ip.overrides": "max_connections_per_ip_overrides",
    "connections.max.idle.ms": "idle_ms",
    "socket.listen.backlog.size": "listen_backlog",
    "connections.handshake.timeout.ms": "handshake_timeout_ms",
    "socket.request.read.timeout.ms": "request_read_timeout_ms",
}
assert set(SETTINGS.values()) == {f.name for f in fields(Limits)}


def parse_limits(settings: Mapping[str, str]) -> Limits:
    """The bounds ``settings`` give (keys of :data:`SETTINGS`; the rest keep
    their defaults). Raises :class:`LimitsError`, one line, on a bad value."""
    values: dict[str, object] = {}
    for key, text in settings.items():
        name = SETTINGS.get(key)
        if name is None:
            raise LimitsError(f"{key} is not a connection setting")
        if name == "max_connections_per_ip_overrides":
            values[name] = parse_overrides(text)
            continue
        try:
            n = int(text)
        except ValueError:
            raise LimitsError(f"{key}={text!r} is not a number") from None
        if n < 1:
            raise LimitsError(f"{key}={n} must be positive")
        values[name] = n
    limits = Limits(**values)  # type: ignore[arg-type]
    if limits.queued_max_request_bytes < limits.max_request_bytes:
        # Kafka's own rule (KafkaConfig): a request of the largest size must fit
        raise LimitsError("queued.max.request.bytes must be at least socket.request.max.bytes")
    return limits


def parse_overrides(text: str) -> dict[str, int]:
    """Kafka's ``host:count,host:count`` (a host may be a name: every address
    it resolves to gets the count; ``[v6]:count`` for an IPv6 literal)."""
    out: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not sep or not host:
            raise LimitsError(f"max.connections.per.ip.overrides entry {item!r} must look like HOST:COUNT")
        try:
            n = int(count)
        except ValueError:
            raise LimitsError(f"max.connections.per.ip.overrides entry {item!r}: {count!r} is not a number") from None
        if n < 0:
            raise LimitsError(f"max.connections.per.ip.overrides entry {item!r} must not be negative")
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_UNSPEC, socket.SOCK_STREAM)
        except OSError:
            raise LimitsError(f"max.connections.per.ip.overrides: cannot resolve {host!r}") from None
        for info in infos:
            out[peer_address(str(info[4][0]))] = n
    return out


def peer_address(ip: str) -> str:
    """One spelling per peer: an IPv4-mapped IPv6 address as its IPv4 form."""
    return ip.removeprefix("::ffff:") if ip.startswith("::ffff:") and "." in ip else ip
