"""The project as one tarball a bare host can run a node from.

A host is assumed to have only Debian and Python 3.11 (``python3.11``), as
the Vagrant VMs and the ``kraftwerk hosts up`` hosts do. The bundle holds the
project's packages (source) and ``site/``: the installed packages a node
process imports (click, kafka-python's codecs, msgpack, orjson, crc32c,
pydantic, ...: listed by importing them in a fresh interpreter, so the
bundle follows the code), copied from this machine's environment, so nothing is
fetched on the host and compiled extensions match (same Debian, same
Python). A node runs with ``PYTHONPATH=<app>:<app>/site``; no pip, no venv,
no network on the host. The accelerator is not shipped: nodes there run the
Python source.

The bundle's name is the SHA-256 of its contents' names and bytes, so a
host that already has ``<dir>/app-<hash>/.complete`` is not sent it again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reference_impl", "generator", "harness", "nemesis", "workloads", "checkers")
#: run in a fresh interpreter: what a node process imports from site-packages
#: (found each time, so the bundle follows the code's imports)
PROBE = """
import sys, sysconfig
sys.argv = ["kraftwerk", "node"]
import harness.cli, harness.cli.node, harness.lease
import reference_impl.server.runtime, reference_impl.server.wire, reference_impl.server.rpc
import reference_impl.server.control, reference_impl.server.disk, reference_impl.server.auth
import harness.lazyfs.server  # kraftwerk fs on the host (storage lazyfs): pyfuse3, trio
site = sysconfig.get_paths()["purelib"]
tops = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None) or ""
    if f.startswith(site + "/"):
        top = f[len(site) + 1:].split("/")[0]
        if not top.startswith("__editable__"):
            tops.add(top.removesuffix(".py").split(".")[0])
print(" ".join(sorted(tops)))
"""


def node_deps() -> tuple[str, ...]:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"cannot list a node's imports: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return tuple(p.stdout.split())
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kraftwerk"


def _files() -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so"):
                out.append((str(p.relative_to(ROOT)), p))
    deps = node_deps()
    for dep in deps:
        spec = importlib.util.find_spec(dep)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{dep} is not installed here; the bundle needs it")
        origin = Path(spec.origin)
        if spec.submodule_search_locations is not None:  # a package (its __init__ may be compiled: pyfuse3)
            base = origin.parent
            for p in sorted(base.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    out.append((f"site/{base.name}/{p.relative_to(base)}", p))
        else:
            out.append((f"site/{origin.name}", origin))
    for dist in sorted({d for dep in deps for d in importlib.metadata.packages_distributions().get(dep, [])}):
        info = importlib.metadata.distribution(dist)._path  # type: ignore[attr-defined]
        for p in sorted(Path(info).rglob("*")):  # metadata: some packages read their own version
            if p.is_file():
                out.append((f"site/{Path(info).name}/{p.relative_to(info)}", p))
    return out


def build() -> tuple[str, Path]:
    """(hash, path) of the bundle tarball, made once per content under the cache."""
    files = _files()
    h = hashlib.sha256()
    for name, p in files:
        h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
    digest = h.hexdigest()[:16]
    path = CACHE / f"kw-bundle-{digest}.tar.gz"
    if path.exists():
        os.utime(path)  # in use: not stale for another content's build
    else:
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # builders of one content do not share a file
        with tarfile.open(tmp, "w:gz", compresslevel=3) as tar:
            for name, p in files:
                data = p.read_bytes()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, path)
        for old in CACHE.glob("kw-bundle-*.tar.gz"):
            # an older bundle goes once nobody can be about to upload it
            # (runs of other checkouts share this cache)
            try:
                stale = time.time() - old.stat().st_mtime > 3600
            except OSError:
                continue
            if old != path and stale:
                old.unlink(missing_ok=True)
    return digest, path
