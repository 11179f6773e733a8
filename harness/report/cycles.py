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
from pathlib import Path
from typing import Any

from checkers.history.op import Op

from .diagnostics import _reads, _sends
from .mpl import nx, patches, plt

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


def cycle_examples(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for t, exs in (result.get("anomalies") or {}).items():
        if not str(t).startswith(CYCLE_PREFIXES):
            continue
        for e in (exs if isinstance(exs, list) else []):
            if isinstance(e, dict) and isinstance(e.get("steps"), list) and e["steps"]:
                out.append((str(t), e))
    return out[:MAX_CYCLES]


def draw_cycle(name: str, example: dict[str, Any], ix: OpIndex, path: Path) -> None:
    steps = example["steps"]
    nodes = [s["from"] for s in steps]
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    pos = nx.circular_layout(g) if len(nodes) > 1 else {nodes[0]: (0.0, 0.0)}
    fig, ax = plt.subplots(figsize=(7.5, 5.2 if len(nodes) > 2 else 3.0), dpi=100)
    for s in steps:
        a, b = s["from"], s["to"]
        (x0, y0), (x1, y1) = pos[a], pos.get(b, pos[a])
        c = EDGE_COLOURS.get(str(s.get("type")), "#444")
        ax.add_patch(patches.FancyArrowPatch((x0, y0), (x1, y1), connectionstyle="arc3,rad=0.28", arrowstyle="-|>",
                                     mutation_scale=18, lw=2, color=c, shrinkA=38, shrinkB=38))
        # arc3's control point is rad * (dy, -dx) from the chord's middle;
        # the curve passes halfway there
        lx, ly = (x0 + x1) / 2 + 0.14 * (y1 - y0), (y0 + y1) / 2 - 0.14 * (x1 - x0)
        ax.text(lx, ly, str(s.get("type")) + (f"\n{s['key']}" if s.get("key") else ""), ha="center",
                va="center", fontsize=9, color=c, fontweight="bold",
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": c, "lw": 0.8})
    for n, (x, y) in pos.items():
        ax.text(x, y, ix.label(n).replace("$", r"\$"), ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round,pad=0.45", "fc": "#f3f5f8", "ec": "#1d2330", "lw": 1.2})
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.45, 1.45) if len(nodes) > 2 else ax.set_ylim(-0.7, 0.7)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"{name}: a cycle of {len(steps)} operations", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def render_cycles(result: dict[str, Any], ops: list[Op], run_dir: Path | None) -> list[dict[str, Any]]:
    """cycle-<n>.png per cycle example (at most ``MAX_CYCLES``; none drawn
    without ``run_dir``) and the explained steps for the page."""
    ix = OpIndex(ops)
    out = []
    for n, (name, ex) in enumerate(cycle_examples(result)):
        png = f"cycle-{n}.png"
        if run_dir is not None:
            draw_cycle(name, ex, ix, run_dir / png)
        out.append({"type": name, "png": png if run_dir is not None else None,
                    "steps": [{"from": s.get("from"), "to": s.get("to"), "type": str(s.get("type")),
                               "key": s.get("key"), "why": explain(s, ix)} for s in ex["steps"]]})
    return out
