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
lines: enough for curl and ``urllib``; nothing here is meant to be exposed
beyond loopback. With a cluster secret (:mod:`.auth`) every request must carry
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


async def serve_control(host: str, port: int, handler: Handler, secret: bytes | None = None) -> asyncio.AbstractServer:
    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, payload = 400, {"error": "bad request"}
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            parts = line.decode("latin-1").split()
            if len(parts) >= 2:
                method, path = parts[0].upper(), parts[1]
                length = 0
                presented = None
                for _ in range(MAX_HEADERS + 1):
                    h = await asyncio.wait_for(reader.readline(), 5)
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
                    status, payload = 401, {"error": "missing or wrong cluster token"}
                else:
                    raw = await asyncio.wait_for(reader.readexactly(length), 5) if length else b""
                    body = json.loads(raw) if raw.strip() else {}
                    status, payload = await handler(method, path, body)
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

    return await asyncio.start_server(on_conn, host, port)
