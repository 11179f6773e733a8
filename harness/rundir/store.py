"""The results store: ``<out>/<test-name>/<YYYYmmddTHHMMSS>-<seed>/`` per run and
``<out>/latest`` pointing at the newest (ARCHITECTURE.md, run directory)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from harness.rundir.trust import trusted_dir

HISTORY = "history.jsonl"
RESULTS = "results.json"
TEST = "test.json"
INDEX = "index.html"


#: a test name is one directory name: no separators, no ``.``/``..``, no
#: whitespace or control characters (fullmatch: a trailing newline is refused)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,80}")


class BadName(ValueError):
    """A run or test name that cannot be one directory under ``--out``."""


def check_name(name: object, what: str = "test name") -> str:
    """The one check every caller's run/test name goes through."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise BadName(f"{what} {name!r}: use 1-81 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def new_run_dir(out: str | Path, name: str, seed: int) -> Path:
    """A fresh run directory under ``out``, which must be safe for this user
    to write in (:func:`harness.rundir.trust.trusted_dir`: the run, its
    ``latest`` link and every file the run writes land where they should)."""
    check_name(name)
    base = trusted_dir(Path(trusted_dir(out, "--out")) / name, "--out")
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
