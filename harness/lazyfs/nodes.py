"""Each node's data directory through ``kraftwerk fs``: power loss then loses
what the node did not fsync by the filesystem, not by the broker's own
emulation.

Layout per node, under the node's directory on its host: ``data/`` is the
mount the node writes (its ``--data-dir``), ``durable/`` its backing
directory (what survived every crash so far), logs and trace beside them
(``--log-dir``), outside the mount, so the glass-box trace survives the
power loss it records.

Two ways to get there, one interface (``data_dir``, ``mount``, ``crash``,
``sync``, ``teardown``; :func:`for_hosts` picks):

* :class:`NodeDisks` — hosts that share this machine's mounts (netns: a
  namespace's mount table follows the root one). Mounts are made here,
  before a node starts, and recorded twice: in the run's registry entry
  (with the argv that undoes it) and in the filesystem's own registry,
  owned by this process, so ``kraftwerk cleanup`` removes them however the
  run ends.
* :class:`RemoteDisks` — hosts with mounts of their own (docker containers,
  ssh hosts): ``kraftwerk fs mount|crash|sync|umount`` run on the node's
  host through the host contract's ``exec``. A container's mounts go with
  the container; on an ssh host the mount is owned by the ssh connection
  that made it (``--owner-ssh``), so a harness that dies leaves none.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.rundir.state import RunState

from . import mounts


def mount_seed(seed: int, index: int) -> int:
    """Each node's mount draws its torn prefixes from a seed of its own."""
    return seed * 1009 + index


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
        mounts.mount(point, backing, seed=mount_seed(self.seed, len(self.mounted)), owner_pid=os.getpid())
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


class RemoteDisks:
    """The same, made on each node's own host with ``kraftwerk fs`` commands."""

    def __init__(self, hosts: Any, seed: int, torn: bool = False) -> None:
        self.hosts = hosts
        self.seed = seed
        self.torn = torn
        self.mounted: list[str] = []  # node names

    def data_dir(self, node: str) -> str:
        return f"{self.hosts.node_dir(node)}/data"

    def _fs(self, node: str, *args: str, timeout: float = 60.0) -> str:
        """``kraftwerk fs ARGS`` on the node's host; its stdout, or a
        one-line HarnessError with the host's last line of complaint."""
        rc, out, err = self.hosts.exec(node, [*self.hosts.kraftwerk_argv(node), "fs", *args], timeout)
        if rc != 0:
            why = ((err or out).strip().splitlines() or [f"exit {rc}"])[-1][:300]
            raise HarnessError(f"{node}: kraftwerk fs {args[0]} failed: {why}")
        return out

    def mount(self, node: str) -> None:
        if node in self.mounted:
            return
        d = self.hosts.node_dir(node)
        rc, _, err = self.hosts.exec(node, ["mkdir", "-p", f"{d}/data", f"{d}/durable"], 30.0)
        if rc != 0:
            raise HarnessError(f"{node}: cannot make {d}/data: {err.strip()[:200]}")
        owner = ["--owner-ssh"] if self.hosts.runtime == "ssh" else []
        self._fs(node, "mount", f"{d}/data", "--backing", f"{d}/durable",
                 "--seed", str(mount_seed(self.seed, len(self.mounted))), *owner)
        self.mounted.append(node)

    def crash(self, node: str, torn: bool | None = None) -> dict:
        torn = self.torn if torn is None else torn
        return json.loads(self._fs(node, "crash", self.data_dir(node), "--json", *(["--torn"] if torn else [])))

    def sync(self, node: str) -> None:
        self._fs(node, "sync", self.data_dir(node))

    def teardown(self) -> None:
        errors = []
        for node in self.mounted:
            try:
                self._fs(node, "umount", self.data_dir(node))
            except HarnessError as e:
                errors.append(e)
        self.mounted.clear()
        if errors:
            raise errors[0]

    def mounted_points(self, node: str) -> list[str]:
        """kraftwerk fs mounts in the node's host's mount table (a check that
        none outlives the run)."""
        rc, out, _ = self.hosts.exec(node, ["cat", "/proc/self/mountinfo"], 30.0)
        return [line.split()[4] for line in out.splitlines() if f" - {mounts.FSTYPE} " in line]


def for_hosts(hosts: Any, run_dir: Path, state: RunState | None, seed: int, torn: bool = False) -> Any:
    """Mounts made here where the hosts share this machine's mount table
    (netns), on each host otherwise (docker, ssh)."""
    if hosts is None or hosts.runtime in ("netns", "local"):
        return NodeDisks(run_dir, state, seed, torn)
    return RemoteDisks(hosts, seed, torn)
