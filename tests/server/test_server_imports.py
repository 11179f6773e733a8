"""reference_impl/server reads from the top of each file: every module's
imports are at its head (a late import must say why on its line, ``# loaded
late: ...``, and is meant for heavy optional libraries only), and no two of
its modules import each other, directly or round a longer circle (wire.py and
wire_groups.py once did: the helpers both need live in wire_base.py)."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "reference_impl" / "server"
MODULES = sorted(SERVER.glob("*.py"))


def _late_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = path.read_text().splitlines()
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and "# loaded late:" not in lines[node.lineno - 1]:
                out.append(f"{path.name}:{node.lineno}")
    return out


def _siblings(path: Path) -> set[str]:
    """The server modules ``path`` imports (relative or by full name)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1:
                out |= {base.split(".")[0]} if base else {a.name for a in node.names}
            elif base.startswith("reference_impl.server."):
                out.add(base.split(".")[2])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names if a.name.startswith("reference_impl.server.")}
    return out & {p.stem for p in MODULES}


def test_every_server_module_imports_at_its_head():
    assert [x for p in MODULES for x in _late_imports(p)] == []


def test_no_server_modules_import_each_other_round_a_circle():
    graph = {p.stem: _siblings(p) for p in MODULES}
    circles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in path:
                circles.append(path[path.index(nxt):] + [nxt])
            elif len(path) < len(graph):
                visit(nxt, path + [nxt])

    for start in graph:
        visit(start, [start])
    assert circles == []
    assert "wire_base" in graph["wire_groups"] and "wire" not in graph["wire_groups"]
