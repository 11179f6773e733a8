"""A TCP proxy on every directed link, so partitions and latency need no root.

Each link ``src->dst`` is a listening port that ``src`` uses to reach ``dst``
(a node's peer address for another node, or a client's address for a broker).
The proxy runs as its own process (``python -m harness.runtimes.proxy``) so the traffic
it pumps never competes with the harness's client threads for the GIL, and so
``kraftwerk cleanup`` can find and stop it.

Fault model — a cut is a *directed* pair ``(a, b)``: bytes from a to b do not
get through. Like packets dropped by iptables, bytes are not lost inside a
stream (that would corrupt framing, which real TCP never does): they are held
and delivered after the heal if both ends are still there, just as TCP
retransmission would. A new connection across a cut in either direction hangs
(its SYN or SYN-ACK would be dropped) and is completed only after the heal. So
a one-way cut stalls every TCP connection between the two nodes, exactly as
with iptables. Latency delays each chunk by a fixed time (+ jitter) per link,
preserving order.

Control: one JSON object per line on a localhost TCP port, answered with one
JSON line. Any local user can reach that port, so each command must carry
the run's proxy token (``"token"``, an HMAC of the 0600 cluster secret,
reference_impl/server/auth.py) or is refused in one line and changes
nothing; the proxy never starts without ``--secret-file`` (one JSON error
line, exit 2): ``{"cmd": "cut", "pairs": [["n1","n2"], ...]}``, ``{"cmd": "heal"}``,
``{"cmd": "delay", "ms": 50, "jitter": 10, "links": ["n1->n2"]}`` (no links = all),
``{"cmd": "stats"}``, ``{"cmd": "ping"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.rundir.lease import arm
from reference_impl.server import auth

MAX_HELD = 64 * 1024 * 1024  # bytes held per direction before the connection is reset
CHUNK = 64 * 1024
MAX_DELAY_MS = 600_000.0  # a link delayed longer is a cut, not a latency


@dataclass(frozen=True)
class Link:
    src: str
    dst: str
    listen: int
    target: int
    host: str = "127.0.0.1"

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


@dataclass
class Faults:
    cut: set[tuple[str, str]] = field(default_factory=set)
    delay_ms: dict[str, tuple[float, float]] = field(default_factory=dict)  # link name -> (ms, jitter)

    def blocked(self, a: str, b: str) -> bool:
        return (a, b) in self.cut


class ProxyServer:
    def __init__(self, links: list[Link], secret: bytes, seed: int = 0, max_held: int = MAX_HELD) -> None:
        if not secret:
            raise ValueError("the link proxy needs the cluster secret: its control port is open to every local user")
        self.secret = secret
        self.links = links
        self.max_held = max_held
        self.faults = Faults()
        self.rng = random.Random(seed)
        self._changed = asyncio.Event()
        self.conns: set[asyncio.Task] = set()
        self.stats: dict[str, dict[str, int]] = {l.name: {"conns": 0, "bytes": 0, "held": 0} for l in links}
        self._servers: list[asyncio.base_events.Server] = []

    # ------------------------------------------------------------ faults
    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_change(self, timeout: float | None = None) -> None:
        ev = self._changed
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def _delay(self, link: Link) -> float:
        d = self.faults.delay_ms.get(link.name)
        if not d:
            return 0.0
        ms, jitter = d
        return max(0.0, ms + (self.rng.uniform(-jitter, jitter) if jitter else 0.0)) / 1000.0

    # ------------------------------------------------------------ serving
    async def start(self) -> None:
        for link in self.links:
            srv = await asyncio.start_server(
                lambda r, w, link=link: self._accept(link, r, w), host=link.host, port=link.listen, reuse_address=True
            )
            self._servers.append(srv)

    def _accept(self, link: Link, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        t = asyncio.ensure_future(self._connection(link, r, w))
        self.conns.add(t)
        t.add_done_callback(self.conns.discard)

    async def _connection(self, link: Link, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        self.stats[link.name]["conns"] += 1
        # A connection across a cut (either way) hangs, like a dropped SYN/SYN-ACK.
        while self.faults.blocked(link.src, link.dst) or self.faults.blocked(link.dst, link.src):
            if cr.at_eof():
                cw.close()
                return
            await self._wait_change(0.2)
        try:
            ur, uw = await asyncio.open_connection(link.host, link.target)
        except OSError:
            cw.close()  # target down: connection refused, as without a proxy
            return
        for w in (cw, uw):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        a = asyncio.ensure_future(self._pipe(link, cr, uw, link.src, link.dst))
        b = asyncio.ensure_future(self._pipe(link, ur, cw, link.dst, link.src))
        reset = False
        try:
            done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_EXCEPTION)
            if any(t.exception() for t in done if not t.cancelled()):
                reset = True
                for t in pending:
                    t.cancel()
            else:
                await asyncio.gather(*pending, return_exceptions=True)
        finally:
            for w in (cw, uw):
                try:
                    if reset:
                        w.transport.abort()  # RST both ends, as a peer's reset would
                    else:
                        w.close()
                except Exception:
                    pass

    async def _pipe(self, link: Link, r: asyncio.StreamReader, w: asyncio.StreamWriter, frm: str, to: str) -> None:
        """Copy one direction: read eagerly, deliver when due and not cut."""
        q: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()
        held = 0
        over = False

        async def reader() -> None:
            nonlocal held, over
            while True:
                try:
                    data = await r.read(CHUNK)
                except (ConnectionError, OSError):
                    data = b""
                if not data:
                    await q.put((time.monotonic(), None))
                    return
                held += len(data)
                if held > self.max_held:
                    over = True  # the writer below resets the connection
                    self._notify()  # wakes it if it waits out a cut
                    await q.put((0.0, None))  # or if it waits for data
                    return
                await q.put((time.monotonic() + self._delay(link), data))

        def check() -> None:
            if over:
                self.stats[link.name]["resets"] = self.stats[link.name].get("resets", 0) + 1
                raise ConnectionResetError(f"{link.name}: more than {self.max_held} bytes held across a cut")

        rt = asyncio.ensure_future(reader())
        try:
            while True:
                due, data = await q.get()
                check()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                while self.faults.blocked(frm, to):
                    check()
                    self.stats[link.name]["held"] += 1
                    await self._wait_change()
                if data is None:
                    try:
                        if w.can_write_eof():
                            w.write_eof()
                    except OSError:
                        pass
                    return
                held -= len(data)
                w.write(data)
                await w.drain()
                self.stats[link.name]["bytes"] += len(data)
        finally:
            rt.cancel()

    # ------------------------------------------------------------ control
    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(req, dict) or not auth.check(self.secret, auth.PROXY, req.get("token")):
            return {"ok": False, "error": "missing or wrong cluster token"}
        cmd = req.get("cmd")
        if cmd == "ping":
            return {"ok": True}
        if cmd == "cut":
            self.faults.cut = {(str(a), str(b)) for a, b in req.get("pairs", [])}
            self._notify()
            return {"ok": True, "cut": sorted(self.faults.cut)}
        if cmd == "heal":
            self.faults.cut.clear()
            self.faults.delay_ms.clear()
            self._notify()
            return {"ok": True}
        if cmd == "delay":
            names = req.get("links") or [l.name for l in self.links]
            ms, jitter = float(req.get("ms", 0)), float(req.get("jitter", 0))
            for what, v in (("ms", ms), ("jitter", jitter)):
                if not math.isfinite(v) or not 0 <= v <= MAX_DELAY_MS:
                    return {"ok": False, "error": f"delay {what} {v} must be finite, 0..{MAX_DELAY_MS:.0f}"}
            for n in names:
                if ms <= 0:
                    self.faults.delay_ms.pop(n, None)
                else:
                    self.faults.delay_ms[n] = (ms, jitter)
            return {"ok": True}
        if cmd == "stats":
            return {"ok": True, "links": self.stats, "cut": sorted(self.faults.cut),
                    "delay": self.faults.delay_ms, "open": len(self.conns)}
        return {"ok": False, "error": f"unknown cmd {cmd!r}"}

    async def control(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while line := await r.readline():
                try:
                    resp = self.handle(json.loads(line))
                except Exception as e:
                    resp = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                w.write((json.dumps(resp) + "\n").encode())
                await w.drain()
        finally:
            w.close()


async def serve(links: list[Link], control_port: int, seed: int, secret: bytes, ready: Any = None,
                max_held: int = MAX_HELD) -> None:
    srv = ProxyServer(links, secret, seed, max_held)
    await srv.start()
    ctl = await asyncio.start_server(srv.control, "127.0.0.1", control_port, reuse_address=True)
    port = ctl.sockets[0].getsockname()[1]
    if ready is not None:
        ready(port)
    await asyncio.Event().wait()


class ProxyControl:
    """Synchronous client for the control port (used by the nemesis)."""

    def __init__(self, port: int, timeout: float = 10.0, secret: bytes | None = None) -> None:
        self.token = auth.token(secret, auth.PROXY)
        self.port = port
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = b""

    def call(self, **req: Any) -> dict[str, Any]:
        for attempt in (0, 1):
            try:
                if self._sock is None:
                    self._sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
                self._sock.sendall((json.dumps({**req, "token": self.token}) + "\n").encode())
                while b"\n" not in self._buf:
                    chunk = self._sock.recv(65536)
                    if not chunk:
                        raise ConnectionError("proxy control closed")
                    self._buf += chunk
                line, self._buf = self._buf.split(b"\n", 1)
                resp = json.loads(line)
                if not resp.get("ok"):
                    raise RuntimeError(resp.get("error", "proxy error"))
                return resp
            except (OSError, ConnectionError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._buf = b""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="kraftwerk link proxy")
    ap.add_argument("--links", required=True, help="JSON file: [{src, dst, listen, target}, ...]")
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-held", type=int, default=MAX_HELD, help="bytes held per direction before a reset")
    ap.add_argument("--secret-file", default=None,
                    help="cluster secret (0600, required): control commands must carry its token")
    args = ap.parse_args(argv)
    arm()  # end with the harness that started us
    links = [Link(**d) for d in json.loads(Path(args.links).read_text())]

    def ready(port: int) -> None:
        print(json.dumps({"control": port}), flush=True)

    if not args.secret_file:
        print(json.dumps({"error": "--secret-file is required: without it any local user could cut links"}),
              flush=True)
        return 2
    try:
        secret = auth.load_secret(args.secret_file)
        asyncio.run(serve(links, args.control_port, args.seed, secret, ready, args.max_held))
    except auth.SecretError as e:
        print(json.dumps({"error": str(e)}), flush=True)
        return 2
    except OSError as e:  # errno lets the harness tell a port taken meanwhile from other failures
        print(json.dumps({"error": str(e), "errno": e.errno}), flush=True)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
