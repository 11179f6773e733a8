"""Pausing and resuming a db's node processes through the host contract.

Both hosted dbs (the reference broker and real Kafka) stop a node with
SIGSTOP and remember it, so a resume sends SIGCONT only to what they paused
and a node that died meanwhile is never signalled. Needs ``self.hosts`` (the
backend's ``Remote``) and ``self.paused`` (a set of node names).
"""

from __future__ import annotations

import signal
from typing import Any


class PausesBySignal:
    hosts: Any
    paused: set[str]

    def pause(self, node: str) -> None:
        if self.hosts.running(node):
            self.hosts.signal(node, signal.SIGSTOP)
            self.paused.add(node)

    def resume(self, node: str) -> None:
        if node in self.paused:
            self.hosts.signal(node, signal.SIGCONT)
            self.paused.discard(node)
