"""Turning a URL path into a file under the results directory, or refusing.

The rule: the path's components are taken literally (no ``..``, no empty or
hidden components, no backslashes or NULs), and the *real* path, every
symlink followed, must still lie under the results directory's real path. So
``<out>/latest`` (a symlink to a run inside) works, and a symlink a node or
a user left pointing outside is refused like a ``../`` would be.
"""

from __future__ import annotations

from pathlib import Path


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
    return real


def rel_of(root: Path, path: Path) -> str:
    """The URL path of a file under ``root`` (forward slashes, no leading one)."""
    return path.relative_to(root).as_posix()
