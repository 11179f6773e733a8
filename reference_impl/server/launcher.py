"""Start, stop and inspect a local cluster of reference-broker node processes.

The one local cluster of node processes: ``kraftwerk cluster``, the
integration tests and the benchmarks use it as it is, and the harness's
local backend builds on it (``harness.dbs.reference.local``: per-link
proxies and the cluster contract on top of this planning, spawning and
liveness). Each node runs ``kraftwerk node`` as its own process in its own
session (so a terminal's Ctrl-C does not reach it); the pids and layout are
kept in ``<dir>/cluster.json`` so a later ``down`` or ``status`` finds them.

Names and node ids are every runtime's (:mod:`.layout`): brokers ``n1``..
with ids 1.., dedicated controllers ``c1``.. with ids 101.., or every node
``n<i>`` with id i in ``combined`` mode. Node ``i`` (0-based, in that order)
listens on ``base_port + i`` and its control endpoint on ``base_port + 100 +
i``; with ``base_port`` 0 every port is one the kernel reports free (what
tests use, so two suites on one machine never collide). Node data
directories are ``<dir>/nodes/<name>/``, the run-directory layout, so
``checkers.invariants.check_trace_dir(<dir>)`` reads their traces.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Iterator

from kafka.protocol.metadata import MetadataRequest, MetadataResponse


from . import auth
from .layout import layout
from .ports import HOST, free_ports, port_in_use
from .procs import alive, proc_start_time, reap, wait_exit

STATE_FILE = "cluster.json"
SECRET_FILE = "cluster.secret"
#: a harness run's variables (harness/rundir/lease.py) that a `cluster up` node must not inherit
_HARNESS_ENV = frozenset({"KRAFTWERK_RUN_ID", "KRAFTWERK_LEASE_FD", "KRAFTWERK_PARENT_PID", "KRAFTWERK_PDEATHSIG"})
#: the repository root, which every node process must be able to import from
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ClusterError(RuntimeError):
    pass


class PortTaken(ClusterError):
    """A node's port was bound by another process before the node bound it:
    checked free at ``up``, or taken between that check and the node's own
    bind (the node exits with "address already in use")."""


@dataclass
class NodeSpec:
    node_id: int
    roles: list[str]
    port: int
    control_port: int
    data_dir: str
    pid: int | None = None
    #: the process's start time (/proc/<pid>/stat), so a recycled pid is never signalled
    start: int | None = None
    #: trace.jsonl and node.log apart from the data (a data disk may fill up or lose writes)
    log_dir: str | None = None
    #: the node's name (``n1``, ``c1``), as every runtime names it
    name: str = ""

    def running(self) -> bool:
        """The recorded process still runs: its pid *and* start time match
        (a state file without a start time names no process, so ``down``
        never signals whatever has that pid now)."""
        if not isinstance(self.pid, int) or not isinstance(self.start, int):
            return False
        reap(self.pid)  # a node of ours that ended leaves no zombie
        return alive(self.pid, self.start)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles


@dataclass
class LocalCluster:
    dir: str
    nodes: list[NodeSpec] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)
    storage_mode: str = "os"
    #: each node's --seed is seed * 101 + its id (None: the node draws its own)
    seed: int | None = None

    #: the ports were chosen free (``plan`` with base port 0), not named by
    #: the user: one taken by another process before its node binds it is
    #: replaced by ``up`` rather than fatal
    movable_ports: bool = False

    #: each node's output, in its log directory (or its data directory)
    LOG_NAME = "stdout.log"
    #: how many times ``up`` plans fresh ports when chosen ones were taken
    PORT_ATTEMPTS = 4

    # -- layout -------------------------------------------------------------

    @classmethod
    def plan(
        cls,
        dir: str,
        brokers: int = 3,
        controllers: int = 3,
        base_port: int = 19092,
        combined: bool = False,
        config: dict[str, str] | None = None,
        storage_mode: str = "os",
    ) -> "LocalCluster":
        if brokers < 1 or controllers < 1:
            raise ClusterError("a cluster needs at least one broker and one controller")
        if base_port != 0 and not 1024 <= base_port <= 65535 - 200:
            raise ClusterError(f"base port {base_port} out of range (0 for free ports, or 1024..{65535 - 200})")
        nodes = layout(brokers, controllers, combined)
        if base_port == 0:
            ports: Iterator[int] = iter(free_ports(2 * len(nodes)))
        else:
            ports = iter(p for i in range(len(nodes)) for p in (base_port + i, base_port + 100 + i))
        c = cls.from_layout(dir, nodes, ports, config, storage_mode)
        c.movable_ports = base_port == 0
        return c

    @classmethod
    def from_layout(cls, dir: str, nodes: list[tuple[str, int, list[str]]], ports: Iterator[int],
                    config: dict[str, str] | None = None, storage_mode: str = "os", **fields: Any) -> "LocalCluster":
        """The cluster of ``nodes`` (name, id, roles), each taking its listen
        and control port from ``ports`` in turn."""
        dir = os.path.abspath(dir)
        specs = [NodeSpec(node_id, list(roles), next(ports), next(ports), os.path.join(dir, "nodes", name), name=name)
                 for name, node_id, roles in nodes]
        return cls(dir, specs, dict(config or {}), storage_mode, **fields)

    @property
    def quorum(self) -> str:
        return ",".join(f"{n.node_id}@{HOST}:{n.port}" for n in self.nodes if n.is_controller)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{n.port}" for n in self.nodes if n.is_broker)

    @property
    def brokers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_broker]

    def node(self, node_id: int) -> NodeSpec:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise ClusterError(f"no node {node_id} in this cluster")

    def by_name(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ClusterError(f"no node {name} in this cluster")

    # -- state file -------------------------------------------------------------

    def save(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        tmp = os.path.join(self.dir, STATE_FILE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)  # owner-only
        with os.fdopen(fd, "w") as f:
            json.dump(
                {"dir": self.dir, "nodes": [asdict(n) for n in self.nodes], "config": self.config, "storage_mode": self.storage_mode,
                 "bootstrap": self.bootstrap, "quorum": self.quorum},
                f,
                indent=2,
            )
        os.replace(tmp, os.path.join(self.dir, STATE_FILE))

    @classmethod
    def load(cls, dir: str) -> "LocalCluster":
        path = os.path.join(os.path.abspath(dir), STATE_FILE)
        try:
            with open(path) as f:
                d = json.load(f)
        except FileNotFoundError:
            raise ClusterError(f"no cluster in {dir} (no {STATE_FILE})") from None
        except (OSError, ValueError) as e:
            raise ClusterError(f"cannot read {path}: {e}") from None
        try:
            return cls(d["dir"], [NodeSpec(**n) for n in d["nodes"]], d.get("config", {}), d.get("storage_mode", "os"))
        except (KeyError, TypeError):
            raise ClusterError(f"{path}: not a state file kraftwerk cluster up wrote") from None

    # -- processes --------------------------------------------------------------

    def quorum_for(self, n: NodeSpec) -> str:
        """The voters as ``n`` reaches them (each at its own port here)."""
        return self.quorum

    def extra_args(self, n: NodeSpec) -> list[str]:
        """Flags a cluster built on this one adds to ``n``'s command line."""
        return []

    def command(self, n: NodeSpec, storage_mode: str | None = None) -> list[str]:
        cmd = [
            sys.executable,
            "-c",
            "from harness.cli import main; main()",
            "node",
            "--id", str(n.node_id),
            "--roles", ",".join(n.roles),
            "--listen", f"{HOST}:{n.port}",
            "--controller-quorum", self.quorum_for(n),
            "--data-dir", n.data_dir,
            "--control", f"{HOST}:{n.control_port}",
            "--storage-mode", storage_mode or self.storage_mode,
            "--secret-file", self.secret_path,
        ]
        if n.log_dir:
            cmd += ["--log-dir", n.log_dir]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed * 101 + n.node_id)]
        cmd += self.extra_args(n)
        for k, v in sorted(self.config.items()):
            cmd += ["--set", f"{k}={v}"]
        return cmd

    @property
    def secret_path(self) -> str:
        """The cluster secret (auth.py), made by the first start, owner-only."""
        return os.path.join(self.dir, SECRET_FILE)

    def _secret(self) -> bytes | None:
        try:
            return auth.load_secret(self.secret_path)
        except auth.SecretError:
            return None

    def child_env(self) -> dict[str, str]:
        """The node's environment: ours without a harness run's lease, so a
        `cluster up` node never ends with the command that started it."""
        return {k: v for k, v in os.environ.items() if k not in _HARNESS_ENV}

    def spawn_options(self) -> dict[str, Any]:
        """How a node's process is started: its own session and
        :meth:`child_env` (a cluster built on this one may hand it a lease)."""
        return {"start_new_session": True, "env": self.child_env()}

    def process_options(self) -> dict[str, Any]:
        """:meth:`spawn_options` with the repository on ``PYTHONPATH``, so the
        process imports this project whatever its working directory."""
        opts = self.spawn_options()
        env = dict(opts.get("env") or os.environ)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return {**opts, "env": env}

    def log_path(self, n: NodeSpec) -> str:
        return os.path.join(n.log_dir or n.data_dir, self.LOG_NAME)

    def spawn(self, n: NodeSpec, storage_mode: str | None = None) -> subprocess.Popen[bytes]:
        """Start ``n``'s process, its output appended to :meth:`log_path`, and
        record its pid and start time."""
        os.makedirs(n.data_dir, exist_ok=True)
        auth.ensure_secret_file(self.secret_path)
        if n.log_dir:
            os.makedirs(n.log_dir, exist_ok=True)
        out: IO[bytes] = open(self.log_path(n), "ab")
        try:
            p = subprocess.Popen(self.command(n, storage_mode), stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, cwd=self.dir, **self.process_options())
        finally:
            out.close()
        n.pid, n.start = p.pid, proc_start_time(p.pid)
        return p

    def start_node(self, node_id: int) -> int:
        n = self.node(node_id)
        if n.running():
            raise ClusterError(f"node {node_id} is already running (pid {n.pid})")
        p = self.spawn(n)
        self.save()
        return p.pid

    def up(self, timeout: float = 60.0) -> None:
        """Start every node and wait until all are ready. Ports chosen free
        (:attr:`movable_ports`) can still be taken by another process before
        a node binds one (free-port choices of parallel clusters, outside the
        kernel's ephemeral range, are rare but do meet, as parallel test
        workers showed): a first start that fails so is undone, its data
        removed, and tried again on fresh ports. A cluster started before
        (its data directories exist) keeps its ports: its quorum lives in
        its data."""
        os.makedirs(self.dir, exist_ok=True)
        for n in self.nodes:
            if n.running():
                raise ClusterError(f"node {n.node_id} is already running (pid {n.pid}); run down first")
        first_start = not any(os.path.exists(n.data_dir) for n in self.nodes)
        for attempt in range(1, self.PORT_ATTEMPTS + 1):
            try:
                return self._up_once(timeout)
            except PortTaken:
                if not (self.movable_ports and first_start) or attempt == self.PORT_ATTEMPTS:
                    raise
                self._forget_first_start()
                ports = iter(free_ports(2 * len(self.nodes)))
                for n in self.nodes:
                    n.port, n.control_port = next(ports), next(ports)

    def _forget_first_start(self) -> None:
        """Remove what a failed first start left (every node is down)."""
        for n in self.nodes:
            for d in (n.data_dir, n.log_dir):
                if d:
                    shutil.rmtree(d, ignore_errors=True)
            n.pid = n.start = None

    def _up_once(self, timeout: float) -> None:
        for n in self.nodes:
            if port_in_use(n.port) or port_in_use(n.control_port):
                raise PortTaken(f"port {n.port} or {n.control_port} for node {n.node_id} is already in use")
        self.save()
        try:
            for n in self.nodes:
                self.start_node(n.node_id)
            self.wait_ready(timeout)
        except BaseException:
            self.down(5.0)  # a cluster that did not come up leaves no node of it running
            raise

    def wait_ready(self, timeout: float = 60.0, node_ids: list[int] | None = None) -> None:
        """Until every (named) node answers on its control endpoint and every
        broker is listed, unfenced, in a Metadata response."""
        deadline = time.monotonic() + timeout
        want = [self.node(i) for i in node_ids] if node_ids else self.nodes
        for n in want:
            while True:
                if n.pid is not None and not n.running():
                    why = _tail(self.log_path(n))
                    error = PortTaken if "address already in use" in why else ClusterError
                    raise error(f"node {n.name or n.node_id} exited during start-up: {why}")
                try:
                    self.control(n.node_id, "GET", "/status", timeout=1.0)
                    break
                except ClusterError:
                    if time.monotonic() > deadline:
                        raise ClusterError(f"node {n.node_id} did not answer on its control port in {timeout:.0f}s") from None
                    time.sleep(0.1)
        want_brokers = {b.node_id for b in self.brokers}
        while True:
            seen: set[int] = set()
            for b in self.brokers:
                if b.running():
                    try:
                        seen = set(metadata_brokers(HOST, b.port))
                        break
                    except OSError:
                        continue
            if want_brokers <= seen:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"brokers registered: {sorted(seen)}, expected {sorted(want_brokers)} within {timeout:.0f}s")
            time.sleep(0.2)

    def signal(self, node_id: int, sig: int) -> None:
        """Signal the node's process group (its session: the node and anything it started)."""
        n = self.node(node_id)
        if not n.running() or n.pid is None:
            raise ClusterError(f"node {node_id} is not running")
        try:
            os.killpg(n.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(n.pid, sig)

    def kill(self, node_id: int) -> None:
        """SIGCONT (a paused node cannot die otherwise) and SIGKILL: the next
        start is unclean (KIP-966)."""
        n = self.node(node_id)
        self.signal(node_id, signal.SIGCONT)
        self.signal(node_id, signal.SIGKILL)
        wait_exit(n.pid, 10.0, n.start)

    def stop_node(self, node_id: int, timeout: float = 40.0) -> bool:
        """SIGTERM (controlled shutdown); SIGKILL if it does not exit in time.
        Returns True when the node exited by itself."""
        n = self.node(node_id)
        if not n.running():
            return True
        self.signal(node_id, signal.SIGTERM)
        if wait_exit(n.pid, timeout, n.start):
            return True
        if n.running():
            self.signal(node_id, signal.SIGKILL)
        wait_exit(n.pid, 5.0, n.start)
        return False

    def down(self, timeout: float = 40.0) -> dict[int, bool]:
        """Stop brokers first, then combined nodes, then controllers, each
        wave at once (a combined node waits for its peers' votes), so every
        broker finishes its controlled shutdown while the quorum it reports
        to is still up: a broker whose controller went first waits out its
        whole shutdown timeout."""
        result: dict[int, bool] = {}
        waves = ([n for n in self.nodes if n.is_broker and not n.is_controller],
                 [n for n in self.nodes if n.is_broker and n.is_controller],
                 [n for n in self.nodes if not n.is_broker])
        for group in waves:
            live = [n for n in group if n.running()]
            for n in live:
                self.signal(n.node_id, signal.SIGTERM)
            for n in live:
                clean = wait_exit(n.pid, timeout, n.start)
                if not clean and n.running():
                    self.signal(n.node_id, signal.SIGKILL)
                    wait_exit(n.pid, 5.0, n.start)
                result[n.node_id] = clean
        for n in self.nodes:
            n.pid = None
            n.start = None
        self.save()
        return result

    def kill_all(self) -> None:
        """SIGKILL every node still running and wait for each (a torn-down run)."""
        live = [n for n in self.nodes if n.running()]
        for n in live:
            self.signal(n.node_id, signal.SIGCONT)
            self.signal(n.node_id, signal.SIGKILL)
        for n in live:
            wait_exit(n.pid, 10.0, n.start)

    def control(self, node_id: int, method: str, path: str, body: Any = None, timeout: float = 5.0) -> Any:
        n = self.node(node_id)
        data = None if body is None else json.dumps(body).encode()
        headers = {auth.HEADER: f"Bearer {auth.token(self._secret(), auth.CONTROL)}"}
        req = urllib.request.Request(f"http://{HOST}:{n.control_port}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise ClusterError(f"node {node_id} {method} {path}: HTTP {e.code}: {e.read().decode(errors='replace')}") from None
        except (OSError, ValueError) as e:
            raise ClusterError(f"node {node_id} control endpoint: {e}") from None

    def status(self) -> list[dict[str, Any]]:
        out = []
        for n in self.nodes:
            row: dict[str, Any] = {"node_id": n.node_id, "roles": n.roles, "port": n.port, "pid": n.pid,
                                   "alive": n.running()}
            if row["alive"]:
                try:
                    st = self.control(n.node_id, "GET", "/status", timeout=2.0)
                    row.update(leader_of=st.get("leader_of", []), raft=st.get("raft", {}), clock_offset_ms=st.get("clock_offset_ms"))
                except ClusterError as e:
                    row["error"] = str(e)
            out.append(row)
        return out


def _tail(path: str, n: int = 300) -> str:
    """The last line of a node's log, for an error that names why it exited."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().strip().splitlines()
    except OSError:
        return "(no log)"
    return (lines[-1] if lines else "(empty log)")[:n]


def metadata_brokers(host: str, port: int, timeout: float = 2.0) -> list[int]:
    """Ask one broker for Metadata v1 (no topics) and return the broker ids."""
    req = MetadataRequest[1](topics=[])
    req.with_header(correlation_id=1, client_id="kraftwerk-cluster")
    data = req.encode(header=True, framed=True)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        body = recv_exact(s, size)
    resp = MetadataResponse.decode(body[4:], version=1)
    return [b.node_id for b in resp.brokers]


def recv_exact(s: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes of a Kafka response frame, or ConnectionError."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf
