"""Which addresses a node's listeners bind, and the rule that keeps them on
loopback unless asked.

A listener on an address other machines can reach lets them speak the
internal RPC and the control endpoint, so any address that is not loopback
needs ``--allow-non-loopback`` (the real-host backends pass it: their nodes
listen on their hosts' addresses). The rule holds whatever the spelling:
``0``, ``0.0.0.0``, ``::``, ``::0``, ``[::]``, ``0000::`` and a host name are
all resolved as the listener itself resolves them (``getaddrinfo`` with
``AI_PASSIVE``, asyncio's call), and the node binds exactly the addresses
that were checked, never the name again.
"""

from __future__ import annotations

import ipaddress
import socket

FLAG = "--allow-non-loopback"


class AddressError(ValueError):
    """A listener address that does not resolve, or is not loopback and was not allowed."""


def bind_addresses(host: str, port: int) -> list[str]:
    """Every address a listener on ``host:port`` binds, in getaddrinfo's order."""
    name = host.strip().removeprefix("[").removesuffix("]")
    if not name:
        raise AddressError("an empty host listens on every address; give one")
    try:
        infos = socket.getaddrinfo(name, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        raise AddressError(f"cannot resolve {host!r}") from None
    out: list[str] = []
    for info in infos:
        ip = str(info[4][0])
        if ip not in out:
            out.append(ip)
    return out


def is_loopback(ip: str) -> bool:
    """127/8 and ::1, also written as an IPv4-mapped IPv6 address."""
    try:
        a = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    return a.is_loopback


def checked_bind(what: str, host: str, port: int, allow_non_loopback: bool) -> tuple[list[str], list[str]]:
    """The addresses to bind for ``what`` (``--listen``, ``--control``) and
    those of them that are not loopback (empty unless allowed). Raises
    :class:`AddressError` (one line) for a non-loopback address not allowed."""
    ips = bind_addresses(host, port)
    far = [ip for ip in ips if not is_loopback(ip)]
    if far and not allow_non_loopback:
        raise AddressError(f"{what} {host}:{port} would listen on {', '.join(far)}, not a loopback address; "
                           f"give 127.0.0.1 or ::1, or {FLAG}")
    return ips, far
