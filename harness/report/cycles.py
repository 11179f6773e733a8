"""A G0 / G1c anomaly (and their -process / -realtime forms) drawn as its
cycle, each edge explained from the operations themselves.

The checker names a cycle as ``steps`` of ``{from, to, type, key}``
(``checkers/queue/graph.py``); the report looks each operation up in the
history and says why the edge holds: ``ww`` (both wrote the key, in this
log order), ``wr`` (the second read the first's write), ``rw`` (the first
read the key below the second's write), ``process`` (same process, one
after the other), ``realtime`` (one completed before the other began).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from checkers.history.op import Op

from .diagnostics import _reads, _sends
from .mpl import patches, plt

CYCLE_PREFIXES = ("G0", "G1c")
MAX_CYCLES = 4
EDGE_COLOURS = {"ww": "#1f5fbf", "wr": "#2a9d43", "rw": "#e85d04", "process": "#7b2cbf", "realtime": "#d00000"}


def _v(x: Any) -> str:
    s = x if isinstance(x, str) else json.dumps(x, default=str)
    return s if len(s) <= 40 else s[:40] + "…"


class OpIndex:
    """Completions by index, with their invocation's time."""

    def __init__(self, ops: list[Op]) -> None:
        self.by_index = {o.index: o for o in ops}
        self.invoked: dict[int, int] = {}
        pending: dict[Any, Op] = {}
        for o in ops:
            if o.type == "invoke":
                pending[o.process] = o
            elif o.process in pending:
                self.invoked[o.index] = pending.pop(o.process).time

    def op(self, i: int) -> Op | None:
        return self.by_index.get(i)

    def label(self, i: int) -> str:
        o = self.op(i)
        if o is None:
            return f"op {i}"
        parts = [f"{_v(v)}→{k}" + (f"@{off}" if off is not None else "") for k, v, off in _sends(o.value)]
        reads = _reads(o.value)
        parts += [f"read {k}≤{max(off for off, _ in r)}" for k, r in reads.items() if r]
        return f"op {i} · process {o.process}\n{o.f}\n" + "\n".join(parts[:3])


def explain(step: dict[str, Any], ix: OpIndex) -> str:
    a, b, typ, key = step.get("from"), step.get("to"), str(step.get("type")), step.get("key")
    oa, ob = ix.op(a) if isinstance(a, int) else None, ix.op(b) if isinstance(b, int) else None
    if oa is None or ob is None:
        return f"op {a} → op {b}: {typ}" + (f" on {key}" if key else "")
    sa = [(v, off) for k, v, off in _sends(oa.value) if k == key]
    sb = [(v, off) for k, v, off in _sends(ob.value) if k == key]
    if typ == "ww" and sa and sb:
        return (f"op {a} wrote {_v(sa[0][0])} to {key} at offset {sa[0][1]}, op {b} wrote {_v(sb[0][0])} at offset "
                f"{sb[0][1]}: {key}'s log puts op {a}'s write first")
    if typ == "wr" and sa:
        return f"op {b} read {_v(sa[0][0])} (offset {sa[0][1]}) from {key}, which op {a} wrote"
    if typ == "rw" and sb:
        ra = _reads(oa.value).get(str(key), [])
        upto = max((off for off, _ in ra), default=None)
        return (f"op {a} read {key} only up to offset {upto}, not op {b}'s write {_v(sb[0][0])} at offset "
                f"{sb[0][1]}: op {a} came first")
    if typ == "process":
        return f"ops {a} and {b} are both process {oa.process}'s; op {a} completed before op {b} was invoked"
    if typ == "realtime":
        tb = ix.invoked.get(b, ob.time)
        return f"op {a} completed at {oa.time / 1e9:.3f}s, before op {b} was invoked at {tb / 1e9:.3f}s"
    return f"op {a} → op {b}: {typ}" + (f" on {key}" if key else "")


def cycle_examples(result: dict[str, Any], bad: set[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The cycles the checkers found: those of types that fail the run
    first, allowed ones after."""
    out = []
    for t, exs in (result.get("anomalies") or {}).items():
        if not str(t).startswith(CYCLE_PREFIXES):
            continue
        for e in (exs if isinstance(exs, list) else []):
            if isinstance(e, dict) and isinstance(e.get("steps"), list) and e["steps"]:
                out.append((str(t), e))
    out.sort(key=lambda te: bad is not None and te[0] not in bad)
    return out[:MAX_CYCLES]


#: past this many operations a cycle is told as text only: a ring of 40
#: short labels is about 1,400 px wide at the sizes below (measured on the
#: rings of tests/report/test_cycles.py), wider than a page shows
MAX_DRAWN = 40
#: at most this many operations get the full label (process, sends, reads)
DETAILED = 6
INCH_PER_UNIT = 0.75


def _layout(n: int, detailed: bool) -> tuple[list[tuple[float, float]], float]:
    """Positions on a circle, clockwise from the top in cycle order, spaced
    so neighbours' labels never touch; and the circle's radius (units)."""
    spacing = 2.4 if detailed else 1.25
    r = max(1.3 if detailed else 1.0, n * spacing / (2 * math.pi))
    return [(r * math.cos(math.pi / 2 - 2 * math.pi * i / n), r * math.sin(math.pi / 2 - 2 * math.pi * i / n))
            for i in range(n)], r


def _short_label(ix: OpIndex, i: Any) -> str:
    o = ix.op(i) if isinstance(i, int) else None
    return f"op {i}" + (f"\np{o.process}" if o is not None else "")


def _edge(ax: Any, a: tuple[float, float], b: tuple[float, float], step: dict[str, Any], detailed: bool) -> None:
    """One edge: an arrow bent outward (arc3 puts its control point
    ``rad * (dy, -dx)`` off the chord's middle; negative is outward on a
    clockwise ring), its type and key just outside the ring."""
    (x0, y0), (x1, y1) = a, b
    c = EDGE_COLOURS.get(str(step.get("type")), "#444")
    node_pt = 44 if detailed else 20
    ax.add_patch(patches.FancyArrowPatch(a, b, connectionstyle="arc3,rad=-0.3", arrowstyle="-|>", mutation_scale=14,
                                         lw=1.8, color=c, shrinkA=node_pt, shrinkB=node_pt))
    dx, dy = x1 - x0, y1 - y0
    length = math.hypot(dx, dy) or 1.0
    away = 0.15 * length + (0.55 if detailed else 0.45)  # past the arc's apex, on the side it bends to
    lx, ly = (x0 + x1) / 2 - dy / length * away, (y0 + y1) / 2 + dx / length * away
    label = str(step.get("type")) + (f"\n{_v(step['key'])}" if step.get("key") else "")
    ax.text(lx, ly, label.replace("$", r"\$"), ha="center", va="center",
            fontsize=8.5 if detailed else 7.5, color=c, fontweight="bold")


def draw_cycle(name: str, example: dict[str, Any], ix: OpIndex, path: Path) -> None:
    """The cycle as a ring: each operation a box, each edge a curved arrow
    to the next, labelled outside the ring; sized to the cycle, so every
    edge shows (past ``DETAILED`` operations the boxes say only the op and
    its process: the steps beside the picture say the rest)."""
    steps = example["steps"]
    n = len(steps)
    detailed = n <= DETAILED
    pos, r = _layout(n, detailed)
    side = (2 * r + (4.2 if detailed else 2.4)) * INCH_PER_UNIT
    fig, ax = plt.subplots(figsize=(side, side + 0.4), dpi=100)
    for i, s in enumerate(steps):
        _edge(ax, pos[i], pos[(i + 1) % n], s, detailed)
    for i, s in enumerate(steps):
        text = ix.label(s["from"]) if detailed else _short_label(ix, s["from"])
        ax.text(*pos[i], text.replace("$", r"\$"), ha="center", va="center", fontsize=8 if detailed else 7.5,
                bbox={"boxstyle": "round,pad=0.35", "fc": "#f3f5f8", "ec": "#1d2330", "lw": 1.0})
    lim = r + (2.0 if detailed else 1.15)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"{name}: a cycle of {n} operations", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def render_cycles(result: dict[str, Any], ops: list[Op], run_dir: Path | None,
                  bad: set[str] | None = None) -> list[dict[str, Any]]:
    """cycle-<n>.png per cycle example (at most ``MAX_CYCLES``; none drawn
    without ``run_dir``, nor for a cycle past ``MAX_DRAWN`` operations: its
    steps are the picture) and the explained steps for the page."""
    ix = OpIndex(ops)
    out = []
    for n, (name, ex) in enumerate(cycle_examples(result, bad)):
        png = f"cycle-{n}.png" if run_dir is not None and len(ex["steps"]) <= MAX_DRAWN else None
        if png is not None and run_dir is not None:
            draw_cycle(name, ex, ix, run_dir / png)
        out.append({"type": name, "png": png, "size": len(ex["steps"]), "fails": bad is None or name in bad,
                    "steps": [{"from": s.get("from"), "to": s.get("to"), "type": str(s.get("type")),
                               "key": s.get("key"), "why": explain(s, ix)} for s in ex["steps"]]})
    return out
