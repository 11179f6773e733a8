"""Build the accelerator: mypyc compiles :data:`~reference_impl.accel.MODULES`
into ``.accel/`` and the manifest is written last, so an interrupted build is
never loaded."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from . import ACCEL_DIR, GROUP, MANIFEST, MODULES, ROOT, _sha, _tag, module_name

#: mypy options for the compile: third-party packages without stubs are
#: treated as Any, and imported modules outside the list are not compiled
MYPY_FLAGS = ("--ignore-missing-imports", "--follow-imports=silent")


def build(accel_dir: Path = ACCEL_DIR, jobs: int | None = None) -> Path:
    """Compile :data:`MODULES` with mypyc into ``accel_dir``; returns it."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    accel_dir.mkdir(parents=True, exist_ok=True)
    (accel_dir / MANIFEST).unlink(missing_ok=True)
    lib = accel_dir / "lib"
    shutil.rmtree(lib, ignore_errors=True)
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
            cmd.parallel = jobs or os.cpu_count() or 1
            cmd.ensure_finalized()
            cmd.run()
    finally:
        os.chdir(cwd)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    modules = {}
    for src in MODULES:
        mod = module_name(src)
        ext = Path("lib") / (src[: -len(".py")] + suffix)
        if not (accel_dir / ext).is_file():
            raise RuntimeError(f"mypyc built no extension for {src}")
        modules[mod] = {"source": src, "sha256": _sha(ROOT / src), "extension": str(ext)}
    group_ext = next((p for p in lib.glob(f"{GROUP}__mypyc*{suffix}")), None)
    if group_ext is None:
        raise RuntimeError("mypyc built no shared library")
    manifest = {"tag": _tag(), "group": group_ext.name[: -len(suffix)], "group_extension": str(group_ext.relative_to(accel_dir)),
                "modules": modules}
    tmp_mf = accel_dir / (MANIFEST + ".tmp")
    tmp_mf.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp_mf.replace(accel_dir / MANIFEST)
    return accel_dir
