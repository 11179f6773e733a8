"""A hostile local user's connections, run as its own process (the tests and
bench/broker_flood.py start it as an unprivileged user with setpriv).

One JSON argument says what to do::

    {"port": 19092, "sources": ["127.0.0.2"], "count": 50, "send": "<hex>",
     "pad": 0, "answer": false, "watch": 5.0, "rate": 0, "rcvbuf": 0, "noread": false}

It opens ``count`` connections to ``127.0.0.1:port``, spread over the
``sources`` addresses (each socket bound to one before it connects, so the
node sees distinct peers on loopback), sends the ``send`` bytes and ``pad``
zero bytes after them on each (a frame's claimed size in ``send``, part of
its body as ``pad``: a half frame without a huge argument), reads
one response frame on each if ``answer`` is true, then watches them for
``watch`` seconds, keeping them open. ``rate`` > 0 opens at most that many a
second; ``rcvbuf`` > 0 shrinks each socket's receive buffer (a client that
reads nothing then leaves the node's answers in the node); ``noread`` reads
nothing while it watches and looks for closed sockets only at the end (their
``closed_at`` is then the watch's length). It prints one JSON line: how many connected, how many the node closed
at once (before ``send`` and the answer went through) and, for each socket the
node closed while watched, when (seconds after the watch began).

Standard library only: it runs as an unprivileged user from this checkout.
"""

from __future__ import annotations

import json
import selectors
import socket
import struct
import sys
import time


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _open(port: int, source: str, payload: bytes, answer: bool, rcvbuf: int) -> socket.socket | None:
    """A connected socket whose payload (and answer) went through, or None
    when the node refused or closed it at once."""
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    try:
        s.bind((source, 0))
        s.settimeout(5.0)
        s.connect(("127.0.0.1", port))
        if payload:
            s.sendall(payload)
        if answer:
            (size,) = struct.unpack(">i", _recv_exact(s, 4))
            _recv_exact(s, size)
        return s
    except OSError:
        s.close()
        return None


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _drained_to_end(s: socket.socket) -> bool:
    """Read what is waiting; True if the node closed the socket."""
    while True:
        try:
            if not s.recv(1 << 20):
                return True
        except BlockingIOError:
            return False
        except OSError:
            return True


def main(spec: dict) -> dict:
    port, sources = int(spec["port"]), list(spec.get("sources") or ["127.0.0.1"])
    payload = bytes.fromhex(spec.get("send", "")) + bytes(int(spec.get("pad", 0)))
    answer, rate = bool(spec.get("answer", False)), float(spec.get("rate", 0))
    socks: list[socket.socket] = []
    refused = 0
    began = time.monotonic()
    for i in range(int(spec["count"])):
        if rate > 0:
            time.sleep(max(0.0, began + i / rate - time.monotonic()))
        s = _open(port, sources[i % len(sources)], payload, answer, int(spec.get("rcvbuf", 0)))
        if s is None:
            refused += 1
        else:
            socks.append(s)
    for s in socks:
        s.setblocking(False)
    # a node that refuses a slot resets the socket: those still look open
    # until read, so the first look counts them as refused, not as closed later
    open_now = []
    for s in socks:
        if _closed(s):
            refused += 1
            s.close()
        else:
            open_now.append(s)
    watch = float(spec.get("watch", 0))
    if spec.get("noread"):
        time.sleep(watch)
        gone = [s for s in open_now if _drained_to_end(s)]
        for s in open_now:
            s.close()
        return {"connected": len(socks), "refused": refused, "held": len(open_now), "closed_at": [watch] * len(gone)}
    start = time.monotonic()
    closed_at: list[float] = []
    sel = selectors.DefaultSelector()  # epoll: thousands of sockets, past select's 1024
    for s in open_now:
        sel.register(s, selectors.EVENT_READ)
    live = len(open_now)
    while live and time.monotonic() - start < watch:
        for key, _ in sel.select(0.05):
            s = key.fileobj
            if _closed(s):
                closed_at.append(round(time.monotonic() - start, 3))
                sel.unregister(s)
                s.close()
                live -= 1
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    sel.close()
    return {"connected": len(socks), "refused": refused, "held": len(open_now), "closed_at": closed_at}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
