"""latency-raw.png, latency-quantiles.png and rate.png with matplotlib (Agg:
no display, no gnuplot).

Every plot shades the intervals when faults were active, so a reader sees at
a glance whether latency spikes and throughput drops line up with the
nemesis. Large histories are thinned for the raw scatter (every ``fail`` and
``info`` kept, ``ok`` points sampled evenly down to ``MAX_POINTS`` per
series): a million dots draw as a solid band and take minutes.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from checkers.history.op import Op

from .faults import Interval, colour_of, fault_intervals
from .mpl import plt, transforms

__all__ = ["Interval", "fault_intervals", "pairs", "shade", "outside_legend", "gapped", "latency_plot",
           "latency_quantiles_plot", "rate_plot", "quantile_series"]


MAX_POINTS = 20_000
COLOURS = {"ok": "#2a9d43", "fail": "#d62828", "info": "#e9a100"}


def pairs(ops: list[Op]) -> list[tuple[Op, Op]]:
    """(invocation, completion) of every client operation that completed."""
    return _pairs(ops)


def _pairs(ops: list[Op]) -> list[tuple[Op, Op]]:
    pending: dict[Any, Op] = {}
    out = []
    for op in ops:
        if op.process == "nemesis":
            continue
        if op.type == "invoke":
            pending[op.process] = op
        else:
            inv = pending.pop(op.process, None)
            if inv is not None:
                out.append((inv, op))
    return out


def gapped(pts: list[tuple[float, float]], min_gap: float = 1.0) -> tuple[list[float], list[float]]:
    """xs, ys of a line with a NaN wherever the points are further apart
    than ten times their usual spacing (and ``min_gap`` seconds): a line
    stops where there was no data instead of bridging it."""
    if len(pts) < 3:
        return [p[0] for p in pts], [p[1] for p in pts]
    steps = sorted(b[0] - a[0] for a, b in zip(pts, pts[1:]))
    gap = max(min_gap, 10 * steps[len(steps) // 2])
    xs, ys = [pts[0][0]], [pts[0][1]]
    for a, b in zip(pts, pts[1:]):
        if b[0] - a[0] > gap:
            xs.append((a[0] + b[0]) / 2)
            ys.append(float("nan"))
        xs.append(b[0])
        ys.append(b[1])
    return xs, ys


def outside_legend(ax: Any, **kw: Any) -> None:
    """The legend right of the axes, where it hides no data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7.5, frameon=False, borderaxespad=0, **kw)


def shade(ax: Any, intervals: list[Interval], end: float, labels: bool = True) -> None:
    """Fault intervals as coloured bands behind a time-series plot."""
    _shade(ax, intervals, end, labels)


def _lanes(intervals: list[Interval]) -> list[int]:
    """A label row for each interval, so overlapping faults' labels do not
    sit on one another (at most four rows; later ones share the last)."""
    ends: list[float] = []
    out = []
    for iv in intervals:
        stop = iv.start if iv.stop is None else iv.stop
        lane = next((i for i, e in enumerate(ends) if e <= iv.start), len(ends))
        if lane == len(ends):
            ends.append(stop)
        ends[lane] = float("inf") if iv.stop is None else stop
        out.append(min(lane, 3))
    return out


def _shade(ax: Any, intervals: list[Interval], end: float, labels: bool = True) -> None:
    """Each fault a band in its kind's colour (the same in every run), its
    targets written at the top; a skipped fault a dashed line, not a band."""
    trans = transforms.blended_transform_factory(ax.transData, ax.transAxes)
    labelled: set[str] = set()
    for iv, lane in zip(intervals, _lanes(intervals)):
        c = colour_of(iv.kind)
        if iv.skipped:
            ax.axvline(iv.start, color=c, lw=1.2, ls=(0, (2, 2)), alpha=0.9,
                       label="fault skipped (dashed)" if "skipped" not in labelled else None)
            labelled.add("skipped")
            continue
        stop = iv.stop if iv.stop is not None else end
        ax.axvspan(iv.start, stop, color=c, alpha=0.35, lw=0, label=iv.kind if iv.kind not in labelled else None)
        labelled.add(iv.kind)
        if labels and iv.targets:
            ax.text(iv.start, 0.985 - 0.075 * lane, f" {iv.targets}", transform=trans, fontsize=6.5, ha="left",
                    va="top", color="#333", clip_on=True)


def latency_plot(ops: list[Op], intervals: list[Interval], path: Path,
                 prs: list[tuple[Op, Op]] | None = None) -> None:
    pairs = _pairs(ops) if prs is None else prs
    end = max((o.time for o in ops), default=0) / 1e9
    fig, ax = plt.subplots(figsize=(11, 4.2), dpi=100)
    _shade(ax, intervals, end)
    markers = {"send": "o", "poll": "^"}
    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for inv, comp in pairs:
        lat_ms = max((comp.time - inv.time) / 1e6, 0.01)
        xs, ys = groups[(inv.f, comp.type)]
        xs.append(inv.time / 1e9)
        ys.append(lat_ms)
    thinned = False
    for (f, t), (xs, ys) in sorted(groups.items()):
        if t == "ok" and len(xs) > MAX_POINTS:
            step = len(xs) / MAX_POINTS
            keep = [int(i * step) for i in range(MAX_POINTS)]
            xs, ys = [xs[i] for i in keep], [ys[i] for i in keep]
            thinned = True
        ax.scatter(xs, ys, s=6, c=COLOURS.get(t, "#555"), marker=markers.get(f, "s"), label=f"{f} {t}", alpha=0.7, lw=0)
    ax.set_yscale("log")
    title = "latency per operation" + (f" (ok points sampled to {MAX_POINTS} per series)" if thinned else "")
    _finish(fig, ax, path, title, "latency (ms)", end, bool(groups or intervals))


def quantile_series(pairs: list[tuple[Op, Op]], buckets: int = 120) -> dict[str, dict[str, list[float]]]:
    """Per f: the time buckets' middle (s) and p50/p95/p99/max latency (ms)
    of the ok operations invoked in them. An empty bucket between two full
    ones is one NaN point, so a line stops there instead of bridging a
    stretch with no data."""
    end = max((c.time for _, c in pairs), default=0) / 1e9
    width = max(end / buckets, 0.001)
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for inv, comp in pairs:
        if comp.type == "ok":
            by[inv.f][int(inv.time / 1e9 / width)].append(max((comp.time - inv.time) / 1e6, 0.01))
    out: dict[str, dict[str, list[float]]] = {}
    for f, bs in by.items():
        s: dict[str, list[float]] = {"t": [], "p50": [], "p95": [], "p99": [], "max": []}
        prev = None
        for b in sorted(bs):
            if prev is not None and b > prev + 1:
                s["t"].append((prev + 1.5) * width)
                for name in ("p50", "p95", "p99", "max"):
                    s[name].append(float("nan"))
            prev = b
            xs = sorted(bs[b])
            s["t"].append((b + 0.5) * width)
            for q, name in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99"), (1.0, "max")):
                s[name].append(xs[min(len(xs) - 1, int(q * len(xs)))])
        out[f] = s
    return out


def latency_quantiles_plot(ops: list[Op], intervals: list[Interval], path: Path,
                           prs: list[tuple[Op, Op]] | None = None) -> None:
    """Jepsen's latency-quantiles: p50, p95, p99 and max per time bucket, one
    colour per function, the quantiles as line styles."""
    series = quantile_series(_pairs(ops) if prs is None else prs)
    end = max((o.time for o in ops), default=0) / 1e9
    fig, ax = plt.subplots(figsize=(11, 4.0), dpi=100)
    _shade(ax, intervals, end)
    colours = {"send": "#1f5fbf", "poll": "#8a3ffc"}
    styles = {"p50": "-", "p95": "--", "p99": "-.", "max": ":"}
    for f, s in sorted(series.items()):
        for q, ls in styles.items():
            ax.plot(s["t"], s[q], ls, color=colours.get(f, "#555"), lw=1.3 if q == "p50" else 1.0,
                    label=f"{f} {q}")
    ax.set_yscale("log")
    _finish(fig, ax, path, "latency quantiles of ok operations", "latency (ms)", end, bool(series or intervals))


#: a history's span sets the bucket count; past this many the buckets widen
#: (a hostile 10^16 ns timestamp must not ask for 10^7 buckets per series)
MAX_BUCKETS = 2000


def rate_plot(ops: list[Op], intervals: list[Interval], path: Path, bucket: float = 1.0) -> None:
    end = max(max((o.time for o in ops), default=0) / 1e9, 0.0)
    bucket = max(bucket, end / MAX_BUCKETS)
    n = min(int(end / bucket) + 1, MAX_BUCKETS + 1)
    series: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * n)
    for op in ops:
        if op.process == "nemesis" or op.type == "invoke":
            continue
        series[(op.f, op.type)][min(max(int(op.time / 1e9 / bucket), 0), n - 1)] += 1
    fig, ax = plt.subplots(figsize=(11, 3.6), dpi=100)
    _shade(ax, intervals, end)
    xs = [i * bucket for i in range(n)]
    styles = {"send": "-", "poll": "--"}
    for (f, t), ys in sorted(series.items()):
        ax.plot(xs, [y / bucket for y in ys], styles.get(f, ":"), color=COLOURS.get(t, "#555"), label=f"{f} {t}", lw=1.2)
    _finish(fig, ax, path, "throughput", "completions / s", end, bool(series or intervals))


def _finish(fig: Any, ax: Any, path: Path, title: str, ylabel: str, end: float, legend: bool) -> None:
    """The layout both time-series plots share: time axis from 0, legend
    top left, saved and closed (Agg figures are not garbage-collected)."""
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_xlim(0, max(end, 1))
    if legend:
        outside_legend(ax)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
