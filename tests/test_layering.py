"""Arrows point down (docs/architecture.md, "Rooms"): the generator is the
bottom room; nemesis/ and workloads/ use it; reference_impl/, nemesis/,
workloads/, checkers/ and generator/ import nothing of harness/. Imports
inside functions count too: a deferred import is still an arrow.

Two arrows cross between rooms on purpose, each to a leaf that imports
nothing of this repository: the simulated clients (reference_impl/sim)
follow the workload's outcome rules (``workloads.outcome``), and the
simulator's cluster contract names the clients' pseudo-node as the contract
does (``nemesis.control``)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]

#: room -> the top-level packages of this repository it must never import
FORBIDDEN = {
    "generator": {"harness", "nemesis", "workloads", "checkers", "reference_impl"},
    "nemesis": {"harness", "workloads", "checkers", "reference_impl"},
    "workloads": {"harness", "nemesis", "checkers", "reference_impl"},
    "checkers": {"harness", "nemesis", "workloads", "generator"},
    "reference_impl": {"harness", "nemesis", "workloads", "generator"},
}


#: room -> modules of a forbidden package it may import all the same (leaves)
ALLOWED = {
    "reference_impl": {"workloads.outcome", "nemesis.control"},
}

#: the repository's top-level packages (what a leaf must not import)
PACKAGES = {"harness", "nemesis", "workloads", "checkers", "reference_impl", "generator"}


def imported_modules(path: Path) -> set[str]:
    """The dotted names every absolute import in the file names (``from a.b
    import c`` names ``a.b``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def imported_packages(path: Path) -> set[str]:
    """The top-level names every absolute import in the file reaches."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _modules() -> list[tuple[str, Path]]:
    return [(room, p) for room in sorted(FORBIDDEN) for p in sorted((ROOT / room).rglob("*.py"))]


@pytest.mark.parametrize("room,path", _modules(), ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else v)
def test_room_imports_nothing_above_it(room, path):
    allowed = ALLOWED.get(room, set())
    bad = {m for m in imported_modules(path) if m.split(".")[0] in FORBIDDEN[room] and m not in allowed}
    assert bad == set()


@pytest.mark.parametrize("module", sorted(set().union(*ALLOWED.values())))
def test_a_module_crossing_rooms_is_a_leaf(module):
    """What a room may import across is a leaf: it imports nothing of this
    repository, so the exception brings no other arrow with it."""
    path = ROOT / (module.replace(".", "/") + ".py")
    assert imported_packages(path) & PACKAGES == set()


def test_a_server_module_imports_only_public_names_of_its_siblings():
    """reference_impl/server's modules share helpers under public names
    (wire_base.py's ``require_name`` and ``require_array`` serve wire.py and
    wire_groups.py): importing a sibling's ``_private`` name would hide a contract
    inside an implementation detail."""
    server = ROOT / "reference_impl" / "server"
    private = {
        (p.name, a.name)
        for p in sorted(server.rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p)))
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("reference_impl"))
        for a in node.names
        if a.name.startswith("_") and not a.name.startswith("__")
    }
    assert private == set()


def test_the_simulated_clients_follow_the_workloads_outcome_rules():
    """The one crossing arrow is used: the simulated producer takes its
    ok / fail / info from workloads.outcome, not from rules of its own."""
    assert "workloads.outcome" in imported_modules(ROOT / "reference_impl" / "sim" / "producer.py")
    assert "workloads.outcome" in imported_modules(ROOT / "workloads" / "queue.py")


def test_one_history_recorder_for_both_runtimes():
    """The interpreter's runner and the simulator's clients record with one
    recorder, checkers.history.recorder (time injected from each runtime's
    clock); neither runtime keeps one of its own, and the recorder brings no
    arrow with it (it imports only its own package's Op and JSONL code)."""
    recorder = "checkers.history.recorder"
    assert recorder in imported_modules(ROOT / "harness" / "lifecycle" / "runner.py")
    assert recorder in imported_modules(ROOT / "harness" / "lifecycle" / "interpreter.py")
    assert recorder in imported_modules(ROOT / "harness" / "lifecycle" / "virtual.py")
    assert recorder in imported_modules(ROOT / "reference_impl" / "sim" / "clients.py")
    assert not (ROOT / "harness" / "history.py").exists()
    assert not (ROOT / "reference_impl" / "sim" / "history.py").exists()
    assert imported_packages(ROOT / "checkers" / "history" / "recorder.py") & PACKAGES == set()


def test_the_clients_pseudo_node_is_named_once():
    """``"client"`` in a link pair is the contract's :data:`nemesis.control.CLIENT`:
    the simulator, the iptables network and every other runtime import it
    rather than spell it again."""
    defined = {
        str(p.relative_to(ROOT))
        for room in sorted(PACKAGES) for p in sorted((ROOT / room).rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p)))
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name) and t.id == "CLIENT"
    }
    assert defined == {"nemesis/control.py"}
    assert "nemesis.control" in imported_modules(ROOT / "reference_impl" / "sim" / "control.py")


#: at most this many imports inside functions in the six rooms: each a heavy
#: library or a compiled module loaded late on purpose, with its reason on
#: the line (``# late:``); the EDN reader's compiled flat-line reader is the 31st
IN_FUNCTION_IMPORTS_AT_MOST = 31

#: rooms whose imports are being moved to the top by work of their own: their
#: in-function imports count towards the limit but need no reason yet (drop a
#: room from here once its imports are at the top)
REASONS_PENDING: tuple[str, ...] = ()


def in_function_imports(files: list[Path]) -> list[tuple[Path, int, str]]:
    """Every import statement inside a function (a method, a nested
    function) of ``files``: (file, line, its source lines)."""
    out: dict[tuple[Path, int], str] = {}
    for p in files:
        text = p.read_text()
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text, filename=str(p))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(fn):
                    if isinstance(n, (ast.Import, ast.ImportFrom)):
                        out[(p, n.lineno)] = "\n".join(lines[n.lineno - 1:n.end_lineno])
    return [(p, line, src) for (p, line), src in sorted(out.items())]


def _project_files() -> list[Path]:
    return sorted(p for room in sorted(PACKAGES) for p in (ROOT / room).rglob("*.py"))


def test_imports_sit_at_the_top_of_their_files():
    """An import inside a function hides an arrow from whoever reads the
    file's head; the few left load a heavy library late on purpose."""
    found = in_function_imports(_project_files())
    assert len(found) <= IN_FUNCTION_IMPORTS_AT_MOST, "\n".join(f"{p.relative_to(ROOT)}:{n}" for p, n, _ in found)


def test_an_import_inside_a_function_says_why_it_is_late():
    pending = tuple(ROOT / r for r in REASONS_PENDING)
    unreasoned = [f"{p.relative_to(ROOT)}:{n}: {src.strip()}" for p, n, src in in_function_imports(_project_files())
                  if "# late:" not in src and not any(p.is_relative_to(d) for d in pending)]
    assert unreasoned == []


def test_the_import_count_sees_methods_nested_functions_and_reasons(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nclass A:\n    def f(self):\n        import json\n        def g():\n"
                 "            from x import (a,  # late: x is slow\n                b)\n")
    found = in_function_imports([f])
    assert [(n, "# late:" in src) for _, n, src in found] == [(4, False), (6, True)]


def test_every_room_has_modules_to_check():
    rooms = {room for room, _ in _modules()}
    assert rooms == set(FORBIDDEN)


def test_the_checker_sees_deferred_and_dotted_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import harness.rundir.store\ndef f():\n    from harness.report import x\nfrom .local import y\n")
    assert imported_packages(f) == {"harness"}


def test_the_simulators_host_sees_its_environment_not_the_simulation():
    """The host/simulation circle is broken: a host gets a ``NodeEnv``."""
    sim = ROOT / "reference_impl" / "sim"
    tree = ast.parse((sim / "host.py").read_text())
    relative = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
    assert "simulation" not in relative and "env" in relative


def import_graph(*packages: Path) -> "nx.DiGraph":
    """Module -> module edges of every import inside ``packages`` (relative
    or absolute, at the top, deferred or under ``TYPE_CHECKING``: each is an
    arrow) between modules of those packages."""
    g = nx.DiGraph()
    package = packages[0]
    top = package.parents[len(package.relative_to(ROOT).parts) - 1] if package.is_relative_to(ROOT) \
        else package.parents[1]

    def name_of(p: Path) -> str:
        parts = list(p.relative_to(top).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    prefixes = tuple(name_of(p / "__init__.py") for p in packages)
    for p in sorted(f for package in packages for f in package.rglob("*.py")):
        mod = name_of(p)
        g.add_node(mod)
        pkg = mod if p.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p))):
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                names = [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                target, names = "", [a.name for a in node.names]
            else:
                continue
            for dotted in names:
                # "from . import x" names module x when x is a module, else the package
                dest = dotted if dotted in g or (top / dotted.replace(".", "/")).with_suffix(".py").exists() \
                    or (top / dotted.replace(".", "/") / "__init__.py").exists() else target
                if any(dest == x or dest.startswith(x + ".") for x in prefixes) and dest != mod:
                    g.add_edge(mod, dest)
    return g


def core_import_graph(core: Path) -> "nx.DiGraph":
    return import_graph(core)


def test_the_core_has_no_import_cycles():
    """reference_impl/core imports in one direction: a module that needs part
    of another that imports it takes a narrow Protocol (PartitionContext,
    ControllerLink), never the class, so no module waits on a circle."""
    g = core_import_graph(ROOT / "reference_impl" / "core")
    assert g.number_of_edges() > 20
    assert list(nx.simple_cycles(g)) == []


def test_the_cycle_check_sees_a_type_checking_import(tmp_path):
    core = tmp_path / "pkg" / "core"
    core.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (core / "__init__.py").write_text("")
    (core / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (core / "b.py").write_text("from . import a\n")

    assert sorted(map(sorted, nx.simple_cycles(core_import_graph(core)))) == [["pkg.core.a", "pkg.core.b"]]


def test_no_import_circle_anywhere():
    """No module of the project waits on a circle of imports, deferred ones
    included: a circle hidden in a function is still one (the rooms'
    arrows, and each room's own modules, point one way)."""
    g = import_graph(*(ROOT / p for p in sorted(PACKAGES)))
    assert g.number_of_nodes() > 200
    assert sorted(map(sorted, nx.simple_cycles(g))) == []


#: harness/'s rooms, each with the rooms it may import (docs/architecture.md,
#: "Rooms"): the CLI on top imports anything and nothing imports it; the
#: runtimes (where nodes run) import no db (what runs there); the run
#: directory, the config and kraftwerk fs sit at the bottom.
HARNESS_ROOMS: dict[str, set[str]] = {
    "errors": set(),
    "rundir": {"errors"},
    "netdelay": {"rundir"},
    "config": {"errors", "rundir"},
    "lazyfs": {"errors", "rundir"},
    "runtimes": {"errors", "rundir", "config", "netdelay"},
    "dbs": {"errors", "rundir", "config", "lazyfs", "runtimes"},
    "report": {"errors", "rundir", "config"},
    "site": {"errors", "rundir", "report"},
    "lifecycle": {"errors", "rundir", "config", "runtimes", "dbs", "report"},
    "search": {"errors", "rundir", "config", "lifecycle", "report"},
    "campaign": {"errors", "rundir", "config", "lifecycle", "search", "report"},
    "handcluster": {"errors", "rundir", "config", "runtimes", "dbs"},
    "cli": {"errors", "rundir", "config", "lazyfs", "runtimes", "dbs", "report", "site", "lifecycle", "search",
            "campaign", "handcluster"},
}


def harness_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "harness" and len(parts) > 1 else None


def _harness_files() -> list[Path]:
    return sorted(p for p in (ROOT / "harness").rglob("*.py") if p != ROOT / "harness" / "__init__.py")


def test_every_harness_room_is_listed():
    rooms = {harness_room(".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in _harness_files()}
    assert rooms == set(HARNESS_ROOMS)


@pytest.mark.parametrize("path", _harness_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_harness_room_imports_only_the_rooms_below_it(path):
    room = harness_room(".".join(path.relative_to(ROOT).with_suffix("").parts))
    tree = ast.parse(path.read_text(), filename=str(path))
    reached: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            reached |= {harness_room(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "harness":  # from harness import dbs, runtimes
                reached |= {a.name for a in node.names}
            else:
                reached.add(harness_room(node.module))
    assert reached - {None, room} <= HARNESS_ROOMS[room]


#: rooms held to the size rule, and its bounds (issue "the house, second pass")
SIZED_ROOMS = ("reference_impl/core", "checkers")
MAX_CLASS_LINES, MAX_FUNCTION_LINES = 500, 80


def oversized(path: Path) -> list[str]:
    """Classes over MAX_CLASS_LINES and functions (methods and nested ones
    included) over MAX_FUNCTION_LINES in the file, by their source span."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        lines = (node.end_lineno or node.lineno) - node.lineno + 1 if hasattr(node, "lineno") else 0
        if isinstance(node, ast.ClassDef) and lines > MAX_CLASS_LINES:
            out.append(f"class {node.name}: {lines} lines")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and lines > MAX_FUNCTION_LINES:
            out.append(f"def {node.name}: {lines} lines")
    return out


def test_no_class_over_500_lines_and_no_function_over_80_in_the_core_and_the_checkers():
    found = {str(p.relative_to(ROOT)): o for room in SIZED_ROOMS for p in sorted((ROOT / room).rglob("*.py"))
             if (o := oversized(p))}
    assert found == {}


def test_the_size_rule_sees_a_long_method(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(81))
    f = tmp_path / "m.py"
    f.write_text(f"class C:\n    def m(self):\n{body}\n")
    assert oversized(f) == ["def m: 82 lines"]
