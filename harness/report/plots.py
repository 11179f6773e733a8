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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.history.op import Op

from .mpl import plt


MAX_POINTS = 20_000
COLOURS = {"ok": "#2a9d43", "fail": "#d62828", "info": "#e9a100"}
FAULT_COLOURS = ["#8ecae6", "#cdb4db", "#ffc8dd", "#bde0fe", "#fde68a", "#c7f9cc", "#e5e5e5", "#f4a261"]


@dataclass
class Interval:
    fault: str
    start: float  # seconds
    stop: float | None
    value: Any


def fault_intervals(ops: list[Op]) -> list[Interval]:
    """start-<fault> completion .. matching stop-<fault> completion (Jepsen's
    nemesis intervals); an unstopped fault runs to the end of the history."""
    open_: dict[str, Interval] = {}
    out: list[Interval] = []

    def event(op: Op) -> None:
        t = op.time / 1e9
        if op.f.startswith("start-"):
            fault = op.f[len("start-"):]
            prev = open_.get(fault)
            if prev is not None:  # a fault restarted with new targets: one interval each
                prev.stop = t
            iv = Interval(fault, t, None, op.value)
            open_[fault] = iv
            out.append(iv)
        elif op.f.startswith("stop-"):
            iv = open_.pop(op.f[len("stop-"):], None)
            if iv is not None:
                iv.stop = t

    # A nemesis op is normally recorded twice (invocation, completion), both
    # "info" and adjacent among nemesis ops (one nemesis process); a runtime
    # that records a fault once is handled too.
    last: Op | None = None
    for op in ops:
        if op.process != "nemesis":
            continue
        if last is not None and last.f == op.f and op.type != "invoke":
            event(op)
            last = None
            continue
        if last is not None:
            event(last)
        last = op
    if last is not None:
        event(last)
    return out


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


def outside_legend(ax: Any, **kw: Any) -> None:
    """The legend right of the axes, where it hides no data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7.5, frameon=False, borderaxespad=0, **kw)


def shade(ax: Any, intervals: list[Interval], end: float) -> None:
    """Fault intervals as coloured bands behind a time-series plot."""
    _shade(ax, intervals, end)


def _shade(ax: Any, intervals: list[Interval], end: float) -> None:
    faults = sorted({iv.fault for iv in intervals})
    colour = {f: FAULT_COLOURS[i % len(FAULT_COLOURS)] for i, f in enumerate(faults)}
    labelled: set[str] = set()
    for iv in intervals:
        stop = iv.stop if iv.stop is not None else end
        ax.axvspan(iv.start, stop, color=colour[iv.fault], alpha=0.35, lw=0,
                   label=iv.fault if iv.fault not in labelled else None)
        labelled.add(iv.fault)


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
    """Per f: the time buckets' start (s) and p50/p95/p99/max latency (ms)
    of the ok operations invoked in them (empty buckets left out)."""
    end = max((c.time for _, c in pairs), default=0) / 1e9
    width = max(end / buckets, 0.001)
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for inv, comp in pairs:
        if comp.type == "ok":
            by[inv.f][int(inv.time / 1e9 / width)].append(max((comp.time - inv.time) / 1e6, 0.01))
    out: dict[str, dict[str, list[float]]] = {}
    for f, bs in by.items():
        s: dict[str, list[float]] = {"t": [], "p50": [], "p95": [], "p99": [], "max": []}
        for b in sorted(bs):
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
