"""Compiled copies of the hot modules (core, simulator, the history line reader), built with mypyc.

The Python source stays the reference implementation; this is an optional,
behaviour-preserving accelerator. mypyc compiles the same modules to C
extensions (about 1.4x faster for the simulator). They are built by
``scripts/bootstrap`` into ``.accel/`` (not in the source tree) and loaded
only when *every* source they were built from is unchanged: a
``sys.meta_path`` finder serves the extension for a module only if the
manifest's SHA-256 of each source still matches. So an edited file never
runs stale compiled code; the whole set falls back to the source until the
next build (compiled modules call into each other's native classes, so it is
all or nothing).

``KRAFTWERK_PURE=1`` turns the accelerator off (any value but empty, ``0``,
``false`` or ``no``). :func:`status` says which mode a process runs in;
``kraftwerk sim`` reports it.

    python -m reference_impl.accel build    # compile into .accel/ (needs gcc and Python headers)
    python -m reference_impl.accel status   # compiled, or pure and why
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ACCEL_DIR = ROOT / ".accel"
MANIFEST = "manifest.json"
GROUP = "kraftwerk_accel"
ENV_PURE = "KRAFTWERK_PURE"

#: the modules compiled, as paths relative to the repository root: the
#: sans-IO core, the simulator's event loop, network, hosts and clients, the
#: invariant monitor (it sees every trace event the simulator emits), the
#: history recorder (two lines per simulated operation), the queue checker's
#: line reader and the spelling it reads most lines by (every line of a
#: history file) and its reader of a list of operations into the same
#: batches (every operation of a simulated seed's history) and the availability
#: checker's pass that walks them with it, the reading of a long poll's
#: records the scan's folds share (a final read's: a key's whole log), the linearizability search with its look-ahead and the
#: pairing that feeds it (about 1.5x faster on Porcupine's kv logs), the
#: send outcome rules the simulated clients apply to every send, and the
#: driver of a simulated test: the generator library, the queue workload's
#: generators and the virtual-time interpreter (asked and updated on every
#: operation), and the history's ``Op`` (built twice an operation and read
#: by every checker). A module imported before this loader makes the whole
#: build stay unused, so ``checkers.history`` imports ``reference_impl``
#: (this loader) before its ``Op``, as ``harness`` does first thing; of the
#: rest that importing ``checkers.history`` or ``checkers.check`` brings in,
#: only the poll records' reading is here, imported after the ``Op`` (its
#: importer, the projection, imports the histories first).
#: Scripting helpers and test kits stay Python (they are not hot, and tests
#: patch them).
MODULES: tuple[str, ...] = (
    "reference_impl/core/alter_partition.py",
    "reference_impl/core/broker_context.py",
    "reference_impl/core/broker_lifecycle.py",
    "reference_impl/core/broker_requests.py",
    "reference_impl/core/config.py",
    "reference_impl/core/controller/cluster_control.py",
    "reference_impl/core/controller/configuration_control.py",
    "reference_impl/core/controller/fencing_task.py",
    "reference_impl/core/controller/heartbeat_tracker.py",
    "reference_impl/core/controller/producer_ids.py",
    "reference_impl/core/controller/reassignment.py",
    "reference_impl/core/controller/replay.py",
    "reference_impl/core/controller/replication_control.py",
    "reference_impl/core/controller/role.py",
    "reference_impl/core/controller/unclean_recovery.py",
    "reference_impl/core/controller/writer.py",
    "reference_impl/core/effects.py",
    "reference_impl/core/epoch_cache.py",
    "reference_impl/core/errors.py",
    "reference_impl/core/log.py",
    "reference_impl/core/messages.py",
    "reference_impl/core/metadata.py",
    "reference_impl/core/node.py",
    "reference_impl/core/partition.py",
    "reference_impl/core/partition_leader.py",
    "reference_impl/core/partition_state.py",
    "reference_impl/core/partition_change.py",
    "reference_impl/core/producer_state.py",
    "reference_impl/core/purgatory.py",
    "reference_impl/core/replica_fetcher.py",
    "reference_impl/core/replica_manager.py",
    "reference_impl/core/storage.py",
    "reference_impl/core/raft/member.py",
    "reference_impl/core/raft/replica.py",
    "reference_impl/core/raft/state.py",
    "reference_impl/sim/clock.py",
    "reference_impl/sim/disk.py",
    "reference_impl/sim/events.py",
    "reference_impl/sim/network.py",
    "reference_impl/sim/env.py",
    "reference_impl/sim/host.py",
    "reference_impl/sim/simulation.py",
    "reference_impl/sim/endpoint.py",
    "reference_impl/sim/producer.py",
    "reference_impl/sim/consumer.py",
    "reference_impl/sim/groups.py",
    "reference_impl/sim/clients.py",
    "checkers/history/op.py",
    "checkers/history/recorder.py",
    "checkers/history/flat.py",
    "checkers/invariants.py",
    "checkers/queue/lines.py",
    "checkers/queue/opbatch.py",
    "checkers/queue/records.py",
    "checkers/queue/spelling.py",
    "checkers/availability/factpass.py",
    "checkers/linearizable/wgl.py",
    "checkers/linearizable/lookahead.py",
    "checkers/linearizable/prepare.py",
    "workloads/outcome.py",
    "generator/core.py",
    "workloads/queue_gen.py",
    "harness/lifecycle/virtual.py",
)

_status = "pure: not installed"


def module_name(path: str) -> str:
    return path[: -len(".py")].replace("/", ".")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tag() -> str:
    """What an extension is tied to: the interpreter, its ABI (the extension
    suffix names version, platform and libc flavour), the machine, and the
    interpreter's own build (release and build date: mypyc's code uses
    CPython internals that the ABI tag does not pin, and two builds of one
    minor version, say Debian's and one compiled from source, can sit side by
    side and share a checkout)."""
    build = hashlib.sha256(sys.version.encode()).hexdigest()[:8]
    return (f"{sys.implementation.cache_tag}{sysconfig.get_config_var('EXT_SUFFIX')}-{platform.machine()}"
            f"-{platform.python_version()}-{build}")


def pure_requested() -> bool:
    return os.environ.get(ENV_PURE, "").strip().lower() not in ("", "0", "false", "no")


class _CompiledFinder:
    """Serves the compiled extension for the modules in the manifest."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        so = self.files.get(fullname)
        if so is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(so))
        return importlib.util.spec_from_file_location(fullname, str(so), loader=loader)

    def invalidate_caches(self) -> None:
        pass


def check(accel_dir: Path = ACCEL_DIR, root: Path = ROOT, env: bool = True,
          modules: tuple[str, ...] | None = None) -> tuple[dict[str, Path] | None, str]:
    """(module -> extension file, "compiled") when the build in ``accel_dir``
    matches the sources under ``root`` and compiled exactly ``modules``
    (default :data:`MODULES`); (None, why not) otherwise. With ``env=False``
    the build is judged whatever ``KRAFTWERK_PURE`` says."""
    if env and pure_requested():
        return None, f"pure: {ENV_PURE} is set"
    mf = accel_dir / MANIFEST
    if not mf.is_file():
        return None, "pure: not built (python -m reference_impl.accel build)"
    try:
        manifest = json.loads(mf.read_text())
        if manifest.get("tag") != _tag():
            return None, f"pure: built for {manifest.get('tag')}, this is {_tag()}"
        built = sorted(ent["source"] for ent in manifest["modules"].values())
        if built != sorted(MODULES if modules is None else modules):
            return None, "pure: the build compiled another set of modules"
        files: dict[str, Path] = {}
        for mod, ent in manifest["modules"].items():
            src = root / ent["source"]
            if not src.is_file() or _sha(src) != ent["sha256"]:
                return None, f"pure: {ent['source']} changed since the build"
            files[mod] = accel_dir / ent["extension"]
        files[manifest["group"]] = accel_dir / manifest["group_extension"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"pure: unreadable manifest ({e})"
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        return None, f"pure: missing {missing[0]}"
    return files, "compiled"


def load_group(files: dict[str, Path], modules: tuple[str, ...] = MODULES) -> str | None:
    """Load the build's shared library now; None, or why it does not load.

    All compiled code lives in that one library (the per-module extensions
    are shims that call into it), and loading it runs none of our modules'
    code. A build that passes the manifest check but cannot be loaded (a
    truncated or corrupt file, a missing symbol) is therefore refused here,
    before any module is served from it, instead of failing the import of
    whichever module came first."""
    names = {module_name(m) for m in modules}
    for name, path in files.items():
        if name in names or name in sys.modules:
            continue
        try:
            loader = importlib.machinery.ExtensionFileLoader(name, str(path))
            spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
            if spec is None:
                return f"no module spec for {path}"
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            loader.exec_module(mod)
        except (ImportError, OSError) as e:
            sys.modules.pop(name, None)
            return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def install(accel_dir: Path = ACCEL_DIR, root: Path = ROOT) -> str:
    """Put the finder in front of the import system if the build is fresh
    and loads. Idempotent; returns :func:`status`."""
    global _status
    if any(isinstance(f, _CompiledFinder) for f in sys.meta_path):
        return _status
    already = [module_name(m) for m in MODULES if module_name(m) in sys.modules]
    if already:
        _status = f"pure: {already[0]} was imported before the accelerator"
        return _status
    files, _status = check(accel_dir, root)
    if files is not None:
        err = load_group(files)
        if err is not None:
            _status = f"pure: the build does not load ({err})"
            return _status
        sys.meta_path.insert(0, _CompiledFinder(files))
    return _status


def status() -> str:
    """"compiled" or "pure: <why>" for this process."""
    return _status

