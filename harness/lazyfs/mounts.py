"""Mount, crash and unmount, and the registry that keeps mounts from
outliving their owners.

Every mount is recorded in ``$KRAFTWERK_FS_DIR`` (default ``fs/`` in the
run registry, :func:`harness.rundir.state.registry_dir`: ``/run/kraftwerk/fs`` for
root) as ``<id>.json`` — mount point, backing directory,
the serving process (pid and start time), its control socket, and the
owner (the process the mount serves; a harness run passes its own pid) —
written before the server starts. ``kraftwerk cleanup`` calls
:func:`cleanup`: a mount whose owner or server is gone is unmounted, and a
``fuse.kraftwerk`` line in /proc/mounts that names this registry (its
source is ``kraftwerk-fs:<registry tag>``) but has no record is unmounted
too; mounts of other registries (a test suite's own) are theirs. Nothing here stats a mount point: a paused or dead server would hang
the call, so mount state is read from /proc/self/mountinfo only.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, UsageError
from harness.rundir.state import registry_dir as run_registry
from reference_impl.server.procs import alive, proc_start_time, proc_stat
from harness.rundir.trust import trusted_dir

#: how a mount shows in /proc/mounts: ``kraftwerk-fs:<registry tag> <dir> fuse.kraftwerk``
#: (this module imports no FUSE binding: cleanup runs where none is installed)
FSNAME = "kraftwerk-fs"
SUBTYPE = "kraftwerk"
FSTYPE = f"fuse.{SUBTYPE}"


def registry_dir() -> Path:
    if os.environ.get("KRAFTWERK_FS_DIR"):
        return Path(os.environ["KRAFTWERK_FS_DIR"])
    return run_registry() / "fs"


def fsname() -> str:
    """The source a mount shows in /proc/mounts: names its registry."""
    tag = hashlib.sha1(str(registry_dir().resolve()).encode()).hexdigest()[:10]
    return f"{FSNAME}:{tag}"


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mountinfo() -> list[dict[str, str]]:
    """Mounts of this mount namespace: point, fstype, source, device."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        out.append({"point": _unescape(f[4]), "dev": f[2], "fstype": r[0], "source": _unescape(r[1]) if len(r) > 1 else ""})
    return out


def is_mounted(point: str | Path) -> bool:
    p = os.path.abspath(point)
    return any(m["point"] == p for m in mountinfo())


def _record_path(point: str) -> Path:
    return registry_dir() / (hashlib.sha1(point.encode()).hexdigest()[:16] + ".json")


def _write(rec: dict[str, Any]) -> None:
    path = _record_path(rec["mountpoint"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    os.replace(tmp, path)


def records() -> list[dict[str, Any]]:
    d = registry_dir()
    out = []
    for f in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            out.append(json.loads(f.read_text()))
        except (OSError, json.JSONDecodeError):
            f.unlink(missing_ok=True)
    return out


def find(point: str | Path) -> dict[str, Any]:
    p = os.path.abspath(point)
    path = _record_path(p)
    if not path.exists():
        raise UsageError(f"{p}: not a kraftwerk fs mount (none recorded)")
    return json.loads(path.read_text())


#: the command names of the process that holds one ssh connection: OpenSSH
#: from 9.8 runs each connection in ``sshd-session`` (its listener is still
#: ``sshd``); before, in a forked ``sshd``
SSH_SESSION = ("sshd-session", "sshd")


def ancestor_named(comm: str | tuple[str, ...], pid: int | None = None) -> int | None:
    """The nearest ancestor of ``pid`` (default: this process) whose command
    name is ``comm`` (or one of them): for :data:`SSH_SESSION`, the process
    of the ssh connection that runs us (through sudo, a shell, anything
    between), never the listener above it, which outlives every connection."""
    names = (comm,) if isinstance(comm, str) else comm
    pid = os.getppid() if pid is None else pid
    while pid > 1:
        st = proc_stat(pid)
        if st is None:
            return None
        if st.name in names:
            return pid
        pid = st.ppid
    return None


# ---------------------------------------------------------------- checks
def check_can_mount(point: str, backing: str) -> tuple[str, str]:
    """Bad input as one line (UsageError, exit 2) before anything starts;
    the real paths of the mount point and the backing directory, both
    directories safe for root to write in and mount over
    (:func:`harness.rundir.trust.trusted_dir`: the server writes the backing
    tree as root, and a mount point another user could swap for a symlink
    would put the mount wherever they chose)."""
    if os.geteuid() != 0:
        raise UsageError("kraftwerk fs mount needs root (FUSE with allow_other)")
    if not os.path.exists("/dev/fuse"):
        raise UsageError("/dev/fuse is missing: this machine cannot mount FUSE filesystems")
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        raise UsageError(f"/dev/fuse cannot be opened: {e.strerror}") from None
    if not os.path.isdir(backing):
        raise UsageError(f"backing directory {backing} does not exist (or is not a directory)")
    if not os.path.isdir(point):
        raise UsageError(f"mount point {point} does not exist (or is not a directory)")
    backing = str(trusted_dir(backing, "kraftwerk fs mount --backing", create=False))
    point = str(trusted_dir(point, "kraftwerk fs mount MOUNTPOINT", create=False))
    if is_mounted(point):
        raise UsageError(f"mount point {point} is busy: something is already mounted there")
    if os.listdir(point):
        raise UsageError(f"mount point {point} is not empty")
    for a, b in ((point, backing), (backing, point)):
        if a == b or a.startswith(b.rstrip("/") + "/"):
            raise UsageError(f"mount point and backing directory must not contain each other: {point}, {backing}")
    return point, backing


# ---------------------------------------------------------------- mount
def mount(point: str | Path, backing: str | Path, seed: int = 0, owner_pid: int | None = None,
          timeout: float = 15.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start a server for ``point`` over ``backing`` and return once mounted."""
    point, backing = check_can_mount(os.path.abspath(point), os.path.abspath(backing))
    if owner_pid is not None and not alive(owner_pid):
        raise UsageError(f"owner pid {owner_pid}: no such process")
    registry_dir().mkdir(parents=True, exist_ok=True)
    rid = _record_path(point).stem
    rec: dict[str, Any] = {
        "mountpoint": point, "backing": backing, "seed": seed,
        "socket": str(registry_dir() / f"{rid}.sock"), "log": str(registry_dir() / f"{rid}.log"),
        "owner_pid": owner_pid, "owner_start": proc_start_time(owner_pid) if owner_pid else None,
        "pid": None, "start": None, "created": time.time(),
    }
    _write(rec)  # before the server exists: cleanup can find a half-made mount
    with open(rec["log"], "ab") as log:
        p = subprocess.Popen(
            [sys.executable, "-m", "harness.lazyfs.server", "--mount", point, "--backing", backing,
             "--socket", rec["socket"], "--seed", str(seed), "--fsname", fsname(),
             *(["--owner-pid", str(owner_pid), "--owner-start", str(rec["owner_start"])] if owner_pid else [])],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env=env, cwd=str(Path(__file__).resolve().parents[2]),
        )
    rec["pid"], rec["start"] = p.pid, proc_start_time(p.pid)
    _write(rec)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.poll() is not None:
            _record_path(point).unlink(missing_ok=True)
            why = _last_line(rec["log"])
            Path(rec["log"]).unlink(missing_ok=True)
            raise HarnessError(f"kraftwerk fs server exited ({p.returncode}): {why}")
        if is_mounted(point) and os.path.exists(rec["socket"]):
            try:
                control(point, "status", timeout=2)
                return rec
            except HarnessError:
                pass
        time.sleep(0.05)
    umount(point)
    raise HarnessError(f"kraftwerk fs mount {point}: not ready after {timeout:.0f}s")


def _last_line(path: str) -> str:
    try:
        lines = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1][:300] if lines else "(empty log)"


def control(point: str | Path, command: str, timeout: float = 30.0) -> dict[str, Any]:
    """Send one control command to the mount's server; its JSON answer."""
    rec = find(point)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(rec["socket"])
        s.sendall(command.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except OSError as e:
        raise HarnessError(f"kraftwerk fs {rec['mountpoint']}: server not answering ({e})") from None
    finally:
        s.close()
    try:
        reply = json.loads(buf)
    except json.JSONDecodeError:
        raise HarnessError(f"kraftwerk fs {rec['mountpoint']}: bad answer {buf[:100]!r}") from None
    if "error" in reply:
        raise UsageError(f"kraftwerk fs {command}: {reply['error']}")
    return reply


def crash(point: str | Path, torn: bool = False, seed: int | None = None) -> dict[str, Any]:
    """Drop everything not fsynced (``torn``: keep a random prefix per file,
    drawn from ``seed`` if given, else from the mount's seeded stream)."""
    if seed is not None and not torn:
        raise UsageError("a crash seed draws torn prefixes: it needs --torn")
    return control(point, "crash" if not torn else "crash torn" if seed is None else f"crash torn {int(seed)}")


# ---------------------------------------------------------------- unmount
def _abort_connection(point: str) -> None:
    """Fail a dead or paused server's pending requests (fusectl), so nothing
    blocked on the mount hangs after the lazy unmount."""
    for m in mountinfo():
        if m["point"] == point and m["fstype"].startswith("fuse"):
            minor = m["dev"].split(":")[-1]
            abort = Path(f"/sys/fs/fuse/connections/{minor}/abort")
            try:
                abort.write_text("1")
            except OSError:
                pass


def _force_unmount(point: str) -> None:
    _abort_connection(point)
    for argv in (["fusermount3", "-u", "-z", point], ["umount", "-l", point]):
        if not is_mounted(point):
            return
        try:
            subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def umount(point: str | Path, clean: bool = True, timeout: float = 10.0) -> bool:
    """Unmount ``point``: cleanly (sync, then the server exits) when its
    server answers, else lazily and forcibly. Returns whether anything was
    mounted or recorded. Never hangs on a dead or paused server. Raises
    HarnessError (one line) if it is still mounted after all that (this
    user may not unmount it); otherwise the record goes whatever happens."""
    point = os.path.abspath(point)
    path = _record_path(point)
    rec = _read_record(path)
    was = is_mounted(point) or rec is not None
    try:
        _stop(point, rec, clean, timeout)
    finally:
        if not is_mounted(point):
            for f in (rec or {}).get("socket"), (rec or {}).get("log"):
                if f:
                    Path(f).unlink(missing_ok=True)
            path.unlink(missing_ok=True)
    if is_mounted(point):
        raise HarnessError(f"{point}: still mounted: it could not be unmounted"
                           + ("" if os.geteuid() == 0 else " (it is root's: unmount it as root)"))
    return was


def _stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP, a tracer): it answers nothing until
    continued, so asking it to unmount would only wait out the timeout."""
    st = proc_stat(pid)
    return st is not None and st.state in ("T", "t")


def _stop(point: str, rec: dict[str, Any] | None, clean: bool, timeout: float) -> None:
    pid, start = (rec or {}).get("pid"), (rec or {}).get("start")
    if clean and pid and alive(pid, start) and not _stopped(pid) and is_mounted(point):
        try:
            control(point, "umount", timeout=timeout)
        except (HarnessError, UsageError):
            pass  # no answer: it will not exit on its own either
        else:
            deadline = time.monotonic() + timeout
            while alive(pid, start) and time.monotonic() < deadline:
                time.sleep(0.02)
    if is_mounted(point):
        _force_unmount(point)
    if pid and pid != os.getpid() and alive(pid, start):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
        deadline = time.monotonic() + 5
        while alive(pid, start) and time.monotonic() < deadline:
            time.sleep(0.01)


def cleanup(force: bool = False) -> list[str]:
    """Unmount recorded mounts whose owner or server is gone (``force``: all),
    and every kraftwerk fs mount nothing records. Idempotent."""
    done = []
    recorded = set()
    for rec in records():
        point = rec["mountpoint"]
        recorded.add(point)
        owner_gone = rec.get("owner_pid") is not None and not alive(rec["owner_pid"], rec.get("owner_start"))
        server_gone = rec.get("pid") is None or not alive(rec["pid"], rec.get("start"))
        if force or owner_gone or server_gone:
            if rec.get("pid") is None and time.time() - rec.get("created", 0) < 30 and not force:
                continue  # a mount being made right now
            try:
                umount(point, clean=not server_gone)
            except HarnessError:
                continue  # not ours to unmount: the next mount is
            done.append(point)
    mine = fsname()
    for m in mountinfo():
        if m["fstype"] == FSTYPE and m["source"] == mine and m["point"] not in recorded:
            _force_unmount(m["point"])
            done.append(m["point"])
    return done
