"""The project for a bare host: its wheel, the wheels a node needs, and pip.

A host is assumed to have only Debian and Python 3.11 (``python3.11``), as
the Vagrant VMs and the ``kraftwerk hosts up`` hosts do, and perhaps no
network. The harness makes, once per content, one tar holding:

* ``wheels/kraftwerk-*.whl``: the project, built with ``pip wheel --no-deps
  --no-build-isolation`` from a copy of the sources (setuptools builds in
  the source tree; the checkout stays clean);
* ``wheels/<dist>-<version>-*.whl``: every distribution a node process or
  ``kraftwerk fs`` on the host imports (click, kafka-python's codecs,
  msgpack, orjson, crc32c, pyfuse3, trio and theirs: listed by importing
  them in a fresh interpreter, so the set follows the code) at the version
  installed here, fetched once into the
  cache with ``pip download --no-deps --only-binary=:all:`` from this
  machine's package index, or built with ``pip wheel --no-deps`` where the
  index has no wheel;
* ``pip-<version>-*.whl``: pip itself, which runs from its wheel file.

On the host (:func:`install_argvs`): ``python3.11 -m venv --without-pip
<app>/venv`` (no ensurepip needed), then ``<app>/venv/bin/python
<app>/pip-*.whl/pip install --no-index --no-deps <app>/wheels/*.whl``: the
dependencies come from the uploaded wheels only, the project's own
declared dependencies (Spark, matplotlib...) are not a node's and are not
installed. Nodes run ``<app>/venv/bin/python``. The accelerator is not
shipped: nodes there run the Python source.

The tar's name is a SHA-256 of the project's sources and the pinned wheel
set, so a host that already has ``<dir>/app-<hash>/.complete`` is not sent
it again, and the wheel is rebuilt only when a source changes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from harness.errors import HarnessError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reference_impl", "generator", "harness", "nemesis", "workloads", "checkers")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kraftwerk"
WHEELS = CACHE / "wheels"
#: the venv's interpreter, relative to the unpacked bundle
VENV_PYTHON = "venv/bin/python"
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


def node_dists() -> list[tuple[str, str]]:
    """(distribution, installed version) of every package a node imports."""
    by_module = importlib.metadata.packages_distributions()
    dists = sorted({d for mod in node_deps() for d in by_module.get(mod, [])})
    return [(d, importlib.metadata.version(d)) for d in dists]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _wheel(dist: str, version: str) -> Path:
    """The cached wheel of ``dist==version``: downloaded, else built."""
    WHEELS.mkdir(parents=True, exist_ok=True)

    def hit() -> Path | None:
        found = [p for p in WHEELS.glob("*.whl") if _norm(p.name.split("-")[0]) == _norm(dist)
                 and p.name.split("-")[1] == version]
        return found[0] if found else None

    if hit() is None:
        pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
        got = subprocess.run([*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(WHEELS),
                              f"{dist}=={version}"], capture_output=True, text=True, timeout=600)
        if got.returncode != 0:
            got = subprocess.run([*pip, "wheel", "--no-deps", "-w", str(WHEELS), f"{dist}=={version}"],
                                 capture_output=True, text=True, timeout=900)
        if got.returncode != 0 or hit() is None:
            raise HarnessError(f"no wheel of {dist}=={version} for the ssh hosts: "
                               f"{(got.stderr.strip().splitlines() or ['?'])[-1][:200]}")
    found = hit()
    assert found is not None
    return found


def _sources_digest(pins: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    files = [ROOT / "pyproject.toml"] + [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*"))
                                         if p.is_file() and "__pycache__" not in p.parts
                                         and p.suffix not in (".pyc", ".so")]
    for p in files:
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    for dist, version in pins:
        h.update(f"{dist}=={version}\0".encode())
    return h.hexdigest()[:16]


def _project_wheel(out: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the sources (setuptools writes
    ``build/`` and ``*.egg-info`` next to them)."""
    with tempfile.TemporaryDirectory(prefix="kw-wheel-") as work:
        src = Path(work) / "src"
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
            ".git", ".venv", ".accel", "build", "results", "__pycache__", "*.egg-info", ".pytest_cache",
            ".hypothesis", "tests", "bench"))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(out), str(src)], capture_output=True, text=True, timeout=600, env=env)
        if p.returncode != 0:
            raise HarnessError(f"building the project's wheel failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:200]}")
    (wheel,) = out.glob("kraftwerk-*.whl")
    return wheel


def build() -> tuple[str, Path]:
    """(hash, path) of the bundle tar, made once per content under the cache."""
    pins = node_dists()
    pip_pin = ("pip", importlib.metadata.version("pip"))
    digest = _sources_digest(pins + [pip_pin])
    path = CACHE / f"kw-bundle-{digest}.tar"
    if path.exists():
        os.utime(path)  # in use: not stale for another content's build
        return digest, path
    CACHE.mkdir(parents=True, exist_ok=True)
    deps = [_wheel(d, v) for d, v in pins]
    pip_wheel = _wheel(*pip_pin)
    with tempfile.TemporaryDirectory(prefix="kw-bundle-", dir=CACHE) as tmp:
        project = _project_wheel(Path(tmp))
        part = Path(tmp) / "bundle.tar"
        with tarfile.open(part, "w") as tar:  # wheels are zips already
            for w in [project, *deps]:
                tar.add(w, arcname=f"wheels/{w.name}")
            tar.add(pip_wheel, arcname=pip_wheel.name)
        os.replace(part, path)
    for old in CACHE.glob("kw-bundle-*.tar*"):
        # another content's bundle goes once nobody can be about to upload
        # it: checkouts on one machine share this cache
        try:
            stale = time.time() - old.stat().st_mtime > 3600
        except OSError:
            continue
        if old != path and stale:
            old.unlink(missing_ok=True)
    return digest, path


def install_argvs(app: str, python: str, wheels: list[str], pip_wheel: str) -> list[list[str]]:
    """What makes the venv on a host from an unpacked bundle in ``app``
    (``wheels`` and ``pip_wheel``: the names the tar holds)."""
    return [
        [python, "-m", "venv", "--without-pip", f"{app}/venv"],
        [f"{app}/{VENV_PYTHON}", f"{app}/{pip_wheel}/pip", "install", "-q", "--no-index", "--no-deps",
         "--disable-pip-version-check", *[f"{app}/wheels/{w}" for w in wheels]],
    ]


def contents(path: Path) -> tuple[list[str], str]:
    """(wheel names under wheels/, pip's wheel name) in a bundle tar."""
    with tarfile.open(path) as tar:
        names = tar.getnames()
    return sorted(n.split("/", 1)[1] for n in names if n.startswith("wheels/")), next(
        n for n in names if n.startswith("pip-"))
