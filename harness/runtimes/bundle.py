"""The project for a bare host: its wheel, the wheels a node needs, and pip.

A host is assumed to have only Debian and Python 3.11 (``python3.11``), as
the Vagrant VMs and the ``kraftwerk hosts up`` hosts do, and perhaps no
network. The harness makes, once per content, one tar holding:

* ``wheels/kraftwerk-*.whl``: the project, a pure wheel written here from
  its packages' files (:func:`_project_wheel`: no build backend, so it is
  made alike from a checkout and from an installed copy, whatever
  setuptools the harness's environment has);
* ``wheels/<dist>-<version>-*.whl``: every distribution a node process or
  ``kraftwerk fs`` on the host imports (click, kafka-python's codecs,
  msgpack, orjson, crc32c, pyfuse3, trio and theirs: listed by importing
  them in a fresh interpreter, so the set follows the code) at the version
  requirements.lock pins, fetched once into the
  cache with ``pip download --no-deps --only-binary=:all:`` from this
  machine's package index, or built with ``pip wheel --no-deps`` where the
  index has no wheel;
* ``pip-<version>-*.whl``: pip itself, which runs from its wheel file.

Every one of them is pinned by hash, not only by version: what is fetched
must match one of the SHA-256 hashes ``requirements.lock`` lists for that
version (pip's ``--require-hashes``; for a wheel built here, the hash of
the source archive it is built from), and a distribution the lock does
not pin with hashes is refused in one line (exit 2).

On the host (:func:`install_argvs`): ``python3.11 -m venv --without-pip
<app>/venv`` (no ensurepip needed), then ``<app>/venv/bin/python
<app>/pip-*.whl/pip install --no-index --no-deps <app>/wheels/*.whl``: the
dependencies come from the uploaded wheels only, the project's own
declared dependencies (Spark, matplotlib...) are not a node's and are not
installed. Nodes run ``<app>/venv/bin/python``. The accelerator is not
shipped: nodes there run the Python source.

Which wheels a host can take is decided by its interpreter, not this
machine's: :class:`Target` holds what the host's ``python3.11`` reports
(implementation and version, ABI flags, architecture, glibc version: the
facts PEP 425 tags and manylinux's PEP 600 rule are made of), and the
cache is keyed by it: ``wheels/<target key>/`` (e.g.
``cp311-cp311-manylinux_2_36_x86_64``) holds only wheels whose tags that
interpreter accepts, fetched with pip's ``--platform``/``--python-version``/
``--abi``/``--implementation`` for that target. A wheel is built here only
where the index has none, and sent only if it carries a tag the target
accepts and, holding machine code, was linked against a glibc no newer than
the target's; otherwise it is one line, exit 2. A host of
another architecture, glibc or Python is never handed this machine's wheels.

The tar's name is a SHA-256 of the project's sources, the pinned wheel set,
the target's key and ``requirements.lock`` (the hash-checked lock this
machine's versions come from), so a host that already has
``<dir>/app-<hash>/.complete`` is not sent it again, hosts of two targets get
two tars, and the wheel is rebuilt only when one of those changes.

Concurrency: runs on one machine share the cache, so :func:`build` holds an
exclusive ``flock`` on ``<cache>/bundle.lock`` while it fetches wheels and
writes the tar; each wheel is fetched into a private directory and the tar
written to a private file, both renamed into place, so no reader (nor a
crash) ever sees half of either.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from harness.errors import HarnessError, UsageError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reference_impl", "generator", "harness", "nemesis", "workloads", "checkers")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kraftwerk"
WHEELS = CACHE / "wheels"
#: the hash-checked lock (a link to the checkout's own; package data in an installed copy)
LOCK = Path(__file__).with_name("requirements.lock")
#: the venv's interpreter, relative to the unpacked bundle
VENV_PYTHON = "venv/bin/python"
#: run in a fresh interpreter: what a node process imports from outside the standard library
#: (found each time, so the bundle follows the code's imports)
PROBE = """
import os, sys, sysconfig
sys.argv = ["kraftwerk", "node"]
import harness.cli, harness.cli.node, harness.rundir.lease
import reference_impl.server.runtime, reference_impl.server.wire, reference_impl.server.rpc
import reference_impl.server.control, reference_impl.server.disk, reference_impl.server.auth
import harness.lazyfs.server  # kraftwerk fs on the host (storage lazyfs): pyfuse3, trio
base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})  # not the venv's
std = {base[k] for k in ("stdlib", "platstdlib")}
# every import root but the standard library's: site-packages, and a path a .pth file or a user site adds
roots = sorted({os.path.abspath(p) for p in sys.path if os.path.isdir(p or ".")} - std, key=len, reverse=True)
tops = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None) or ""
    if not f or any(f.startswith(s + "/") for s in std):
        continue
    for r in roots:
        if f.startswith(r + "/"):
            top = f[len(r) + 1:].split("/")[0]
            if not top.startswith("__editable__"):
                tops.add(top.removesuffix(".py").split(".")[0])
            break
print(" ".join(sorted(tops)))
"""


def node_deps() -> tuple[str, ...]:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"cannot list a node's imports: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return tuple(p.stdout.split())


def node_dists() -> list[tuple[str, str]]:
    """(distribution, version) of every package a node imports (the
    project's own aside), at the version requirements.lock pins: a host
    gets the lock's, hash-checked, whatever this environment installed."""
    by_module = importlib.metadata.packages_distributions()
    dists = sorted({d for mod in node_deps() if mod not in PACKAGES for d in by_module.get(mod, [])})
    return [(d, _locked_version(d)) for d in dists]


#: run by the host's interpreter: what decides which wheels it can install
TARGET_PROBE = ("import platform, struct, sys, sysconfig; "
                "print(sys.implementation.name, '%d.%d' % sys.version_info[:2], sys.abiflags or '-', "
                "sysconfig.get_platform(), platform.libc_ver()[0] or '-', platform.libc_ver()[1] or '-', "
                "struct.calcsize('P') * 8)")
#: manylinux's legacy names (PEP 600): the glibc each one means
_LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}


@dataclass(frozen=True)
class Target:
    """An interpreter as a wheel sees it: CPython ``python``, its ABI flags,
    the machine's architecture and glibc version. Its :attr:`key` names the
    wheel cache's directory; :meth:`takes` says whether a wheel's tags fit."""

    python: tuple[int, int]
    abiflags: str
    arch: str
    glibc: tuple[int, int]

    @classmethod
    def parse(cls, line: str, where: str) -> "Target":
        """From :data:`TARGET_PROBE`'s line; a host we cannot ship wheels to
        is one line (UsageError, exit 2)."""
        m = re.fullmatch(r"(\S+) (\d+)\.(\d+) (\S+) (\S+) (\S+) (\S+) (32|64)", line.strip())
        if m is None:
            raise UsageError(f"{where}: cannot read its interpreter's platform from {line.strip()[:120]!r}")
        impl, major, minor, flags, plat, libc, libc_version, bits = m.groups()
        glibc = re.fullmatch(r"(\d+)\.(\d+)", libc_version)
        if impl != "cpython":
            raise UsageError(f"{where}: its interpreter is {impl}, not CPython: no wheels for it")
        if not plat.startswith("linux-") or libc != "glibc" or glibc is None:
            raise UsageError(f"{where}: its interpreter runs on {plat} with libc {libc} {libc_version}: "
                             f"wheels are shipped to glibc Linux hosts only")
        arch = plat.removeprefix("linux-").replace("-", "_").replace(".", "_")
        if bits == "32":  # a 32-bit userland on a 64-bit kernel (as packaging.tags does)
            arch = {"x86_64": "i686", "aarch64": "armv8l"}.get(arch, arch)
        return cls((int(major), int(minor)), "" if flags == "-" else flags, arch,
                   (int(glibc.group(1)), int(glibc.group(2))))

    @classmethod
    def here(cls) -> "Target":
        """This interpreter's target (what ``pip wheel`` builds for)."""
        p = subprocess.run([sys.executable, "-c", TARGET_PROBE], capture_output=True, text=True, timeout=60)
        return cls.parse(p.stdout, "this machine")

    @property
    def interpreter(self) -> str:
        return f"cp{self.python[0]}{self.python[1]}"

    @property
    def abi(self) -> str:
        return self.interpreter + self.abiflags

    @property
    def key(self) -> str:
        return f"{self.interpreter}-{self.abi}-manylinux_{self.glibc[0]}_{self.glibc[1]}_{self.arch}"

    def platforms(self) -> list[str]:
        """Platform tags this host accepts, most specific first: PEP 600's
        ``manylinux_2_M`` for every glibc minor up to its own (from 2.17, or
        2.5 on x86), their legacy names, then ``linux_<arch>``."""
        oldest = 5 if self.arch in ("x86_64", "i686") else 17
        out = []
        for minor in range(self.glibc[1], oldest - 1, -1) if self.glibc[0] == 2 else ():
            out.append(f"manylinux_2_{minor}_{self.arch}")
            if (2, minor) in _LEGACY:
                out.append(f"{_LEGACY[2, minor]}_{self.arch}")
        return out + [f"linux_{self.arch}"]

    def tags(self) -> frozenset[str]:
        """Every ``python-abi-platform`` tag a wheel may carry to install
        here (PEP 425 as pip orders it, order dropped)."""
        major, minor = self.python
        plats = self.platforms()
        pys = [f"py{major}{minor}", f"py{major}"] + [f"py{major}{m}" for m in range(minor - 1, -1, -1)]
        out = {f"{self.interpreter}-{abi}-{p}" for abi in (self.abi, "abi3", "none") for p in plats}
        out |= {f"cp{major}{m}-abi3-{p}" for m in range(minor - 1, 1, -1) for p in plats}
        out |= {f"{py}-none-{p}" for py in pys for p in plats}
        out |= {f"{py}-none-any" for py in [self.interpreter, *pys]}
        return frozenset(out)

    def takes(self, wheel: str) -> bool:
        """Whether a wheel file name has a tag this interpreter accepts
        (a name's tag triple may hold several, ``.``-separated)."""
        py, abi, plat = wheel.removesuffix(".whl").split("-")[-3:]
        tags = self.tags()
        return any(f"{a}-{b}-{c}" in tags for a in py.split(".") for b in abi.split(".") for c in plat.split("."))

    def pip_args(self) -> list[str]:
        """``pip download``'s options that fetch wheels for this target."""
        out = ["--implementation", "cp", "--python-version", f"{self.python[0]}.{self.python[1]}"]
        for abi in (self.abi, "abi3", "none"):
            out += ["--abi", abi]
        for p in self.platforms():
            out += ["--platform", p]
        return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (the kernel drops it if we die)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def lock_hashes(text: str | None = None) -> dict[tuple[str, str], list[str]]:
    """(normalised name, version) -> the SHA-256 hashes requirements.lock
    pins for it (pip-compile's ``name==version \\`` then ``--hash=sha256:``
    lines)."""
    out: dict[tuple[str, str], list[str]] = {}
    current: list[str] | None = None
    for line in (LOCK.read_text() if text is None else text).splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+) \\$", line)
        if m:
            current = out.setdefault((_norm(m.group(1)), m.group(2)), [])
            continue
        h = re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line)
        if h and current is not None:
            current.append(h.group(1))
        elif not line.startswith(" "):
            current = None
    return out


def _pinned(dist: str, version: str, into: Path) -> Path:
    """A requirements file naming ``dist==version`` with the lock's hashes
    (for ``--require-hashes``); a distribution the lock does not pin is refused."""
    hashes = lock_hashes().get((_norm(dist), version))
    if not hashes:
        raise UsageError(f"{dist}=={version} is not pinned with hashes in {LOCK.name}: a host is sent nothing "
                         f"unpinned (regenerate the lock, see scripts/audit)")
    req = into / "pinned.txt"
    req.write_text(f"{dist}=={version} " + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n")
    return req


def _wheel(dist: str, version: str, target: Target) -> Path:
    """The cached wheel of ``dist==version`` for ``target``: downloaded for
    it, else built here if what this interpreter builds fits it, either way
    checked against the lock's hashes (module doc). A cached wheel is used
    again if its own hash is the lock's, or if it was built here from a
    source archive that was (its ``.built`` mark). Called with the cache
    lock held; the wheel is renamed into the cache whole."""
    cache = WHEELS / target.key
    cache.mkdir(parents=True, exist_ok=True)

    def hit(d: Path) -> Path | None:
        found = sorted(p for p in d.glob("*.whl") if _norm(p.name.split("-")[0]) == _norm(dist)
                       and p.name.split("-")[1] == version and target.takes(p.name))
        return found[0] if found else None

    found = hit(cache)
    if found is not None and (_built_mark(found).exists()
                              or _sha256(found) in lock_hashes().get((_norm(dist), version), ())):
        return found
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache) as tmp:
        req = _pinned(dist, version, Path(tmp))
        got = subprocess.run([*pip, "download", "--no-deps", "--only-binary=:all:", *target.pip_args(),
                              "--require-hashes", "-d", tmp, "-r", str(req)],
                             capture_output=True, text=True, timeout=600)
        if got.returncode != 0:  # no wheel published for it: build one here, from the pinned sources
            got = subprocess.run([*pip, "wheel", "--no-deps", "--require-hashes", "-w", tmp, "-r", str(req)],
                                 capture_output=True, text=True, timeout=900)
            if got.returncode == 0:
                _fits_or_refuse(dist, version, list(Path(tmp).glob("*.whl")), target)
                for w in Path(tmp).glob("*.whl"):
                    _built_mark(w).write_text(f"built here from the source archive {LOCK.name} pins\n")
        made = hit(Path(tmp))
        if got.returncode != 0 or made is None:
            raise HarnessError(f"no wheel of {dist}=={version} for {target.key}: "
                               f"{(got.stderr.strip().splitlines() or ['?'])[-1][:200]}")
        if _built_mark(made).exists():
            os.replace(_built_mark(made), _built_mark(cache / made.name))
        else:
            _built_mark(cache / made.name).unlink(missing_ok=True)
        os.replace(made, cache / made.name)
    return cache / made.name


def _built_mark(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".built")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fits_or_refuse(dist: str, version: str, built: list[Path], target: Target) -> None:
    """A wheel built here goes to ``target`` only if its tags fit and, when
    it holds machine code, this machine's glibc is no newer than the
    target's (a binary needs at most the glibc it was linked against)."""
    here = Target.here()
    for w in built:
        pure = w.name.removesuffix(".whl").endswith("-any")
        if target.takes(w.name) and (pure or here.glibc <= target.glibc):
            return
    names = ", ".join(w.name for w in built) or "nothing"
    raise UsageError(f"no wheel of {dist}=={version} for {target.key} on the package index, and what this "
                     f"machine ({here.key}) builds ({names}) does not fit it")


def _locked_version(dist: str) -> str:
    """The version requirements.lock pins ``dist`` at (what a host gets,
    whatever this environment has installed)."""
    versions = [v for (name, v) in lock_hashes() if name == _norm(dist)]
    if len(versions) != 1:
        raise UsageError(f"{dist} is not pinned (once, with hashes) in {LOCK.name}: a host is sent nothing "
                         f"unpinned (regenerate the lock, see scripts/audit)")
    return versions[0]


def _project_files() -> list[Path]:
    """What the project's wheel holds: every file of its packages but
    bytecode and the compiled accelerator (nodes on a host run the source)."""
    return [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")]


def _project_version() -> str:
    try:
        return importlib.metadata.version("kraftwerk")
    except importlib.metadata.PackageNotFoundError:  # a checkout nobody installed
        return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _sources_digest(pins: list[tuple[str, str]], target: Target) -> str:
    h = hashlib.sha256(f"{target.key}\0{_project_version()}\0".encode() + LOCK.read_bytes() + b"\0")
    for p in _project_files():
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    for dist, version in pins:
        h.update(f"{dist}=={version}\0".encode())
    return h.hexdigest()[:16]


def _project_wheel(out: Path) -> Path:
    """The project as a pure wheel (PEP 427), written here from its
    packages' files: no build backend runs, so it is made alike from a
    checkout and from an installed copy (which has no pyproject.toml), and
    whatever setuptools this environment has (a fresh virtualenv's is older
    than the project's build needs) does not matter. A host installs it with
    ``--no-deps``: its metadata names it, its version and its command."""
    version = _project_version()
    info = f"kraftwerk-{version}.dist-info"
    path = out / f"kraftwerk-{version}-py3-none-any.whl"
    records: list[str] = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc: str, data: bytes) -> None:
            zi = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type, zi.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            z.writestr(zi, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{arc},sha256={digest},{len(data)}")

        for p in _project_files():
            add(p.relative_to(ROOT).as_posix(), p.read_bytes())
        add(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: kraftwerk\nVersion: {version}\n".encode())
        add(f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: kraftwerk\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        add(f"{info}/entry_points.txt", b"[console_scripts]\nkraftwerk = harness.cli:main\n")
        records.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return path


def build(target: Target) -> tuple[str, Path]:
    """(hash, path) of the bundle tar for hosts of ``target``, made once per
    content under the cache, with the cache's lock held (runs on one machine
    share the cache)."""
    pins = node_dists()
    pip_pin = ("pip", _locked_version("pip"))
    digest = _sources_digest(pins + [pip_pin], target)
    path = CACHE / f"kw-bundle-{digest}.tar"
    with _locked(CACHE / "bundle.lock"):
        if path.exists():
            os.utime(path)  # in use: not stale for another content's build
            return digest, path
        deps = [_wheel(d, v, target) for d, v in pins]
        pip_wheel = _wheel(*pip_pin, target)
        with tempfile.TemporaryDirectory(prefix="kw-bundle-", dir=CACHE) as tmp:
            project = _project_wheel(Path(tmp))
            if not target.takes(project.name):
                raise HarnessError(f"the project's wheel {project.name} does not fit {target.key}")
            part = Path(tmp) / "bundle.tar"
            with tarfile.open(part, "w") as tar:  # wheels are zips already
                for w in [project, *deps]:
                    tar.add(w, arcname=f"wheels/{w.name}")
                tar.add(pip_wheel, arcname=pip_wheel.name)
            os.replace(part, path)
        for old in CACHE.glob("kw-bundle-*.tar*"):
            # another content's bundle goes once nobody can be about to
            # upload it: checkouts on one machine share this cache
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
