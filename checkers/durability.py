"""Durability accounting for queue histories, split by the producer's ``acks``.

What an acknowledgement promises depends on ``acks`` (seed 000/003): with
``acks=all`` the leader answers only once every replica in the ISR has the
record and the high watermark covers it, so no clean leader change can lose it;
with ``acks=1`` only the leader had it, and a leader change before followers
fetched it truncates it away (seed 003, "ISR, watermarks and unclean loss");
``acks=0`` promises nothing. So the checker counts, per acks level:

``acked``            sends completed ``ok``
``lost``             acked values that are gone: absent from the final reads
                     (``final: true`` polls), or never read although reads went
                     past their offset, or whose offset holds another value
``lost_rate``        lost / acked, with a 95% Wilson score interval (it stays
                     inside [0, 1] and is honest for 0 losses or few sends)
``unacked_visible``  ``fail``/``info`` sends whose value was read anyway
                     (``info`` is fine — it may have happened; a ``fail`` that
                     is read is an anomaly, Jepsen's G1a, counted separately as
                     ``failed_visible``)
``visibility_delay_ms``  distribution of (completion time of the first poll
                     that returned the value) - (acknowledgement time): an
                     upper bound on how long an acked record stayed invisible

Only ``acks=all`` losses make a run invalid (anomaly ``lost-acked-write``):
the others are the documented price of weaker acks, reported as rates and
listed under their own names, ``lost-acks1-write`` and ``lost-acks0-write``
(:func:`durability_verdict`); ``strict_acks1`` makes acks=1 losses count.
Unknown acks (histories that do not record it) are reported, not judged here
(the queue checker's ``lost-write``/``unseen`` judge those).

A record counts as lost by *absence* only in a key whose final read completed
``ok`` (a full view of the log); elsewhere only evidence counts — reads went
past its offset, or its offset holds another record (:mod:`checkers.final_reads`).
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Any, Iterable

import numpy as np

from checkers.history.op import Op
from checkers.queue.project import project

EXAMPLES = 32
#: an event's offsets and values, taken in C (``map``): a poll's records are
#: most of a history
_OFFSET = itemgetter(0)
_VALUE = itemgetter(1)


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion k/n."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return (lo, hi)


def _bucket() -> dict[str, Any]:
    return {"sent": 0, "acked": 0, "failed": 0, "indeterminate": 0, "lost": 0,
            "lost_examples": [], "unacked_visible": 0, "failed_visible": 0,
            "failed_visible_examples": [], "never_visible": 0, "delays_ns": []}


def key_durability(key: str, events: list) -> dict[str, dict[str, Any]]:
    """Per-key partial accounting (merged by :func:`merge_durability`);
    ``events`` as produced by :mod:`checkers.queue.project`."""
    sends: list[tuple] = []  # (op, type, offset, value, time, acks)
    # value -> completion time of the first poll (in history order, which is
    # completion order) that returned it
    read_any: dict[Any, int | None] = {}
    read_ok: set[Any] = set()
    final_vals: set[Any] = set()
    final_seen = False
    offset_first: dict[Any, Any] = {}   # offset -> first value read there
    offset_multi: set[Any] = set()      # offsets where reads disagree
    max_ok_off = -1
    for ev in events:
        kind = ev[3]
        if kind == "w":
            idx, typ, t, acks = ev[0], ev[2], ev[5], ev[6]
            for off, v in ev[4]:
                sends.append((idx, typ, off, v, t, acks))
            continue
        if kind != "r":
            continue
        pairs = ev[4]
        if not pairs:
            if ev[2] == "ok" and ev[6]:
                final_seen = True
            continue
        t = ev[5]
        for off, v in pairs:
            if v not in read_any:
                read_any[v] = t
            if offset_first.setdefault(off, v) != v:
                offset_multi.add(off)
        if ev[2] == "ok":
            vals = list(map(_VALUE, pairs))
            read_ok.update(vals)
            offs = list(map(_OFFSET, pairs))
            if None in offs:
                offs = [o for o in offs if o is not None]
            m = max(offs, default=-1)
            if m > max_ok_off:
                max_ok_off = m
            if ev[6]:
                final_seen = True
                final_vals.update(vals)
    out: dict[str, dict[str, Any]] = {}
    for idx, typ, off, v, t, acks in sends:
        b = out.get(acks)
        if b is None:
            b = out[acks] = _bucket()
        b["sent"] += 1
        if typ == "ok":
            b["acked"] += 1
            # gone from a completed final read, or unread where later offsets (or another value) were read
            if (final_seen and v not in final_vals) or (
                    v not in read_ok and off is not None
                    and (max_ok_off > off or off in offset_multi or offset_first.get(off, v) != v)):
                b["lost"] += 1
                if len(b["lost_examples"]) < EXAMPLES:
                    b["lost_examples"].append({"key": key, "value": v, "offset": off, "op": idx,
                                               "seen": v in read_ok})
            tv = read_any.get(v, -1)
            if tv == -1:
                b["never_visible"] += 1
            elif tv is not None and t is not None:
                b["delays_ns"].append(max(0, tv - t))
        else:
            if typ == "fail":
                b["failed"] += 1
            else:
                b["indeterminate"] += 1
            if v in read_any:
                b["unacked_visible"] += 1
                if typ == "fail":
                    b["failed_visible"] += 1
                    if len(b["failed_visible_examples"]) < EXAMPLES:
                        b["failed_visible_examples"].append({"key": key, "value": v, "op": idx})
    return out


def _quantile(sorted_xs: list[float], q: float) -> float:
    if not sorted_xs:
        return 0.0
    i = min(len(sorted_xs) - 1, max(0, int(math.ceil(q * len(sorted_xs))) - 1))
    return sorted_xs[i]


def _sorted_ms(parts: list[list[Any]]) -> list[float]:
    """Every key's visibility delays (ns), sorted, in milliseconds. Integer
    delays are sorted and divided by numpy (an int64 to float64 division is
    Python's ``int / float``, rounding and all): a 1M-op history has
    hundreds of thousands, which Python's sort and a comprehension took a
    quarter of a second over; anything else the Python way."""
    arrays = [np.asarray(p) for p in parts]
    if all(a.dtype.kind == "i" and a.ndim == 1 for a in arrays):
        d = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
        d.sort()
        return (d / 1e6).tolist()
    return [x / 1e6 for x in sorted(x for p in parts for x in p)]


def merge_durability(partials: Iterable[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Sum per-key partials into the results.json ``durability`` object.
    ``acks=all`` and ``acks=1`` are always present; other levels when seen."""
    tot: dict[str, dict[str, Any]] = {}
    for part in partials:
        for acks, b in part.items():
            t = tot.get(acks)
            if t is None:
                t = tot[acks] = _bucket()
            for k, v in b.items():
                if isinstance(v, list):
                    if k == "delays_ns":
                        if v:
                            t[k].append(v)  # each key's list, sorted together below
                    else:
                        room = EXAMPLES - len(t[k])
                        if room > 0:
                            t[k].extend(v[:room])
                else:
                    t[k] += v
    for need in ("all", "1"):
        tot.setdefault(need, _bucket())
    out: dict[str, dict[str, Any]] = {}
    for acks in sorted(tot, key=lambda a: (a is None, str(a))):
        b = tot[acks]
        ms = _sorted_ms(b.pop("delays_ns"))
        n, k = b["acked"], b["lost"]
        lo, hi = wilson_interval(k, n)
        b["lost_rate"] = (k / n) if n else 0.0
        b["lost_rate_ci95"] = [lo, hi]
        b["visibility_delay_ms"] = {
            "count": len(ms),
            "mean": (sum(ms) / len(ms)) if ms else 0.0,
            "p50": _quantile(ms, 0.50),
            "p90": _quantile(ms, 0.90),
            "p99": _quantile(ms, 0.99),
            "max": ms[-1] if ms else 0.0,
        }
        label = f"acks={acks}" if acks is not None else "acks=unknown"
        out[label] = b
    return out


def check_durability(ops: list[Op]) -> dict[str, dict[str, Any]]:
    """Durability accounting of a queue history: ``{"acks=all": {"acked",
    "lost", "lost_rate", "lost_rate_ci95", ...}, "acks=1": {...}, ...}``."""
    proj = project(ops)
    return merge_durability(key_durability(k, evs) for k, evs in proj.keys.items())


#: results.json anomaly name of a lost acknowledged record, by acks level
LOSS_ANOMALY = {"acks=all": "lost-acked-write", "acks=1": "lost-acks1-write",
                "acks=0": "lost-acks0-write"}


def durability_verdict(durability: dict[str, dict[str, Any]],
                       strict_acks1: bool = False) -> tuple[dict[str, list], list[str]]:
    """The durability findings and which of them invalidate the run.

    Returns ``(anomalies, bad)``: ``anomalies`` maps ``lost-acked-write`` /
    ``lost-acks1-write`` / ``lost-acks0-write`` to lost examples (only the
    levels that lost something); ``bad`` lists the ones that make the run
    invalid — acks=all always (seed 000: acknowledged only once the whole
    ISR has it), acks=1 only when ``strict_acks1`` (seed 003: the leader alone
    acknowledged it, a leader change may truncate it), acks=0 never."""
    anomalies: dict[str, list] = {}
    bad: list[str] = []
    for label, name in LOSS_ANOMALY.items():
        row = durability.get(label) or {}
        if not row.get("lost"):
            continue
        anomalies[name] = list(row.get("lost_examples") or [])
        if label == "acks=all" or (label == "acks=1" and strict_acks1):
            bad.append(name)
    return anomalies, bad
