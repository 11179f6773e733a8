"""The local runtime: every node's host is this machine (127.0.0.1), and the
ports its nodes listen on.

This is the ``Remote`` side of the cluster contract (CONTRACT.md: ``exec``,
``upload``, ``download``, ``start_daemon``, ``signal``, ``address``,
``teardown``) for processes on 127.0.0.1, which is all a db that runs
its own binaries (``harness.dbs.kafka.db``) asks of a backend. Daemons start in
their own session (a signal reaches the whole process group), carry
``KRAFTWERK_RUN_ID`` and are recorded in the run's state file before anything
else happens, so ``kraftwerk cleanup`` finds them whatever becomes of the
harness.
"""

from __future__ import annotations

import os
import shutil
import signal as sig_mod
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from harness.errors import UsageError
from harness.rundir.state import RunState
from harness.runtimes.children import ChildDaemons
from reference_impl.server.ports import free_ports, port_in_use

HOST = "127.0.0.1"


class LocalHosts(ChildDaemons):
    """Node hosts that are all 127.0.0.1; one daemon per node."""

    runtime = "local"

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.procs: dict[str, subprocess.Popen] = {}

    def address(self, node: str) -> str:
        return HOST

    def exec(self, node: str, argv: Sequence[str], timeout: float = 30.0,
             stdin: str | None = None) -> tuple[int, str, str]:
        try:
            p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                               env=self.state.child_env(), input=stdin)
        except subprocess.TimeoutExpired:
            return 124, "", f"timed out after {timeout:.0f}s"
        except OSError as e:
            return 127, "", str(e)
        return p.returncode, p.stdout, p.stderr

    def upload(self, node: str, local: Path, remote: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(remote + ".tmp")
        shutil.copyfile(local, tmp)
        os.replace(tmp, remote)  # a reader (libfaketime) never sees half a file

    def download(self, node: str, remote: str, local: Path) -> None:
        if Path(remote).resolve() != Path(local).resolve():
            shutil.copyfile(remote, local)

    def start_daemon(self, node: str, argv: Sequence[str], log: str, env: Mapping[str, str]) -> int:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        # a run's state ties the daemon to the harness (lease, parent-death
        # signal); a hand cluster's state does not
        spawn = getattr(self.state, "spawn_options", None)
        opts: dict = spawn() if spawn is not None else {"env": self.state.child_env(), "start_new_session": True}
        opts["env"] = {**opts["env"], **env}
        with open(log, "ab") as out:
            p = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out, **opts)
        self.state.add_process(p.pid, "node", node)
        self.procs[node] = p
        return p.pid

    def teardown(self) -> None:
        for node, p in self.procs.items():
            if p.poll() is None:
                for s in (sig_mod.SIGCONT, sig_mod.SIGKILL):
                    try:
                        os.killpg(p.pid, s)
                    except ProcessLookupError:
                        pass
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def allocate_ports(count: int, base: int = 0) -> list[int]:
    """``count`` ports on 127.0.0.1: consecutive from ``base`` (each checked, a
    port in use is bad input) or, with base 0, free ports outside the
    kernel's ephemeral range (:mod:`reference_impl.server.ports` says why)."""
    if base:
        ports = list(range(base, base + count))
        if ports[-1] > 65535:
            raise UsageError(f"--base-port {base}: needs {count} ports, runs past 65535")
        for p in ports:
            if port_in_use(p):
                raise UsageError(f"port {p} on {HOST} is in use (--base-port {base} needs {base}..{base + count - 1})")
        return ports
    return free_ports(count)
