"""Turning a URL path into a file under the results directory, or refusing.

The rule: the path's components are taken literally (no ``..``, no empty or
hidden components, no backslashes or NULs), and the *real* path, every
symlink followed, must still lie under the results directory's real path. So
``<out>/latest`` (a symlink to a run inside) works, and a symlink a node or
a user left pointing outside is refused like a ``../`` would be.

What is served is what a reader of results needs, never the rest of what a
run directory holds (:func:`servable`, an allow-list): reports, plots,
histories, verdicts, the nodes' logs and traces and their data files, by
name, and only files anyone on this machine could read anyway. A run's
``nodes/cluster.secret`` (owner-only, and not on the list), a key, a state
file are answered 404, left out of listings and out of the zip.
"""

from __future__ import annotations

import stat
from pathlib import Path

#: file name endings a reader of results needs: reports and plots, histories,
#: verdicts and settings, logs and traces, the nodes' data (Kafka's log
#: segments, indexes, snapshots, checkpoints) and campaign tables
SERVED_SUFFIXES = frozenset({
    ".html", ".png", ".svg", ".json", ".jsonl", ".edn", ".log", ".txt", ".yaml", ".yml", ".csv", ".md",
    ".index", ".timeindex", ".snapshot", ".checkpoint", ".parquet", ".properties",
})
#: whole names of the nodes' data files that have no ending
SERVED_NAMES = frozenset({
    "leader-epoch-checkpoint", "quorum-state", "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint",
})


def servable(path: Path) -> bool:
    """A regular file a reader of results may have: named as one (the
    allow-list above) and readable by every user of this machine (a file its
    owner closed to others stays closed: the site answers whoever reaches it)."""
    try:
        st = path.stat()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & stat.S_IROTH:
        return False
    return path.suffix in SERVED_SUFFIXES or path.name in SERVED_NAMES


class Refused(Exception):
    """A path outside the results directory, or malformed: answered 404 (the
    site does not say whether something exists outside its root)."""


def safe_path(root: Path, rel: str) -> Path:
    """``root / rel`` if it is under ``root`` once resolved; ``root`` must be
    resolved already. Raises :class:`Refused` otherwise, or if it does not
    exist."""
    parts = [p for p in rel.split("/") if p != ""]
    for p in parts:
        if p in (".", "..") or p.startswith(".") or "\\" in p or "\x00" in p:
            raise Refused(rel)
    candidate = root.joinpath(*parts)
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        raise Refused(rel) from None
    if real != root and not real.is_relative_to(root):
        raise Refused(rel)
    if not real.is_dir() and not servable(real):
        raise Refused(rel)
    return real


def rel_of(root: Path, path: Path) -> str:
    """The URL path of a file under ``root`` (forward slashes, no leading one)."""
    return path.relative_to(root).as_posix()
