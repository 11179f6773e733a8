"""timeline.html: a Jepsen-style timeline of a history.

One column per process (the nemesis first), time running downward, each
operation a box from its invocation to its completion, coloured by outcome
(ok / fail / info); the box's title carries f, value, error and latency. Fault
intervals are shaded across every column, so a reader sees which operations
ran under which fault.

The vertical axis is the history's event order, not wall-clock time (as in
Jepsen's timeline): a quiet second and a busy millisecond get the same room per
event, so concurrent operations stay distinguishable; a time gutter on the left
gives the wall-clock time of every few rows.

Large histories stay usable by rendering *segments*: the first
``head_events`` events, plus a window of ``window`` events either side of each
anomaly example's operations (op indices named in results.json), merged where
they overlap; what lies between is one "events omitted" line. Every rendered
operation has the anchor ``#op-<index>`` (invocation and completion index both
work), which the index page's anomaly table links to.
"""

from __future__ import annotations

import bisect
import json
from itertools import accumulate
from dataclasses import dataclass, field
from typing import Any, Iterable

from checkers.history.op import Op

from .faults import Interval, legend, targets_label

ROW_PX = 16          # height of one history event
COL_PX = 118         # width of one process column (narrower with many processes)
MIN_COL_PX = 56
PAGE_PX = 1500       # columns shrink to fit this width, down to MIN_COL_PX
GUTTER_PX = 72       # the time gutter on the left
HEAD_EVENTS = 3000   # events shown from the start of the history
WINDOW = 60          # events shown either side of an anomaly example op
MAX_WINDOWS = 60     # anomaly windows rendered at most
LABEL_CHARS = 24
TITLE_CHARS = 1500

# Keys under which results.json names op indices (checkers/queue, durability).
OP_KEYS = ("op", "ops", "writer", "cycle", "from", "to")


def example_ops(x: Any) -> list[int]:
    """Op indices named anywhere in one anomaly example, in order, unique."""
    out: list[int] = []

    def ints(v: Any) -> Iterable[int]:
        if isinstance(v, bool):
            return
        if isinstance(v, int):
            yield v
        elif isinstance(v, list):
            for e in v:
                if isinstance(e, int) and not isinstance(e, bool):
                    yield e

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, e in v.items():
                if k in OP_KEYS:
                    out.extend(ints(e))
                walk(e)
        elif isinstance(v, list):
            for e in v:
                walk(e)

    walk(x)
    seen: set[int] = set()
    return [i for i in out if i >= 0 and not (i in seen or seen.add(i))]


def _text(x: Any, limit: int) -> str:
    if x is None:
        return ""
    s = x if isinstance(x, str) else json.dumps(x, default=str, sort_keys=True)
    return s if len(s) <= limit else s[:limit] + " …"


@dataclass
class Box:
    """One operation: rows are history positions (0-based). Its label and
    title are made only when asked for: a long history renders a few
    thousand of its boxes, and formatting every one cost most of a 1M-op
    report's time."""

    process: Any
    start: int
    stop: int
    kind: str            # ok | fail | info | nemesis
    f: str
    inv: Op | None
    comp: Op | None
    anchors: list[int] = field(default_factory=list)

    @property
    def label(self) -> str:
        a = self.inv if self.inv is not None else self.comp
        assert a is not None
        return _label(a, self.comp)

    @property
    def title(self) -> str:
        return _title(self.inv, self.comp)


def _label(op: Op, comp: Op | None) -> str:
    v = (comp.value if comp is not None and comp.value is not None else op.value)
    if op.process == "nemesis" and isinstance(v, dict):  # the fault and its targets, not the whole map
        return f"{op.f} {targets_label(v, 40) or _text(v.get('fault'), 24)}".strip()
    if isinstance(v, list) and v and isinstance(v[0], list) and v[0]:
        mops = []
        for m in v:
            if m and m[0] == "send" and len(m) >= 3:
                # the value first (keys of real runs are long topic names): 17→p0@42
                done = isinstance(m[2], list) and len(m[2]) == 2
                val, off = (m[2][1], m[2][0]) if done else (m[2], None)
                part = str(m[1]).rsplit("-", 1)[-1]
                mops.append(f"{_text(val, 12)}→p{part}" + (f"@{off}" if off is not None else ""))
            elif m and m[0] == "poll" and len(m) >= 2 and isinstance(m[1], dict):
                mops.append(f"{sum(len(r) for r in m[1].values() if isinstance(r, list))} recs")
        acks = (op.extra or {}).get("acks")
        tag = f" a{acks}" if op.f == "send" and acks not in (None, "all") else ""  # weaker promise: say so
        return (f"{op.f} " + " ".join(mops) if mops else op.f) + tag
    return f"{op.f} {_text(v, LABEL_CHARS)}".strip()


def _title(inv: Op | None, comp: Op | None) -> str:
    ref = comp if comp is not None else inv
    assert ref is not None
    lines = [f"{ref.f}  process {ref.process}"]
    if inv is not None and comp is not None and inv is not comp:
        lines.append(f"ops {inv.index} → {comp.index}, latency {(comp.time - inv.time) / 1e6:.1f} ms, "
                     f"t={inv.time / 1e9:.3f}s")
    else:
        lines.append(f"op {ref.index}, t={ref.time / 1e9:.3f}s")
    lines.append(f"type: {comp.type if comp is not None else 'info (never completed)'}")
    if inv is not None and inv.value is not None and (comp is None or comp.value != inv.value):
        lines.append(f"invoke value: {_text(inv.value, TITLE_CHARS)}")
    if comp is not None and comp.value is not None:
        lines.append(f"value: {_text(comp.value, TITLE_CHARS)}")
    err = comp.error if comp is not None else None
    if err is not None:
        lines.append(f"error: {_text(err, TITLE_CHARS)}")
    for k, v in sorted((ref.extra or {}).items()):
        lines.append(f"{k}: {_text(v, 200)}")
    return "\n".join(lines)


def boxes(ops: list[Op]) -> list[Box]:
    """Pair each client invocation with its process's next completion; an
    invocation that never completed is ``info`` running to the history's end.
    Nemesis ops (all ``info``) pair with the next nemesis op of the same ``f``
    (invocation/completion as the runtime records them), else stand alone."""
    pos = {id(op): i for i, op in enumerate(ops)}
    end = len(ops) - 1
    out: list[Box] = []
    pending: dict[Any, Op] = {}
    last_nem: Op | None = None

    def add(inv: Op | None, comp: Op | None, kind: str) -> None:
        a = inv if inv is not None else comp
        assert a is not None
        start = pos[id(a)]
        stop = pos[id(comp)] if comp is not None else end
        anchors = [o.index for o in (inv, comp) if o is not None]
        out.append(Box(a.process, start, stop, kind, a.f, inv, comp,
                       sorted(set(anchors))))

    for op in ops:
        if op.process == "nemesis":
            if last_nem is not None and last_nem.f == op.f and op.type != "invoke":
                add(last_nem, op, "nemesis")
                last_nem = None
                continue
            if last_nem is not None:
                add(None, last_nem, "nemesis")
            last_nem = op
        elif op.type == "invoke":
            prev = pending.pop(op.process, None)
            if prev is not None:  # a second invocation: the first never completed
                add(prev, None, "info")
            pending[op.process] = op
        else:
            inv = pending.pop(op.process, None)
            add(inv, op, op.type if op.type in ("ok", "fail", "info") else "info")
    if last_nem is not None:
        add(None, last_nem, "nemesis")
    for inv in pending.values():
        add(inv, None, "info")
    return out


def segments(n: int, focus: list[int], head: int = HEAD_EVENTS, window: int = WINDOW,
             max_windows: int = MAX_WINDOWS) -> list[tuple[int, int]]:
    """Inclusive row ranges to render: the head plus a window around each
    focus row (the first ``max_windows`` of them), merged where they touch."""
    if n <= 0:
        return []
    spans = [(0, min(head, n) - 1)]
    for r in sorted(set(focus))[:max_windows]:
        if 0 <= r < n:
            spans.append((max(0, r - window), min(n - 1, r + window)))
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1] + 10:  # a tiny gap is not worth a break
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _boxes_by_segment(all_boxes: list[Box], segs: list[tuple[int, int]]) -> list[list[Box]]:
    """The boxes overlapping each segment, in box order, found by bisecting
    the segments (sorted, disjoint) rather than scanning every box per
    segment."""
    ends = [b for _, b in segs]
    out: list[list[Box]] = [[] for _ in segs]
    for bx in all_boxes:
        i = bisect.bisect_left(ends, bx.start)
        while i < len(segs) and segs[i][0] <= bx.stop:
            out[i].append(bx)
            i += 1
    return out


def _fault_rows(times: list[int], iv: Interval) -> tuple[int, int]:
    """History rows covered by a fault interval (given in seconds);
    ``times`` are the ops' times, in history order (never decreasing)."""
    start_ns = iv.start * 1e9
    stop_ns = float("inf") if iv.stop is None else iv.stop * 1e9
    lo = bisect.bisect_left(times, start_ns)
    hi = bisect.bisect_right(times, stop_ns) - 1
    return (lo, hi) if lo <= hi else (-1, -1)


def _process_order(ops: list[Op]) -> list[Any]:
    procs = {o.process for o in ops}
    clients = sorted((p for p in procs if p != "nemesis"), key=lambda p: (not isinstance(p, int), str(p) if not isinstance(p, int) else p))
    return (["nemesis"] if "nemesis" in procs else []) + clients


def timeline_context(ops: list[Op], intervals: list[Interval], focus_ops: list[int],
                     head: int = HEAD_EVENTS, window: int = WINDOW) -> dict[str, Any]:
    """Everything the template needs; positions are in pixels already."""
    row_of = {o.index: i for i, o in enumerate(ops)}
    focus_rows = [row_of[i] for i in focus_ops if i in row_of]
    segs = segments(len(ops), focus_rows, head, window)
    procs = _process_order(ops)
    col = {p: i for i, p in enumerate(procs)}
    col_px = max(MIN_COL_PX, min(COL_PX, PAGE_PX // max(len(procs), 1)))
    all_boxes = boxes(ops)
    times = list(accumulate((o.time for o in ops), max))  # never decreasing, for bisect
    # a skipped fault did nothing: no shading (the nemesis column's box says it was skipped)
    fault_rows = [(iv, *_fault_rows(times, iv)) for iv in intervals if not iv.skipped]
    focus_set = set(focus_ops)
    placed: set[int] = set()
    out_segs = []
    prev_end = -1
    in_seg = _boxes_by_segment(all_boxes, segs)
    for si, (a, b) in enumerate(segs):
        seg_boxes = []
        for bx in in_seg[si]:
            top, bot = max(bx.start, a), min(bx.stop, b)
            here = [i for i in bx.anchors if a <= row_of.get(i, -1) <= b and i not in placed]
            placed.update(here)
            seg_boxes.append({
                "top": (top - a) * ROW_PX + 1,
                "left": GUTTER_PX + col[bx.process] * col_px + 2,
                "height": max((bot - top + 1) * ROW_PX - 2, ROW_PX - 2),
                "kind": bx.kind, "label": bx.label, "title": bx.title,
                "id": f"op-{here[0]}" if here else None,
                "extra_ids": [f"op-{i}" for i in here[1:]],
                "focus": bool(focus_set.intersection(bx.anchors)),
                "clipped_top": bx.start < a, "clipped_bottom": bx.stop > b,
            })
        shades = []
        for iv, r0, r1 in fault_rows:
            if r0 < 0 or r1 < a or r0 > b:
                continue
            top, bot = max(r0, a), min(r1, b)
            shades.append({"top": (top - a) * ROW_PX, "height": (bot - top + 1) * ROW_PX,
                           "colour": iv.colour, "fault": f"{iv.kind} {iv.targets}".strip(),
                           "title": f"{iv.name} {iv.start:.3f} s – "
                                    f"{'end' if iv.stop is None else f'{iv.stop:.3f} s'}: {iv.targets}"})
        ticks = [{"top": (r - a) * ROW_PX, "t": f"{ops[r].time / 1e9:.3f}s", "row": ops[r].index}
                 for r in range(a, b + 1, 10)]
        out_segs.append({
            "first": ops[a].index, "last": ops[b].index,
            "t0": f"{ops[a].time / 1e9:.3f}", "t1": f"{ops[b].time / 1e9:.3f}",
            "omitted_before": a - prev_end - 1,
            "height": (b - a + 1) * ROW_PX,
            "boxes": seg_boxes, "shades": shades, "ticks": ticks,
        })
        prev_end = b
    omitted_after = len(ops) - 1 - prev_end if segs else 0
    return {
        "columns": [{"name": str(p), "left": GUTTER_PX + i * col_px} for i, p in enumerate(procs)],
        "width": GUTTER_PX + len(procs) * col_px,
        "col_px": col_px, "gutter_px": GUTTER_PX, "row_px": ROW_PX,
        "segments": out_segs,
        "omitted_after": omitted_after,
        "shown": sum(b - a + 1 for a, b in segs), "total": len(ops),
        "head": head, "window": window,
        "faults": legend(intervals),
        "focus_count": len(focus_rows),
        "missing_focus": sorted(set(focus_ops) - set(row_of))[:20],
    }
