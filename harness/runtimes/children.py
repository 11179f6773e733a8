"""Daemons that are this harness's own child processes, one per node.

The local and netns runtimes both start each node's daemon with
``subprocess.Popen`` in a session of its own, so their liveness, signals
and exits are the same questions about the same ``Popen`` objects; the
docker and ssh runtimes ask theirs of a container or a remote pid instead.
"""

from __future__ import annotations

import os
import subprocess


class ChildDaemons:
    """``running``, ``signal`` and ``wait_exit`` of the host contract over
    ``procs`` (node name -> its daemon's ``Popen``, the leader of its own
    process group, so a signal reaches everything the daemon started)."""

    procs: dict[str, subprocess.Popen]

    def running(self, node: str) -> bool:
        p = self.procs.get(node)
        return p is not None and p.poll() is None

    def signal(self, node: str, sig: int) -> None:
        p = self.procs.get(node)
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass  # it exited between the poll and the signal

    def wait_exit(self, node: str, timeout: float) -> bool:
        """Whether the node's daemon has exited within ``timeout`` seconds."""
        p = self.procs.get(node)
        if p is None:
            return True
        try:
            p.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
