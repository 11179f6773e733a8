"""What the benches that tabulate whole ``kraftwerk`` runs share: running
the CLI as a child with ``--json`` and reading its results, its one-line
error when it gave none, and the flags and ``--pytest`` switch of a table
of runs (each such bench also names the slow tests that assert the
outcomes its rows print)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
#: the CLI as a child process of this interpreter (the venv's), from any directory
KRAFTWERK = [sys.executable, "-c", "from harness.cli import main; main()"]


def last_line(p: subprocess.CompletedProcess) -> str:
    """A failed child's reason: the last line of its stderr (the CLI's one-line error), else its exit code."""
    return (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]


def kraftwerk_json(args: Sequence[str], timeout: float | None = None) -> tuple[dict[str, Any] | None, str, float]:
    """Run ``kraftwerk ARGS`` (ARGS holding ``--json``) from the checkout:
    (its results, "", seconds) or (None, why not, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run([*KRAFTWERK, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    took = time.monotonic() - t0
    try:
        return json.loads(p.stdout), "", took
    except ValueError:
        return None, last_line(p), took


def table_args(doc: str, out: str, seed: str) -> argparse.ArgumentParser:
    """The flags every table of runs takes: ``--out``, ``--seed`` and ``--pytest``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=out)
    ap.add_argument("--seed", default=seed)
    ap.add_argument("--pytest", action="store_true", help="run the slow tests that assert these outcomes instead")
    return ap


def slow_tests(path: str) -> int:
    """``--pytest``: the slow tests of ``path``, their exit code."""
    return subprocess.call([sys.executable, "-m", "pytest", "-m", "slow", "-q", path], cwd=ROOT)


def print_rows(header: str, runs: Sequence[tuple[str, list[str]]], row: Callable[[str, list[str]], str],
               only: int | None = None) -> int:
    """The header, then one row per run (all, or run ``only``), each as it ends."""
    print(header)
    for i, (name, flags) in enumerate(runs):
        if only is None or only == i:
            print(row(name, flags), flush=True)
    return 0
