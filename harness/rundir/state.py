"""Run state: what a run started, in one machine-wide registry, so
``kraftwerk cleanup`` can undo it even after the harness itself was SIGKILLed
(ARCHITECTURE.md principle 7), whatever ``--out`` the run used.

The registry is a directory, owner-only (0700): ``/run/kraftwerk`` for root,
else ``$XDG_RUNTIME_DIR/kraftwerk``, else ``<tempdir>/kraftwerk-<uid>``
(``KRAFTWERK_RUNTIME_DIR`` overrides it, for tests). Each live run has one file
there, ``<run-id>.<nonce>.json`` (0600), written *before* anything starts and
updated right after each process or resource is made. It names the run's
``out`` directory, so ``kraftwerk cleanup --out DIR`` narrows to runs of DIR.

Resources other than processes (network namespaces, firewall rules,
containers, mounts made by a backend) are registered with
:meth:`RunState.add_resource` as data plus the argv that undoes them; cleanup
runs that argv, so it needs no backend code::

    state.add_resource("netns", "kw-run1-n1", undo=[["ip", "netns", "delete", "kw-run1-n1"]])
    state.add_resource("mount", "/mnt/kw-x", undo=[["fusermount3", "-u", "-z", "/mnt/kw-x"]])
    state.remove_resource("netns", "kw-run1-n1")   # undone by the backend itself

As a second net for the instant between spawn and update, every child gets
``KRAFTWERK_RUN_ID=<run-id>`` in its environment and its own session; cleanup
also finds processes by that variable. A pid is only signalled if its start
time still matches what was recorded, so a recycled pid is never hit
(``reference_impl.server.procs``, the one liveness check of the project).

Children also end on their own when the harness dies (:mod:`harness.rundir.lease`):
each gets the read end of a pipe whose write end only the harness holds. A
child that cannot watch it itself (a JVM, a shell) is covered by the run's
reaper, a small process started with the first child, holding the same lease,
that SIGKILLs every process carrying the run's ``KRAFTWERK_RUN_ID`` when the
lease ends and, if the harness is dead, undoes the run's resources as
cleanup would (:func:`reap`): a SIGKILLed harness leaves no namespace,
container or network behind either. That id is unique per run (run id plus the registry nonce), so
two runs that share a name, seed and second never reap each other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.rundir.lease import LEASE_ENV, PARENT_ENV, PDEATHSIG_ENV, RUN_ENV, pids_with_run_id
from reference_impl.server.procs import alive, proc_start_time, same_process

__all__ = ["RUN_ENV", "RunState", "cleanup", "kill_tree", "registry_dir"]

REGISTRY_ENV = "KRAFTWERK_RUNTIME_DIR"
_REAPER_LOCK = threading.Lock()


def _private_dir(path: Path) -> Path | None:
    """``path`` made (0700) or found owned by us and closed to others; None if
    it cannot be trusted (another user's, or writable by others)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError:
        return None
    if not path.is_dir() or path.is_symlink() or st.st_uid != os.geteuid():
        return None
    if st.st_mode & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError:
            return None
    return path


def registry_dir() -> Path:
    """The machine-wide directory of live runs for this user (see module doc)."""
    if os.environ.get(REGISTRY_ENV):
        cands = [Path(os.environ[REGISTRY_ENV])]
    else:
        cands = []
        if os.geteuid() == 0:
            cands.append(Path("/run/kraftwerk"))
        if os.environ.get("XDG_RUNTIME_DIR"):
            cands.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "kraftwerk")
        cands.append(Path(tempfile.gettempdir()) / f"kraftwerk-{os.geteuid()}")
    for c in cands:
        d = _private_dir(c)
        if d is not None:
            return d
    raise OSError(f"no private run registry directory among {', '.join(map(str, cands))}")


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a file only its owner can read."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@dataclass
class RunState:
    path: Path
    run_id: str
    data: dict[str, Any]
    _lease: tuple[int, int] | None = field(default=None, repr=False)
    _reaper: subprocess.Popen | None = field(default=None, repr=False)

    _lock = threading.Lock()

    @classmethod
    def create(cls, out: str | Path, run_id: str, run_dir: Path) -> "RunState":
        d = registry_dir()
        nonce = uuid.uuid4().hex[:8]
        path = d / f"{run_id}.{nonce}.json"
        st = cls(path, run_id, {
            "run_id": run_id,
            "env_id": f"{run_id}.{nonce}",
            "out": str(Path(out).resolve()),
            "run_dir": str(Path(run_dir).resolve()),
            "harness_pid": os.getpid(),
            "harness_start": proc_start_time(os.getpid()),
            "created": time.time(),
            "processes": [],
            "resources": [],
        })
        st._save()
        return st

    def _save(self) -> None:
        write_private(self.path, json.dumps(self.data, indent=1))

    def add_process(self, pid: int, role: str, name: str) -> None:
        with self._lock:
            self.data["processes"].append(
                {"pid": pid, "start": proc_start_time(pid), "role": role, "name": name}
            )
            self._save()

    def add_resource(self, kind: str, name: str, undo: list[list[str]], **info: Any) -> None:
        """Record something the run made (``kind``: netns, rule, container,
        mount, ...) with the argv list that removes it; cleanup runs each argv
        in order, ignoring failures (the thing may be gone already)."""
        if not all(isinstance(a, list) and a and all(isinstance(x, str) for x in a) for a in undo):
            raise ValueError("undo must be a list of non-empty argv lists of strings")
        with self._lock:
            self.data["resources"].append({"kind": kind, "name": name, "undo": undo, **info})
            self._save()
        self._start_reaper()  # a run whose nodes are not this machine's children (docker exec) needs it too

    def remove_resource(self, kind: str, name: str) -> None:
        """Forget a resource the backend removed itself."""
        with self._lock:
            self.data["resources"] = [r for r in self.data["resources"] if (r["kind"], r["name"]) != (kind, name)]
            self._save()

    def remove(self) -> None:
        """The run is over: say so in the record (the reaper must not take a
        lease ended here for a harness that died), end the lease (the reaper
        then stops anything of the run still running) and forget the run."""
        if self._lease is not None:
            with self._lock:
                self.data["ended"] = True
                self._save()
            os.close(self._lease[1])
            os.close(self._lease[0])
            self._lease = None
        if self._reaper is not None:
            try:
                self._reaper.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._reaper.kill()
            self._reaper = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    @property
    def env_id(self) -> str:
        """The value of ``KRAFTWERK_RUN_ID`` in this run's children."""
        return str(self.data.get("env_id", self.run_id))

    def child_env(self) -> dict[str, str]:
        """The environment of any process this run starts; its reaper (started
        here or by the first resource registered, once) ends it when the
        harness dies, even if it cannot watch the lease itself."""
        self._start_reaper()
        return {**os.environ, RUN_ENV: self.env_id}

    def _start_reaper(self) -> None:
        with _REAPER_LOCK:  # resources are registered from more than one thread
            if self._reaper is None:
                self._spawn_reaper()

    def _spawn_reaper(self) -> None:
        fd = self.lease_read_fd()
        env = {k: v for k, v in os.environ.items() if k != RUN_ENV}
        env.update({LEASE_ENV: str(fd), PARENT_ENV: str(os.getpid())})
        if threading.current_thread() is threading.main_thread():
            env[PDEATHSIG_ENV] = "1"
        self._reaper = subprocess.Popen(
            [sys.executable, "-m", "harness.rundir.reaper", "--reap", self.env_id], env=env, pass_fds=(fd,),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
        self.add_process(self._reaper.pid, "reaper", "reaper")

    def lease_read_fd(self) -> int:
        """The read end of this run's lease pipe (made on first use). The
        write end stays in this process only (non-inheritable): when the
        harness dies, every child reading the lease sees end-of-file."""
        if self._lease is None:
            self._lease = os.pipe()
        return self._lease[0]

    def spawn_options(self) -> dict[str, Any]:
        """``subprocess.Popen`` keywords for a child that must not outlive the
        harness: its run id, the lease, and (spawned from the main thread
        only, since the kernel ties it to the spawning thread) a parent-death
        signal."""
        fd = self.lease_read_fd()
        env = {**self.child_env(), LEASE_ENV: str(fd), PARENT_ENV: str(os.getpid())}
        if threading.current_thread() is threading.main_thread():
            env[PDEATHSIG_ENV] = "1"
        return {"env": env, "pass_fds": (fd,), "start_new_session": True}


def kill_tree(pid: int, start: int | None) -> bool:
    """SIGCONT (a paused process cannot die cleanly otherwise) then SIGKILL the
    process and its session's group. Returns True if something was signalled.
    Nothing is signalled unless ``pid`` is still the process that started at
    ``start``."""
    if not same_process(pid, start):
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


def _undo(res: dict[str, Any]) -> bool:
    ok = True
    for argv in res.get("undo") or []:
        if not (isinstance(argv, list) and argv and all(isinstance(x, str) for x in argv)):
            continue
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            ok = ok and r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
    return ok


def _load_entries(out: str | Path | None) -> list[tuple[Path, dict[str, Any]]]:
    d = registry_dir()
    want = str(Path(out).resolve()) if out is not None else None
    entries = []
    for f in sorted(d.glob("*.json")):
        try:
            data = json.loads(f.read_text())
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except (OSError, ValueError):
            f.unlink(missing_ok=True)
            continue
        if want is None or data.get("out") == want:
            entries.append((f, data))
    return entries


def cleanup(out: str | Path | None = None, include_live_harness: bool = False) -> list[dict[str, Any]]:
    """Stop every process and undo every resource recorded by runs whose
    harness is gone (or all, with ``include_live_harness``); ``out`` narrows to
    runs of that results directory. Idempotent: a second call finds nothing.
    Returns what was stopped or undone."""
    stopped: list[dict[str, Any]] = []
    for f, data in _load_entries(out):
        hp = data.get("harness_pid", -1)
        if not include_live_harness and hp != os.getpid() and alive(hp, data.get("harness_start")):
            continue  # a run in progress: not ours to stop
        stopped += _stop_run(data)
        f.unlink(missing_ok=True)
    return stopped


def reap(env_id: str) -> list[dict[str, Any]]:
    """The run reaper's last act (:mod:`harness.rundir.reaper`), when its
    run's lease ends: if the harness is dead (a SIGKILL, the OOM killer), do
    what ``kraftwerk cleanup`` would for this run alone (stop its processes,
    undo its namespaces, containers, networks, mounts and ssh hosts, forget
    it), so nothing of it lingers until someone runs cleanup. A harness
    that ended the run itself (``ended`` in its record, written before it
    closed the lease) undid what it made: nothing.

    A lease that ends without that mark ended because the harness is dying:
    the kernel closes its files before the process turns into a zombie, so
    for a moment it still looks alive. That moment is waited out (a few
    seconds at most); only a harness still running after it, whose reaper
    was signalled by someone else, is left alone."""
    for f, data in _load_entries(None):
        if str(data.get("env_id", data.get("run_id"))) != env_id:
            continue
        deadline = time.monotonic() + _DYING_HARNESS_S
        while not data.get("ended") and alive(data.get("harness_pid", -1), data.get("harness_start")):
            if time.monotonic() > deadline:
                return []
            time.sleep(0.02)
            data = _reread(f, data)
        if data.get("ended"):
            return []
        stopped = _stop_run(data)
        f.unlink(missing_ok=True)
        return stopped
    return []


_DYING_HARNESS_S = 5.0


def _reread(f: Path, data: dict[str, Any]) -> dict[str, Any]:
    try:
        new = json.loads(f.read_text())
    except (OSError, ValueError):
        return data
    return new if isinstance(new, dict) else data


def _stop_run(data: dict[str, Any]) -> list[dict[str, Any]]:
    stopped: list[dict[str, Any]] = []
    procs = [p for p in data.get("processes", []) if isinstance(p, dict) and isinstance(p.get("pid"), int)
             and p["pid"] != os.getpid()]  # the reaper undoing its own run is one of them
    signalled: set[int] = set()
    for p in procs:
        if kill_tree(p["pid"], p.get("start")):
            stopped.append(p)
            signalled.add(p["pid"])
    for pid in pids_with_run_id(str(data.get("env_id", data.get("run_id", "\0")))):
        if pid != os.getpid() and pid not in signalled and kill_tree(pid, proc_start_time(pid)):
            stopped.append({"pid": pid, "role": "unrecorded", "name": "?"})
    deadline = time.monotonic() + 5
    for p in procs:
        while alive(p["pid"], p.get("start")) and time.monotonic() < deadline:
            time.sleep(0.02)
    for res in reversed(data.get("resources", [])):
        if isinstance(res, dict):
            _undo(res)
            stopped.append({"role": res.get("kind"), "name": res.get("name"), "pid": None})
    return stopped
