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


def test_every_effect_constructor_takes_exactly_its_fields_in_order():
    """Effects spell out ``__init__`` (speed, see reference_impl.core.effects);
    it must stay the one a dataclass would generate: the fields, in order,
    each stored as given (TraceEvent's data defaults to a fresh dict)."""
    import dataclasses
    import typing

    from reference_impl.core import effects
    from reference_impl.core.effects import Timer

    # one well-typed, distinct value per field name (a compiled class checks types)
    sample = {"dst": 3, "msg": Timer(7), "at": 5, "log": "t-0", "entries": (1, 2), "offset": 11, "start_offset": 13,
              "path": "a/b", "data": {"x": 1}, "target": "t-1", "kind": "hw", "reason": "why"}
    classes = typing.get_args(effects.Effect)
    assert len(classes) == 11
    for cls in classes:
        names = [f.name for f in dataclasses.fields(cls)]
        args = [sample[n] for n in names]
        # by position and by keyword (a compiled __init__ has no signature to inspect)
        for made in (cls(*args), cls(**dict(zip(names, args)))):
            assert [getattr(made, n) for n in names] == args, cls.__name__
    assert effects.TraceEvent("x").data == {} and effects.TraceEvent("x").data is not effects.TraceEvent("x").data
