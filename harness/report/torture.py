"""The page of a torture run (``kraftwerk torture``), beside its JUnit
file: each expectation, its seeds, its verdict (ok, surprise, undecided)
and each failing run linked with the command that replays it, so a
nightly job's result is read in a browser, not only in a CI's test tab."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .render import env


def render_torture(page: str | Path, expectations: list[dict[str, Any]], junit: str | Path | None = None) -> Path:
    """Write the page at ``page``. Each expectation: name, expect, runtime,
    within, settings (text), seeds_run, state (ok | surprise | undecided),
    errors, unknown, and invalid: [{seed, run_dir, replay}]; run links are
    made relative to the page."""
    page = Path(page)
    base = page.parent.resolve()
    rows = []
    for e in expectations:
        invalid = [{**r, "href": os.path.relpath(Path(r["run_dir"]).resolve() / "index.html", base)}
                   for r in e.get("invalid") or []]
        rows.append({**e, "invalid": invalid})
    html = env().get_template("torture.html.j2").render(
        expectations=rows, surprises=sum(1 for e in rows if e["state"] == "surprise"),
        undecided=sum(1 for e in rows if e["state"] == "undecided"),
        seeds=sum(int(e.get("seeds_run") or 0) for e in rows),
        seconds=sum(float(e.get("seconds") or 0) for e in rows),
        junit=os.path.relpath(Path(junit).resolve(), base) if junit else None)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(html, encoding="utf-8")
    return page
