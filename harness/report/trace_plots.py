"""Plots of the replication protocol's state over the run, from the nodes'
traces (:mod:`harness.report.traces`), one panel per partition, faults
shaded as on every other plot:

- ``hw-leo.png``: each replica's high watermark (solid) and log end offset
  (dotted), truncations marked where they cut;
- ``isr-leader.png``: ISR size and leader per partition, elections as
  vertical lines coloured by kind (an unclean one red), brokers fenced and
  unfenced as triangles along the top;
- ``lost-writes.png``: each lost acknowledged write placed at its offset on
  its partition's timeline, among the writes that survived, with the
  truncations that cut the log below them.

With many partitions the panels are the ``MAX_PANELS`` most eventful
(elections, truncations, lost writes), and the page says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.history.op import Op

from .mpl import plt
from .plots import Interval, outside_legend, shade
from .traces import TraceView

MAX_PANELS = 6
NODE_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f"]
ELECTION_COLOURS = {"clean": "#6c757d", "elr": "#7b2cbf", "unclean": "#d00000", "recovery": "#e85d04",
                    "last-known-leader": "#b5179e"}


def panels(view: TraceView, lost_tps: set[str]) -> tuple[list[str], int]:
    """The partitions to draw (most eventful first, then in order) and how
    many were left out."""
    tps = view.partitions
    if len(tps) <= MAX_PANELS:
        return tps, 0
    score = {tp: 0 for tp in tps}
    for e in view.elections:
        score[e["tp"]] = score.get(e["tp"], 0) + 1
    for tr in view.truncations:
        score[tr["tp"]] = score.get(tr["tp"], 0) + 2
    for tp in lost_tps:
        score[tp] = score.get(tp, 0) + 100
    chosen = sorted(tps, key=lambda tp: -score.get(tp, 0))[:MAX_PANELS]
    return sorted(chosen, key=tps.index), len(tps) - MAX_PANELS


def _node_colour(nodes: list[Any]) -> dict[Any, str]:
    return {n: NODE_COLOURS[i % len(NODE_COLOURS)] for i, n in enumerate(sorted(nodes, key=str))}


def _axes(n: int, height: float = 2.3) -> tuple[Any, list[Any]]:
    fig, axes = plt.subplots(n, 1, figsize=(11, 0.8 + height * n), dpi=100, sharex=True, squeeze=False)
    return fig, [a[0] for a in axes]


def _save(fig: Any, axes: list[Any], path: Path, end: float, title: str) -> None:
    axes[-1].set_xlabel("time (s)")
    axes[-1].set_xlim(0, max(end, 1))
    axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def _step(ax: Any, pts: list[tuple[float, float]], end: float, **kw: Any) -> None:
    if not pts:
        return
    xs = [p[0] for p in pts] + [end]
    ys = [p[1] for p in pts] + [pts[-1][1]]
    ax.step(xs, ys, where="post", **kw)


def hw_leo_plot(view: TraceView, tps: list[str], intervals: list[Interval], end: float, path: Path) -> None:
    nodes = sorted({n for _, n in view.hw} | {n for _, n in view.leo}, key=str)
    colour = _node_colour(nodes)
    fig, axes = _axes(len(tps))
    for ax, tp in zip(axes, tps):
        shade(ax, intervals, end)
        for n in nodes:
            _step(ax, view.hw.get((tp, n), []), end, color=colour[n], lw=1.4, label=f"HW {n}")
            _step(ax, view.leo.get((tp, n), []), end, color=colour[n], lw=1.0, ls=":", label=f"LEO {n}")
        cuts = [tr for tr in view.truncations if tr["tp"] == tp and isinstance(tr["to"], int)]
        if cuts:
            ax.scatter([c["t"] for c in cuts], [c["to"] for c in cuts], marker="v", s=36, c="#d00000",
                       zorder=5, label="truncation")
        ax.set_ylabel(f"{tp}\noffset", fontsize=8)
    outside_legend(axes[0])
    _save(fig, axes, path, end, "high watermark (solid) and log end offset (dotted) per replica")


def isr_leader_plot(view: TraceView, tps: list[str], intervals: list[Interval], end: float, path: Path) -> None:
    fig, axes = _axes(len(tps), height=2.0)
    brokers = sorted({e["leader"] for es in view.meta.values() for e in es if isinstance(e.get("leader"), int)
                      and e["leader"] >= 0}, key=str)
    for ax, tp in zip(axes, tps):
        shade(ax, intervals, end)
        entries = view.meta.get(tp, [])
        _step(ax, [(e["t"], len(e["isr"])) for e in entries], end, color="#1d2330", lw=1.6, label="ISR size")
        ax.set_ylabel(f"{tp}\nISR size", fontsize=8)
        top = max([len(e["isr"]) for e in entries] + [3])
        ax.set_ylim(-0.3, top + 0.9)
        led = ax.twinx()
        _step(led, [(e["t"], e["leader"] if isinstance(e["leader"], int) else -1) for e in entries], end,
              color="#e85d04", lw=1.2, ls="--", label="leader")
        led.set_ylabel("leader (-1: none)", fontsize=8, color="#e85d04")
        led.set_yticks([-1] + [b for b in brokers if isinstance(b, int)])
        led.tick_params(axis="y", labelsize=7, colors="#e85d04")
        for el in (e for e in view.elections if e["tp"] == tp):
            c = ELECTION_COLOURS.get(el["kind"], "#444")
            ax.axvline(el["t"], color=c, lw=1.1 if el["kind"] == "clean" else 2.0, alpha=0.8)
            ax.text(el["t"], top + 0.55, f"{el['kind']}→{el['leader']}", fontsize=6.5, color=c, rotation=0,
                    ha="left", va="center", clip_on=True)
        for fe in view.fencing:
            ax.scatter([fe["t"]], [top + 0.1], marker="v" if fe["fenced"] else "^", s=28,
                       c="#d00000" if fe["fenced"] else "#2a9d43", zorder=5)
    handles = [plt.Line2D([], [], color="#1d2330", lw=1.6, label="ISR size"),
               plt.Line2D([], [], color="#e85d04", lw=1.2, ls="--", label="leader (right axis)")]
    handles += [plt.Line2D([], [], color=c, lw=2, label=f"{k} election") for k, c in ELECTION_COLOURS.items()
                if any(e["kind"] == k for e in view.elections)]
    handles += [plt.Line2D([], [], marker="v", ls="", color="#d00000", label="broker fenced"),
                plt.Line2D([], [], marker="^", ls="", color="#2a9d43", label="broker unfenced")]
    axes[0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.07, 1.0), fontsize=7.5, frameon=False,
                   borderaxespad=0)
    _save(fig, axes, path, end, "ISR size and leader per partition; elections and fencing marked")


def lost_writes_plot(ops: list[Op], lost: list[dict[str, Any]], view: TraceView | None, intervals: list[Interval],
                     end: float, path: Path) -> list[str]:
    """The partitions of the lost writes given (examples from results.json);
    returns the partitions drawn."""
    tps = sorted({str(x["key"]) for x in lost if x.get("key") is not None})[:MAX_PANELS]
    acked: dict[str, tuple[list[float], list[int]]] = {tp: ([], []) for tp in tps}
    for o in ops:
        if o.f != "send" or o.type != "ok" or not isinstance(o.value, list):
            continue
        for m in o.value:
            if (isinstance(m, list) and len(m) >= 3 and m[0] == "send" and m[1] in acked
                    and isinstance(m[2], list) and len(m[2]) == 2 and isinstance(m[2][0], int)):
                acked[m[1]][0].append(o.time / 1e9)
                acked[m[1]][1].append(m[2][0])
    by_index = {o.index: o for o in ops}
    fig, axes = _axes(max(len(tps), 1), height=2.6)
    for ax, tp in zip(axes, tps):
        shade(ax, intervals, end)
        xs, ys = acked[tp]
        ax.scatter(xs, ys, s=4, c="#9aa5b1", lw=0, label="acknowledged")
        pts = [(by_index[x["op"]].time / 1e9 if x.get("op") in by_index else None, x.get("offset"))
               for x in lost if str(x.get("key")) == tp]
        pts = [(t, off) for t, off in pts if t is not None and isinstance(off, int)]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=46, marker="X", c="#d00000", zorder=6,
                   label="lost (acknowledged, then gone)")
        if view is not None:
            cuts = [tr for tr in view.truncations if tr["tp"] == tp and isinstance(tr["to"], int)]
            for c in cuts:
                hi = c["leo_before"] if isinstance(c.get("leo_before"), int) else c["to"]
                ax.vlines(c["t"], c["to"], hi, colors="#7b2cbf", lw=1.5)
            if cuts:
                ax.scatter([c["t"] for c in cuts], [c["to"] for c in cuts], marker="v", s=30, c="#7b2cbf",
                           zorder=5, label="truncation (LEO before → to)")
        ax.set_ylabel(f"{tp}\noffset", fontsize=8)
    outside_legend(axes[0])
    _save(fig, axes, path, end, "lost writes on their partition's offset timeline")
    return tps
