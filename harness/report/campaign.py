"""A campaign: a directory of runs plus ``campaign.json``, the matrix of
cells (one set of parameters each) with what their runs add up to.

The format (``kraftwerk-campaign/1``, docs/architecture.md "Campaigns") is
written by whatever runs the matrix; :func:`aggregate` builds it from run
directories' summaries (:mod:`harness.rundir.summary`), the way a campaign command
or a test does. The page shows the matrix as a heatmap of the lost-write rate
per cell, one panel per acks level that acknowledged anything, and a table
with the interval, the anomaly counts and the invalid runs first.
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

from checkers.durability import wilson_interval
from harness.rundir.summary import load_summary

from .mpl import colors, patches, plt
from .render import env as report_env


FORMAT = "kraftwerk-campaign/1"
CAMPAIGN = "campaign.json"


class CampaignError(ValueError):
    """campaign.json is missing, not JSON or not of this format: one line."""


def _cell_id(params: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items()) or "all"


def _new_cell(params: dict[str, Any], test_name: str | None = None) -> dict[str, Any]:
    cell: dict[str, Any] = {"id": _cell_id(params), "params": dict(params), "runs": 0, "valid": 0, "invalid": 0,
                            "unknown": 0, "durability": {}, "anomaly_runs": {}, "run_dirs": [], "invalid_runs": []}
    if test_name:
        cell["test_name"] = test_name
    return cell


def _add_run(cell: dict[str, Any], rel: str, s: dict[str, Any]) -> None:
    """One run's summary into its cell's counts."""
    cell["runs"] += 1
    cell["run_dirs"].append(rel)
    v = s.get("valid")
    cell["valid" if v is True else "invalid" if v is False else "unknown"] += 1
    if v is False:
        cell["invalid_runs"].append(rel)
    for t in s.get("anomaly_types") or []:
        cell["anomaly_runs"][t] = cell["anomaly_runs"].get(t, 0) + 1
    for mode, dd in (s.get("durability") or {}).items():
        acc = cell["durability"].setdefault(mode, {"acked": 0, "lost": 0})
        acc["acked"] += int(dd.get("acked") or 0)
        acc["lost"] += int(dd.get("lost") or 0)


def _close(cell: dict[str, Any]) -> dict[str, Any]:
    for acc in cell["durability"].values():
        n, k = acc["acked"], acc["lost"]
        acc["lost_rate"] = k / n if n else None
        acc["lost_rate_ci95"] = list(wilson_interval(k, n)) if n else None
    return cell


def aggregate(campaign_dir: str | Path, name: str, parameters: list[str],
              cells: list[tuple[dict[str, Any], list[str | Path]]], spec: Any = None) -> dict[str, Any]:
    """campaign.json from ``cells``: (parameters, run directories) pairs. Run
    directories are stored relative to the campaign directory; each run is
    read through its summary, so the runs may come from either runtime."""
    base = Path(campaign_dir).resolve()
    out_cells = []
    for params, dirs in cells:
        cell = _new_cell(params)
        for d in dirs:
            d = Path(d).resolve()
            _add_run(cell, os.path.relpath(d, base), load_summary(d))
        out_cells.append(_close(cell))
    return {"format": FORMAT, "name": name, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "parameters": list(parameters), "spec": spec, "cells": out_cells}


def planned(name: str, parameters: list[str], cells: list[tuple[dict[str, Any], str]], runs_per_cell: int,
            spec: Any = None) -> dict[str, Any]:
    """campaign.json as a campaign starts: its cells (parameters and the
    directory their runs go to) with nothing counted yet, ``state``
    running and the pid of the process running it. The site counts the
    runs on disk meanwhile; the campaign's end writes the summed file."""
    return {"format": FORMAT, "name": name, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "state": "running", "pid": os.getpid(), "planned_runs": runs_per_cell * len(cells),
            "parameters": list(parameters), "spec": spec,
            "cells": [_close(_new_cell(params, test_name)) for params, test_name in cells]}


def cell_dir(cell: dict[str, Any]) -> str | None:
    """The directory (under the campaign) a cell's runs go to: its test
    name, else the first part its recorded run directories share."""
    if cell.get("test_name"):
        return str(cell["test_name"])
    firsts = {str(r).split("/", 1)[0] for r in cell.get("run_dirs") or []}
    return firsts.pop() if len(firsts) == 1 else None


def live(campaign: dict[str, Any], summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The campaign as its runs on disk say now: each cell's counts summed
    from ``summaries`` (run path relative to the campaign directory ->
    summary) of the runs under its directory. A cell whose directory is
    not known keeps its recorded counts."""
    cells = []
    for c in campaign["cells"]:
        d = cell_dir(c)
        if d is None:
            cells.append(c)
            continue
        cell = _new_cell(c.get("params") or {}, c.get("test_name"))
        for rel in sorted(r for r in summaries if r.startswith(d + "/")):
            _add_run(cell, rel, summaries[rel])
        cells.append(_close(cell))
    return {**campaign, "cells": cells}


def state(campaign: dict[str, Any]) -> str:
    """``done``; ``running`` while the process that started it lives;
    ``stopped`` when it went away before summing up."""
    if campaign.get("state") != "running":
        return "done"
    pid = campaign.get("pid")
    try:
        os.kill(int(pid), 0)
    except (TypeError, ValueError, ProcessLookupError):
        return "stopped"
    except PermissionError:
        pass  # alive, another user's
    return "running"


def write_campaign(campaign_dir: str | Path, campaign: dict[str, Any]) -> Path:
    path = Path(campaign_dir) / CAMPAIGN
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(campaign, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_campaign(campaign_dir: str | Path) -> dict[str, Any]:
    path = Path(campaign_dir) / CAMPAIGN
    try:
        c = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CampaignError(f"{path}: cannot read: {e.strerror}") from None
    except ValueError as e:
        raise CampaignError(f"{path}: not JSON: {e}") from None
    if not isinstance(c, dict) or c.get("format") != FORMAT or not isinstance(c.get("cells"), list):
        raise CampaignError(f"{path}: not a {FORMAT} file")
    c.setdefault("parameters", [])
    c["cells"] = [x for x in c["cells"] if isinstance(x, dict)]
    return c


def acks_levels(campaign: dict[str, Any]) -> list[str]:
    """Acks levels some cell acknowledged writes at; acks=all first."""
    levels = {m for c in campaign["cells"] for m, d in (c.get("durability") or {}).items()
              if isinstance(d, dict) and d.get("acked")}
    return sorted(levels, key=lambda m: (m != "acks=all", m))


def _grid(campaign: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], dict[str, Any]]]:
    """Rows are the combinations of every parameter but the last, columns
    the last parameter's values (in the order the cells first use them)."""
    params = [str(p) for p in campaign.get("parameters") or []]
    rows: list[str] = []
    cols: list[str] = []
    at: dict[tuple[str, str], dict[str, Any]] = {}
    for c in campaign["cells"]:
        p = c.get("params") or {}
        col = str(p.get(params[-1], "")) if params else "all"
        row = ", ".join(f"{k}={p.get(k)}" for k in params[:-1]) or (f"{params[-1]}" if params else "campaign")
        if row not in rows:
            rows.append(row)
        if col not in cols:
            cols.append(col)
        at[(row, col)] = c
    return rows, cols, at


def heatmap_png(campaign: dict[str, Any]) -> bytes:
    """The lost-write rate per cell, one panel per acks level; each cell
    reads ``lost/acked`` and its rate, invalid runs counted under it; a cell
    that acknowledged nothing at a level is grey."""
    rows, cols, at = _grid(campaign)
    levels = acks_levels(campaign) or ["acks=all"]
    w = max(5.5, 3.2 + 1.9 * len(cols))
    h = max(2.8, 1.5 + 0.95 * len(rows))
    fig, axes = plt.subplots(1, len(levels), figsize=(w * len(levels), h), dpi=100, squeeze=False)
    rates = [d.get("lost_rate") for c in campaign["cells"] for d in (c.get("durability") or {}).values()
             if isinstance(d, dict) and isinstance(d.get("lost_rate"), (int, float))]
    vmax = max([r for r in rates if r] or [0.01])
    norm = colors.PowerNorm(0.5, vmin=0, vmax=vmax)
    cmap = plt.get_cmap("Reds").with_extremes(bad="#e6e6e6")
    for ax, level in zip(axes[0], levels):
        grid = [[float("nan")] * len(cols) for _ in rows]
        for (r, c), cell in at.items():
            d = (cell.get("durability") or {}).get(level) or {}
            if d.get("acked"):
                grid[rows.index(r)][cols.index(c)] = float(d.get("lost_rate") or 0.0)
        im = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
        for (r, c), cell in at.items():
            d = (cell.get("durability") or {}).get(level) or {}
            i, j = rows.index(r), cols.index(c)
            if d.get("acked"):
                rate = float(d.get("lost_rate") or 0.0)
                text = f"{d.get('lost', 0)}/{d['acked']}\n{rate:.2%}"
                dark = norm(rate) > 0.55
            else:
                text, dark = "nothing\nacked", False
            if cell.get("invalid"):
                text += f"\n{cell['invalid']}/{cell.get('runs')} invalid"
                # an invalid cell is framed whatever its rate: 0% lost can still hide other anomalies
                ax.add_patch(patches.Rectangle((j - 0.47, i - 0.47), 0.94, 0.94, fill=False, ec="#8a1020", lw=3))
            ax.text(j, i, text, ha="center", va="center", fontsize=9.5, color="white" if dark else "#222")
        ax.set_xticks(range(len(cols)), [_plain(c) for c in cols], fontsize=9)
        ax.set_yticks(range(len(rows)), [_plain(r).replace(", ", "\n") for r in rows], fontsize=9)
        params = campaign.get("parameters") or []
        ax.set_xlabel(_plain(str(params[-1])) if params else "")
        ax.set_title(f"lost {level} writes / acknowledged (red frame: invalid runs)", fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, format=lambda x, _: f"{x:.1%}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _plain(s: str) -> str:
    """A label matplotlib draws as typed: ``$`` would start mathtext."""
    return s.replace("$", r"\$")


def _pct(x: Any) -> str:
    return f"{x:.3%}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def campaign_context(campaign: dict[str, Any]) -> dict[str, Any]:
    """The campaign page's table: cells with invalid runs first, then by
    acks=all lost-write rate, highest first."""
    levels = acks_levels(campaign)
    rows = []
    for c in campaign["cells"]:
        dur = c.get("durability") or {}
        per = []
        for level in levels:
            d = dur.get(level) or {}
            ci = d.get("lost_rate_ci95")
            per.append({"acked": d.get("acked", 0), "lost": d.get("lost", 0), "rate": _pct(d.get("lost_rate")),
                        "ci": f"{_pct(ci[0])} – {_pct(ci[1])}" if isinstance(ci, list) and len(ci) == 2 else ""})
        rate = (dur.get("acks=all") or {}).get("lost_rate") or 0.0
        rows.append({"id": str(c.get("id", "")), "params": [(str(k), str(v)) for k, v in (c.get("params") or {}).items()],
                     "runs": c.get("runs", 0), "valid": c.get("valid", 0), "invalid": c.get("invalid", 0),
                     "unknown": c.get("unknown", 0), "per": per,
                     "anomalies": sorted((str(k), v) for k, v in (c.get("anomaly_runs") or {}).items()),
                     "invalid_runs": [str(x) for x in c.get("invalid_runs") or []],
                     "run_dirs": [str(x) for x in c.get("run_dirs") or []],
                     "_key": (-(c.get("invalid") or 0), -float(rate))})
    rows.sort(key=lambda r: r["_key"])
    totals = {"cells": len(rows), "runs": sum(r["runs"] for r in rows),
              "invalid": sum(r["invalid"] for r in rows), "unknown": sum(r["unknown"] for r in rows)}
    return {"name": str(campaign.get("name", "")), "created": str(campaign.get("created", "")),
            "parameters": [str(p) for p in campaign.get("parameters") or []], "levels": levels,
            "cells": rows, "totals": totals, "state": state(campaign),
            "planned_runs": campaign.get("planned_runs")}


def render_campaign(campaign_dir: str | Path, env: Any = None) -> Path:
    """Write the campaign's static ``index.html`` and ``heatmap.png``."""
    d = Path(campaign_dir)
    c = load_campaign(d)
    (d / "heatmap.png").write_bytes(heatmap_png(c))
    html = (env or report_env()).get_template("campaign.html.j2").render(
        heatmap="heatmap.png", run_href=lambda rel: f"{rel}/index.html", **campaign_context(c))
    (d / "index.html").write_text(html, encoding="utf-8")
    return d / "index.html"
