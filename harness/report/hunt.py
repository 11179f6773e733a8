"""The page of a hunt (``kraftwerk hunt``, ``harness.search.hunt``): how
far the search on the model went, and each schedule replayed on the real
db beside the model's run of it, classified, with its schedule file and
the command that replays it, so a finding is read and reproduced from a
browser."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .render import env


def _href(run_dir: Any, base: Path) -> str | None:
    if not run_dir:
        return None
    return os.path.relpath(Path(run_dir).resolve() / "index.html", base)


def _loss(side: dict[str, Any]) -> str:
    rows = side.get("durability") or {}
    return ", ".join(f"{m} {d.get('lost')}/{d.get('acked')}" for m, d in sorted(rows.items())
                     if isinstance(d, dict)) or "-"


def render_hunt(page: str | Path, state: dict[str, Any], classes: dict[str, int]) -> Path:
    """Write the page at ``page`` from a hunt's state; run links are made
    relative to the page."""
    page = Path(page)
    base = page.parent.resolve()
    rows = []
    for p in state.get("pairs") or []:
        rows.append({**p, "sim_href": _href(p["sim"].get("run_dir"), base),
                     "real_href": _href(p["real"].get("run_dir"), base),
                     "sim_loss": _loss(p["sim"]), "real_loss": _loss(p["real"]),
                     "schedule_href": os.path.relpath(Path(p["schedule_file"]).resolve(), base),
                     "disagree": [k for k, v in (p.get("agree") or {}).items() if not v]})
    order = {"both-invalid": 0, "real-only": 1, "model-only": 2, "unknown": 3, "both-valid": 4}
    rows.sort(key=lambda r: (order.get(r["class"], 9), r["id"]))
    html = env().get_template("hunt.html.j2").render(
        pairs=rows, classes=classes, phase=state.get("phase"), tried=state.get("tried", 0),
        states=len(state.get("seen") or ()), candidates=len(state.get("candidates") or ()),
        spent=float(state.get("spent_s") or 0), explore=float(state.get("explore_s") or 0),
        budget=float((state.get("settings") or {}).get("budget_s") or 0),
        db=((state.get("settings") or {}).get("real") or {}).get("db"),
        backend=((state.get("settings") or {}).get("real") or {}).get("backend"))
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(html, encoding="utf-8")
    return page
