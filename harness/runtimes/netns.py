"""The ``netns`` backend: each node is a network namespace on this machine.

Hosts are the namespaces of one :class:`harness.runtimes.net.netns.Fabric` (names
``kw-<tag>-<node>``, real addresses in a private /24, a bridge in a namespace
of its own); the clients' end of the bridge is in the root namespace, so the
harness reaches every node by address (see that module for why). The
filesystem is shared, so node data directories are the run directory's own
``nodes/<name>/`` and upload/download are copies.

Daemons are started with ``ip netns exec`` (argv), in a session of their
own, recorded in the run's state file before anything else happens to them;
``ip netns exec`` execs, so the pid recorded is the daemon's.
"""

from __future__ import annotations

import os
import shutil
import signal as _signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

from harness.errors import HarnessError
from harness.runtimes.net.netns import OWNER_DIR, Fabric, require_root
from harness.rundir.state import RunState
from harness.runtimes.children import ChildDaemons

REPO_ROOT = Path(__file__).resolve().parents[2]


class NetnsHosts(ChildDaemons):
    """The host contract (``Remote``) over namespaces of one fabric."""

    runtime = "netns"
    shared_fs = True

    def __init__(self, fabric: Fabric, state: RunState | None, run_dir: Path) -> None:
        self.fabric = fabric
        self.state = state
        self.run_dir = run_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.helpers: list[subprocess.Popen] = []  # beside the daemons: packet delayers

    @classmethod
    def create(cls, nodes: Sequence[str], state: RunState | None, run_dir: Path) -> "NetnsHosts":
        require_root("--backend netns")
        fabric = Fabric.create(nodes)
        if state is not None:
            register(state, fabric)
        return cls(fabric, state, run_dir)

    # ------------------------------------------------------------ identity
    def node_names(self) -> list[str]:
        return list(self.fabric.addresses)

    def address(self, node: str) -> str:
        return self.fabric.addresses[node]

    @property
    def client_address(self) -> str:
        return self.fabric.client_address

    def node_dir(self, node: str) -> str:
        return str(self.run_dir / "nodes" / node)

    def kraftwerk_argv(self, node: str | None = None) -> list[str]:
        return [sys.executable, "-c", "from harness.cli import main; main()"]

    # ------------------------------------------------------------ commands and files
    def exec(self, node: str, argv: Sequence[str], timeout: float = 30.0,
             stdin: str | None = None) -> tuple[int, str, str]:
        try:
            p = subprocess.run(self.fabric.exec_argv(node, argv), capture_output=True, text=True,
                               timeout=timeout, input=stdin)
        except subprocess.TimeoutExpired:
            return 124, "", f"timed out after {timeout:.0f}s"
        return p.returncode, p.stdout, p.stderr

    def upload(self, node: str, local: Path, remote: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        if Path(local).resolve() != Path(remote).resolve():
            shutil.copyfile(local, remote)

    def download(self, node: str, remote: str, local: Path) -> None:
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        if Path(local).resolve() != Path(remote).resolve():
            shutil.copyfile(remote, local)

    # ------------------------------------------------------------ the daemon
    def start_daemon(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str]) -> int:
        p = self._spawn(node, argv, log, env, "node")
        self.procs[node] = p
        return p.pid

    def start_helper(self, node: str, argv: Sequence[str], log: str) -> int:
        """A process of the run beside the node's daemon (a packet delayer):
        leased and registered like it, killed at teardown."""
        p = self._spawn(node, argv, log, {}, "helper")
        self.helpers.append(p)
        return p.pid

    def _spawn(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str], role: str) -> subprocess.Popen:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        opts: dict = self.state.spawn_options() if self.state is not None else {
            "env": dict(os.environ), "start_new_session": True}
        opts["env"] = {**opts["env"], **env}
        with open(log, "ab") as out:
            p = subprocess.Popen(self.fabric.exec_argv(node, argv), stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=out, cwd=str(REPO_ROOT), **opts)
        if self.state is not None:
            self.state.add_process(p.pid, role, node)
        return p

    def teardown(self) -> None:
        for node in list(self.procs):
            self.signal(node, _signal.SIGCONT)
            self.signal(node, _signal.SIGKILL)
        for node in list(self.procs):
            self.wait_exit(node, 10)
        for p in self.helpers:
            p.kill()
            p.wait(10)
        self.fabric.destroy()
        if self.state is not None:
            self.state.remove_resource("netns", self.fabric.tag)


def register(state: RunState, fabric: Fabric) -> None:
    """Name the fabric in the run's registry entry with the argv that undoes
    it, so cleanup removes it from the registry alone; ``sweep`` finds it by
    its ``kw-`` names as well."""
    undo = [["ip", "netns", "delete", fabric.ns(n)] for n in fabric.addresses]
    undo += [["ip", "netns", "delete", fabric.bridge_ns], ["ip", "link", "delete", fabric.client_link],
             ["rm", "-f", str(OWNER_DIR / f"{fabric.tag}.json")]]  # its subnet's owner record last
    state.add_resource("netns", f"{fabric.tag}", undo=undo, subnet=f"10.213.{fabric.subnet}.0/24")


def wait_until(cond, timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise HarnessError(f"{what} after {timeout:.0f}s")
        time.sleep(interval)
