"""The results store: ``<out>/<test-name>/<YYYYmmddTHHMMSS>-<seed>/`` per run and
``<out>/latest`` pointing at the newest (ARCHITECTURE.md, run directory)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

HISTORY = "history.jsonl"
RESULTS = "results.json"
TEST = "test.json"
INDEX = "index.html"


def new_run_dir(out: str | Path, name: str, seed: int) -> Path:
    base = Path(out) / name
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    d = base / f"{stamp}-{seed}"
    n = 1
    while d.exists():  # two runs with one seed in the same second (--test-count)
        n += 1
        d = base / f"{stamp}-{seed}.{n}"
    (d / "nodes").mkdir(parents=True)
    return d


def point_latest(out: str | Path, run_dir: Path) -> None:
    """Atomically repoint ``<out>/latest`` (a relative symlink) at ``run_dir``."""
    out = Path(out)
    link = out / "latest"
    tmp = out / f".latest.{os.getpid()}"
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    os.symlink(os.path.relpath(run_dir, out), tmp)
    os.replace(tmp, link)


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=str))
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())
