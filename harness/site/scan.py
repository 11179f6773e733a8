"""Finding runs and campaigns under a results directory, cheaply enough to
do on every index request with thousands of runs.

A directory holding ``campaign.json`` is a campaign (the walk goes on inside
it: its runs are listed too, marked with the campaign); a directory holding
``test.json``, ``results.json`` or ``history.jsonl`` is a run (the walk does
not go inside). Hidden entries (``.state``) and symlinks (``latest``) are
skipped. Each plain directory's listing is kept until its mtime changes (a new
run directory changes its test directory's mtime), and each run's summary
until its results.json or summary.json changes, so a repeated index costs
one ``stat`` per run.
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
    runs: list[str] = field(default_factory=list)        # child run directories (names)
    campaigns: list[str] = field(default_factory=list)   # child campaign directories
    dirs: list[str] = field(default_factory=list)        # other child directories


def _classify(path: str) -> str:
    """"campaign", "run" or "dir" for one directory."""
    try:
        names = set(os.listdir(path))
    except OSError:
        return "dir"
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
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None
        cached = self._listings.get(path)
        if cached is not None and cached.mtime_ns == mtime:
            return cached
        lst = Listing(mtime)
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            return None
        for e in entries:
            if e.name.startswith(".") or e.is_symlink() or not e.is_dir(follow_symlinks=False):
                continue
            kind = _classify(e.path)
            getattr(lst, {"run": "runs", "campaign": "campaigns", "dir": "dirs"}[kind]).append(e.name)
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
        for name in lst.runs:
            r = f"{rel}{name}"
            runs.append({"path": r, "campaign": campaign, **self._summary(os.path.join(path, name))})
        for name in lst.campaigns:
            r = f"{rel}{name}"
            campaigns.append({"path": r, "dir": os.path.join(path, name)})
            self._walk(os.path.join(path, name), r + "/", r, depth + 1, runs, campaigns)
        for name in lst.dirs:
            self._walk(os.path.join(path, name), f"{rel}{name}/", campaign, depth + 1, runs, campaigns)
