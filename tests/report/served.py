"""A report site served in-process on a free loopback port, for the tests
that talk to it over HTTP."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import uvicorn

from reference_impl.server.ports import free_ports


@contextmanager
def served(app: Any) -> Iterator[int]:
    """Serve ``app`` until the ``with`` ends; yields its port."""
    port = free_ports(1)[0]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        t.join(timeout=20)
