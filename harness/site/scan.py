"""Finding runs and campaigns under a results directory, cheaply enough to
do on every index request with thousands of runs.

A directory holding ``campaign.json`` is a campaign (the walk goes on inside
it: its runs are listed too, marked with the campaign); a directory holding
``test.json``, ``results.json`` or ``history.jsonl`` is a run (the walk does
not go inside). Hidden entries (``.state``) and symlinks (``latest``) are
skipped. Each directory's listing (its kind and its child directories) is
kept until its mtime changes: a new run directory changes its parent's, its
first file its own, a campaign's campaign.json the campaign's, so runs and
campaigns that appear while the site runs are found as what they are. Each
run's summary is kept until its results.json or summary.json changes, so a
repeated index costs two or three ``stat`` calls per run.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.rundir.summary import load_summary

RUN_MARKERS = ("test.json", "results.json", "history.jsonl")
CAMPAIGN = "campaign.json"
MAX_DEPTH = 6


@dataclass
class Listing:
    mtime_ns: int
    kind: str = "dir"                                    # this directory: "campaign", "run" or "dir"
    dirs: list[str] = field(default_factory=list)        # child directories (names), not hidden, no symlinks


def _kind(names: set[str]) -> str:
    """"campaign", "run" or "dir" for a directory holding ``names``."""
    if CAMPAIGN in names:
        return "campaign"
    if names.intersection(RUN_MARKERS):
        return "run"
    return "dir"


class Catalogue:
    """Thread-safe caches of directory listings and run summaries."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._listings: dict[str, Listing] = {}
        self._summaries: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}

    def _listing(self, path: str) -> Listing | None:
        """A directory's kind and child directories, kept until its mtime
        changes: a run directory's first file, or a campaign's
        campaign.json, changes it, so a directory made while the site runs
        is seen as what it became on the next request."""
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None
        cached = self._listings.get(path)
        if cached is not None and cached.mtime_ns == mtime:
            return cached
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            return None
        lst = Listing(mtime, _kind({e.name for e in entries}))
        for e in entries:
            if not e.name.startswith(".") and not e.is_symlink() and e.is_dir(follow_symlinks=False):
                lst.dirs.append(e.name)
        self._listings[path] = lst
        return lst

    def _summary(self, path: str) -> dict[str, Any]:
        key = []
        for name in ("results.json", "summary.json"):
            try:
                key.append(os.stat(os.path.join(path, name)).st_mtime_ns)
            except OSError:
                key.append(0)
        stamp = (key[0], key[1])
        cached = self._summaries.get(path)
        if cached is not None and cached[0] == stamp and key[0]:
            return cached[1]
        s = load_summary(path)
        if key[0]:  # a run without results.json is still going: look again next time
            try:
                stamp = (key[0], os.stat(os.path.join(path, "summary.json")).st_mtime_ns)
            except OSError:
                pass
            self._summaries[path] = (stamp, s)
        return s

    def scan(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(runs, campaigns): each a dict with ``path`` (relative, for URLs),
        runs also carrying their summary and ``campaign`` (the enclosing
        campaign's path, or None)."""
        runs: list[dict[str, Any]] = []
        campaigns: list[dict[str, Any]] = []
        with self._lock:
            self._walk(str(self.root), "", None, 0, runs, campaigns)
        return runs, campaigns

    def _walk(self, path: str, rel: str, campaign: str | None, depth: int,
              runs: list[dict[str, Any]], campaigns: list[dict[str, Any]]) -> None:
        lst = self._listing(path)
        if lst is None or depth > MAX_DEPTH:
            return
        for name in lst.dirs:
            child, r = os.path.join(path, name), f"{rel}{name}"
            kind = self._listing(child)
            if kind is None:
                continue
            if kind.kind == "run":
                runs.append({"path": r, "campaign": campaign, **self._summary(child)})
            elif kind.kind == "campaign":
                campaigns.append({"path": r, "dir": child})
                self._walk(child, r + "/", r, depth + 1, runs, campaigns)
            else:
                self._walk(child, r + "/", campaign, depth + 1, runs, campaigns)
