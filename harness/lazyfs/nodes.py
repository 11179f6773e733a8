"""Each node's data directory through ``kraftwerk fs``, for a db on hosts
that share this machine's filesystem (netns): power loss then loses what the
node did not fsync by the filesystem, not by the broker's own emulation.

Layout per node, under ``<run>/nodes/<name>/``: ``data/`` is the mount the
node writes (its ``--data-dir``), ``durable/`` its backing directory (what
survived every crash so far), logs and trace beside them (``--log-dir``),
outside the mount, so the glass-box trace survives the power loss it
records. Mounts are made from the root namespace before a node starts, so
the node's namespace sees them. Each is recorded twice: in the run's
registry entry (with the argv that undoes it) and in the filesystem's own
registry, owned by this process, so ``kraftwerk cleanup`` removes it
however the run ends.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.state import RunState

from . import mounts


class NodeDisks:
    def __init__(self, run_dir: Path, state: RunState | None, seed: int, torn: bool = False) -> None:
        self.run_dir = run_dir
        self.state = state
        self.seed = seed
        #: every crash keeps a seeded prefix of each file's un-fsynced writes
        self.torn = torn
        self.mounted: list[str] = []

    def node_dir(self, node: str) -> Path:
        return self.run_dir / "nodes" / node

    def data_dir(self, node: str) -> str:
        return str(self.node_dir(node) / "data")

    def mount(self, node: str) -> None:
        point, backing = self.data_dir(node), self.node_dir(node) / "durable"
        if point in self.mounted:
            return
        os.makedirs(point, exist_ok=True)
        backing.mkdir(parents=True, exist_ok=True)
        if self.state is not None:
            self.state.add_resource("mount", point, undo=[
                [sys.executable, "-c", "from harness.cli import main; main()", "fs", "umount", point],
                ["umount", "-l", point],
            ])
        mounts.mount(point, backing, seed=self.seed * 1009 + len(self.mounted), owner_pid=os.getpid())
        self.mounted.append(point)

    def crash(self, node: str, torn: bool | None = None) -> dict:
        """Drop the node's un-fsynced writes (torn: keep a prefix of them).
        The node must be dead already: a live one would go on writing into
        the emptied cache."""
        return mounts.crash(self.data_dir(node), torn=self.torn if torn is None else torn)

    def sync(self, node: str) -> None:
        """Make everything the node wrote durable, as the kernel's periodic
        write-back of dirty pages would."""
        mounts.control(self.data_dir(node), "sync")

    def teardown(self) -> None:
        for point in self.mounted:
            mounts.umount(point)
            if self.state is not None:
                self.state.remove_resource("mount", point)
        self.mounted.clear()
