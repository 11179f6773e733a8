"""The core is sans-IO (docs/architecture.md): no module under
reference_impl/core may import sockets, threads, asyncio, files, the wall
clock or global randomness. Randomness arrives as an injected ``rng``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "reference_impl" / "core"
FORBIDDEN = {
    "socket", "asyncio", "threading", "time", "random", "os", "io", "pathlib", "subprocess",
    "select", "selectors", "multiprocessing", "datetime",
}
MODULES = sorted(CORE.rglob("*.py"))


def forbidden_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        bad += [n for n in names if n.split(".")[0] in FORBIDDEN]
    return bad


def test_core_has_modules_to_check():
    names = {p.stem for p in MODULES}
    assert {"log", "epoch_cache", "partition", "replica_manager", "node"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_no_io(path):
    assert forbidden_imports(path) == []


def test_the_checker_catches_io_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os.path\nfrom time import monotonic\nfrom .x import y\nimport heapq\n")
    assert forbidden_imports(f) == ["os.path", "time"]
