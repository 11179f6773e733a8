"""Build the accelerator: mypyc compiles :data:`~reference_impl.accel.MODULES`
into a new ``.accel/build-<id>/`` and the manifest pointing at it is written
last, so an interrupted build is never loaded.

Safe against the usual accidents:

* a source edited while the compiler runs: every source is hashed before
  and after the compile, and a change refuses the manifest (the compiled
  code would not be the code the hashes vouch for);
* two builds at once (bootstrap and a test, two shells): an exclusive lock
  on ``.accel/lock`` makes the second wait, then reuse a fresh result;
* a process still running the previous build: its directory is kept (only
  builds older than that are deleted), so its lazy imports keep working.
"""

from __future__ import annotations

import fcntl
import importlib.machinery
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from . import ACCEL_DIR, GROUP, MANIFEST, MODULES, ROOT, _sha, _tag, check, module_name

#: mypy options for the compile: third-party packages without stubs are
#: treated as Any, and imported modules outside the list are not compiled
MYPY_FLAGS = ("--ignore-missing-imports", "--follow-imports=silent")


class BuildError(RuntimeError):
    pass


def build(accel_dir: Path = ACCEL_DIR, jobs: int | None = None, force: bool = False) -> Path:
    """Compile :data:`MODULES` with mypyc under ``accel_dir`` (unless a fresh
    build is already there and not ``force``); returns the build directory."""
    accel_dir.mkdir(parents=True, exist_ok=True)
    with open(accel_dir / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not force and check(accel_dir, env=False)[1] == "compiled":
            return accel_dir  # another build finished while this one waited
        return _build_locked(accel_dir, jobs)


def _build_locked(accel_dir: Path, jobs: int | None) -> Path:
    from mypyc.build import mypycify  # late: mypyc (1 s), which only a build needs, not status
    from setuptools import Distribution  # late: setuptools, likewise

    before = {src: _sha(ROOT / src) for src in MODULES}
    previous = _current_build(accel_dir)
    name = f"build-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    lib = accel_dir / name
    cwd = os.getcwd()
    os.chdir(ROOT)  # mypyc names modules after the paths it is given
    try:
        with tempfile.TemporaryDirectory(prefix="kraftwerk-accel-") as tmp:
            exts = mypycify([*MYPY_FLAGS, *MODULES], opt_level="3", multi_file=True, group_name=GROUP,
                            target_dir=str(Path(tmp) / "c"))
            dist = Distribution({"name": GROUP, "ext_modules": exts})
            cmd: Any = dist.get_command_obj("build_ext")
            cmd.build_lib = str(lib)
            cmd.build_temp = str(Path(tmp) / "o")
            cmd.parallel = jobs or len(os.sched_getaffinity(0)) or 1
            cmd.ensure_finalized()
            cmd.run()
    except BaseException:
        shutil.rmtree(lib, ignore_errors=True)
        raise
    finally:
        os.chdir(cwd)
    changed = [src for src in MODULES if _sha(ROOT / src) != before[src]]
    if changed:
        shutil.rmtree(lib, ignore_errors=True)
        raise BuildError(f"{changed[0]} changed while it was being compiled; build again")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    modules = {}
    for src in MODULES:
        ext = Path(name) / (src[: -len(".py")] + suffix)
        if not (accel_dir / ext).is_file():
            raise BuildError(f"mypyc built no extension for {src}")
        modules[module_name(src)] = {"source": src, "sha256": before[src], "extension": str(ext)}
    group_ext = next(iter(lib.glob(f"{GROUP}__mypyc*{suffix}")), None)
    if group_ext is None:
        raise BuildError("mypyc built no shared library")
    manifest = {"tag": _tag(), "build": name, "group": group_ext.name[: -len(suffix)],
                "group_extension": str(group_ext.relative_to(accel_dir)), "modules": modules}
    tmp_mf = accel_dir / (MANIFEST + ".tmp")
    tmp_mf.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp_mf.replace(accel_dir / MANIFEST)
    for old in accel_dir.glob("build-*"):
        if old.name not in (name, previous):
            shutil.rmtree(old, ignore_errors=True)
    return lib


def _current_build(accel_dir: Path) -> str | None:
    try:
        return json.loads((accel_dir / MANIFEST).read_text()).get("build")
    except (OSError, ValueError, AttributeError):
        return None
