"""Run state files: what a run started, so ``kraftwerk cleanup`` can stop it even
after the harness itself was SIGKILLed (ARCHITECTURE.md principle 7).

The file ``<out>/.state/<run-id>.json`` is written *before* anything starts and
updated right after each process is spawned. As a second net for the instant
between spawn and update, every child gets ``KRAFTWERK_RUN_ID=<run-id>`` in its
environment and its own session; cleanup also finds processes by that variable.
A pid is only signalled if its start time still matches what was recorded, so a
recycled pid is never hit.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUN_ENV = "KRAFTWERK_RUN_ID"


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot), None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw.rsplit(")", 1)[-1].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return raw.rsplit(")", 1)[-1].split()[0] == "Z"


def alive(pid: int, start_time: int | None = None) -> bool:
    st = proc_start_time(pid)
    if st is None or _is_zombie(pid):
        return False
    return start_time is None or st == start_time


def state_dir(out: str | Path) -> Path:
    return Path(out) / ".state"


@dataclass
class RunState:
    path: Path
    run_id: str
    data: dict[str, Any]

    _lock = threading.Lock()

    @classmethod
    def create(cls, out: str | Path, run_id: str, run_dir: Path) -> "RunState":
        d = state_dir(out)
        d.mkdir(parents=True, exist_ok=True)
        st = cls(d / f"{run_id}.json", run_id, {
            "run_id": run_id,
            "run_dir": str(run_dir),
            "harness_pid": os.getpid(),
            "harness_start": proc_start_time(os.getpid()),
            "created": time.time(),
            "processes": [],
        })
        st._save()
        return st

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    def add_process(self, pid: int, role: str, name: str) -> None:
        with self._lock:
            self.data["processes"].append(
                {"pid": pid, "start": proc_start_time(pid), "role": role, "name": name}
            )
            self._save()

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def child_env(self) -> dict[str, str]:
        return {**os.environ, RUN_ENV: self.run_id}


def _pids_with_run_id(run_id: str) -> list[int]:
    want = f"{RUN_ENV}={run_id}".encode()
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if want in env.split(b"\0"):
            out.append(int(p.name))
    return out


def kill_tree(pid: int, start: int | None) -> bool:
    """SIGCONT (a paused process cannot die cleanly otherwise) then SIGKILL the
    process and its session's group. Returns True if something was signalled."""
    if not alive(pid, start):
        return False
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return False
    return True


def cleanup(out: str | Path, include_live_harness: bool = False) -> list[dict[str, Any]]:
    """Stop every process recorded by runs under ``out`` whose harness is gone
    (or all, with ``include_live_harness``). Idempotent: a second call finds
    nothing. Returns what was stopped."""
    stopped: list[dict[str, Any]] = []
    d = state_dir(out)
    if not d.is_dir():
        return stopped
    for f in sorted(d.glob("*.json")):
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            f.unlink(missing_ok=True)
            continue
        if not include_live_harness and alive(data.get("harness_pid", -1), data.get("harness_start")):
            if data.get("harness_pid") != os.getpid():
                continue  # a run in progress: not ours to stop
        procs = list(data.get("processes", []))
        signalled: set[int] = set()
        for p in procs:
            if kill_tree(p["pid"], p.get("start")):
                stopped.append(p)
                signalled.add(p["pid"])
        for pid in _pids_with_run_id(data.get("run_id", "\0")):
            if pid != os.getpid() and pid not in signalled and kill_tree(pid, None):
                stopped.append({"pid": pid, "role": "unrecorded", "name": "?"})
        deadline = time.monotonic() + 5
        for p in procs:
            while alive(p["pid"], p.get("start")) and time.monotonic() < deadline:
                time.sleep(0.02)
        f.unlink(missing_ok=True)
    return stopped
