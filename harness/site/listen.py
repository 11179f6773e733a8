"""The sockets ``kraftwerk serve`` listens on: exactly the addresses it
checked.

``--host`` is resolved once (:func:`reference_impl.server.addresses.checked_bind`,
as a listener resolves it, ``AI_PASSIVE``); those addresses are what the
loopback rule judged, what is bound here, and what the site's Host check
answers to (:func:`harness.site.app.allowed_hosts`). The name is never
resolved again, so a name whose answer changes (or that a server library
would resolve its own way) cannot move the site to an address nobody
checked. An IPv6 socket is IPv6 only (``IPV6_V6ONLY``, as asyncio's own
listeners): ``::`` does not also take IPv4 connections it was not checked
for; give ``0.0.0.0`` for those.
"""

from __future__ import annotations

import socket

from harness.errors import UsageError

BACKLOG = 128


def _shown(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


def listen_sockets(ips: list[str], port: int) -> list[socket.socket]:
    """One listening socket per address, all on one port (``port`` 0: the
    first socket's, picked by the kernel). A port in use or an address this
    machine lacks is a one-line :class:`UsageError`; nothing stays open then."""
    out: list[socket.socket] = []
    try:
        for ip in ips:
            fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM)
            out.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind((ip, port))
            except OSError as e:
                raise UsageError(f"cannot listen on {_shown(ip)}:{port}: {e.strerror}") from None
            s.listen(BACKLOG)
            port = port or s.getsockname()[1]
    except BaseException:
        for s in out:
            s.close()
        raise
    return out


def urls(ips: list[str], port: int) -> str:
    return ", ".join(f"http://{_shown(ip)}:{port}/" for ip in ips)
