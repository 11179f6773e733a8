"""A tiny HTTP/JSON control endpoint (``--control HOST:PORT``).

* ``GET /status`` — node id, pid, roles, clock offset, partitions it leads or
  follows, quorum role, storage mode, recovery report.
* ``POST /clock`` with ``{"offset_ms": N}`` (absolute) or ``{"shift_ms": N}``
  (relative) — the clock nemesis skews the node.
* ``POST /power-loss`` — memory-cache storage mode only: revert every file to
  its last fsync and exit at once with status 137, as if the machine lost
  power (the harness's lose-unfsynced fault; it SIGKILLs afterwards anyway).
* ``POST /shutdown`` — start a controlled shutdown, like SIGTERM.

HTTP/1.0, one request per connection, bodies up to 64 KiB, at most 64 header
lines, the whole request within :data:`REQUEST_DEADLINE_S`, at most
:data:`MAX_CONNECTIONS` connections at once: enough for curl and ``urllib``;
nothing here is meant to be exposed beyond loopback. The endpoint never runs
without the cluster secret (:mod:`.auth`): every request must carry
``Authorization: Bearer <token>``; anything else is answered 401 and not
handled.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

from . import auth

Handler = Callable[[str, str, Any], Awaitable[tuple[int, Any]]]
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 409: "Conflict",
            500: "Internal Server Error"}
MAX_HEADERS = 64
#: a request (line, headers, body) that has not arrived by then is answered 400
REQUEST_DEADLINE_S = 5.0
#: connections served at once; more are closed unanswered (the harness makes one at a time)
MAX_CONNECTIONS = 32


async def _read_request(reader: asyncio.StreamReader, secret: bytes) -> tuple[str, str, Any] | None:
    """Method, path and JSON body of an authorised request; None when the
    token is missing or wrong. Raises ValueError on a malformed request."""
    parts = (await reader.readline()).decode("latin-1").split()
    if len(parts) < 2:
        raise ValueError("bad request line")
    method, path = parts[0].upper(), parts[1]
    length = 0
    presented = None
    for _ in range(MAX_HEADERS + 1):
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
        elif k.strip().lower() == auth.HEADER.lower():
            presented = v.strip().removeprefix("Bearer ").strip()
    else:
        raise ValueError("too many header lines")
    if not 0 <= length <= 65536:
        raise ValueError("body too large")
    if not auth.check(secret, auth.CONTROL, presented):
        return None
    raw = await reader.readexactly(length) if length else b""
    return method, path, json.loads(raw) if raw.strip() else {}


async def serve_control(addresses: list[str], port: int, handler: Handler, secret: bytes) -> asyncio.AbstractServer:
    """Serve on every one of ``addresses`` (already checked, addresses.py).
    Refuses to start without a secret: a control endpoint anyone on the
    machine could call would let them skew the node's clock or stop it."""
    if not secret:
        raise ValueError("the control endpoint needs the cluster secret")
    open_now = 0

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_now
        if open_now >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        open_now += 1
        try:
            await _answer(reader, writer)
        finally:
            open_now -= 1

    async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, payload = 400, {"error": "bad request"}
        try:
            request = await asyncio.wait_for(_read_request(reader, secret), REQUEST_DEADLINE_S)
            if request is None:
                status, payload = 401, {"error": "missing or wrong cluster token"}
            else:
                status, payload = await handler(*request)
        except (ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError, UnicodeDecodeError) as e:
            status, payload = 400, {"error": str(e) or type(e).__name__}
        except Exception as e:  # never let a control request take the node down
            status, payload = 500, {"error": f"{type(e).__name__}: {e}"}
        try:
            data = json.dumps(payload).encode()
            writer.write(
                f"HTTP/1.0 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                + data
            )
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(on_conn, addresses, port, limit=64 * 1024)
