"""``kraftwerk cluster up|down|status --db kafka``: a real Kafka cluster for
hand use, set up exactly as a run's (``harness.dbs.kafka.db``) and left running.

``<dir>/kafka-cluster.json`` records what ``up`` started (each process's
pid and start time, so a recycled pid is never signalled, node names, ports,
the bootstrap servers); ``down`` sends SIGTERM (Kafka's controlled shutdown)
and SIGKILL after a grace period. Node files are under ``<dir>/nodes/<name>/``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Callable

from harness.config import TestConfig
from harness.dbs.kafka.db import KafkaDB, harness_jvm
from harness.errors import UsageError
from reference_impl.server.procs import proc_start_time, same_process

STATE = "kafka-cluster.json"


def state_path(dir: str | Path) -> Path:
    return Path(dir) / STATE


def load(dir: str | Path) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(dir).read_text())
    except (OSError, ValueError):
        return None


def running(dir: str | Path) -> bool:
    st = load(dir)
    return bool(st) and any(same_process(p["pid"], p.get("start")) for p in st.get("processes", []))


def up(cfg: TestConfig, dir: str | Path, timeout: float,
       jvm_options: Callable[[tuple[str, ...]], list[str]] = harness_jvm) -> dict[str, Any]:
    """Start the cluster, wait until it is ready, leave it running; its
    servers' JVM options are ``jvm_options(roles)`` (a run's by default)."""
    d = Path(dir)
    if running(d):
        raise UsageError(f"a cluster is already running in {d}; run `kraftwerk cluster down --dir {d}` first")
    shutil.rmtree(d / "nodes", ignore_errors=True)
    d.mkdir(parents=True, exist_ok=True)
    st = HandState(state_path(d), {"db": "kafka", "processes": []})
    st._save()
    db = KafkaDB(cfg, d, st, jvm_options=jvm_options)
    try:
        db.setup(ready_timeout=timeout, topics=False)
    except BaseException:
        db.teardown()
        raise
    st.data.update(bootstrap=db.client_bootstrap(), version=db.version(),
                   nodes=[{"name": n.name, "node_id": n.node_id, "roles": list(n.roles), "port": n.port,
                           "controller_port": n.controller_port} for n in db.plans])
    st._save()
    return st.data


class HandState:
    """What the db needs of a run's state, for processes meant to outlive
    the command that starts them: a run's state would have its reaper end
    them when ``up`` exits. Pids go to ``kafka-cluster.json``."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def child_env(self) -> dict[str, str]:
        return dict(os.environ)

    def add_process(self, pid: int, role: str, name: str) -> None:
        self.data["processes"].append({"pid": pid, "start": proc_start_time(pid), "role": role, "name": name})
        self._save()


def down(dir: str | Path, timeout: float) -> dict[str, bool]:
    """SIGTERM the brokers, then the controllers (a broker's controlled
    shutdown needs the quorum), SIGKILL what is left after ``timeout``:
    name -> stopped cleanly."""
    st = load(dir)
    if st is None:
        raise UsageError(f"no Kafka cluster state in {dir}")
    brokers = {n["name"] for n in st.get("nodes", []) if "broker" in n["roles"]}
    procs = [p for p in st.get("processes", []) if same_process(p["pid"], p.get("start"))]
    deadline = time.monotonic() + timeout
    out: dict[str, bool] = {}
    for wave in ([p for p in procs if p["name"] in brokers], [p for p in procs if p["name"] not in brokers]):
        for p in wave:
            _signal(p["pid"], signal.SIGCONT)
            _signal(p["pid"], signal.SIGTERM)
        for p in wave:
            while same_process(p["pid"], p.get("start")) and time.monotonic() < deadline:
                time.sleep(0.2)
            out[p["name"]] = not same_process(p["pid"], p.get("start"))
            if not out[p["name"]]:
                _signal(p["pid"], signal.SIGKILL)
    state_path(dir).unlink(missing_ok=True)
    return out


def status(dir: str | Path) -> dict[str, Any]:
    st = load(dir)
    if st is None:
        raise UsageError(f"no Kafka cluster state in {dir}")
    pids = {p["name"]: p for p in st.get("processes", [])}
    rows = []
    for n in st.get("nodes", []):
        p = pids.get(n["name"]) or {}
        rows.append({**n, "pid": p.get("pid"), "alive": bool(p) and same_process(p["pid"], p.get("start"))})
    return {"bootstrap": st.get("bootstrap"), "version": st.get("version"), "nodes": rows}


def _signal(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
