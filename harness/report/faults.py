"""Fault intervals as every plot and page shows them: one colour per fault
kind, the same in every run, each interval labelled with its targets, and a
fault the nemesis skipped (its targets' state did not exist) shown as
skipped, never as an interval.

A nemesis operation is recorded as ``start-<op>`` / ``stop-<op>`` (Jepsen's
intervals; ``nemesis/faults.py`` names the ops); its completion's value says
what the fault did: ``fault`` (``kind`` or ``kind:target``), ``nodes``,
``cut`` (the directed pairs of a partition), ``skipped`` (why nothing was
done). The colour follows the fault's kind, so a clock strobe and a clock
bump differ although both are recorded as ``clock``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkers.history.op import Op

#: one colour per fault kind, fixed: a kill is the same red in every run and
#: on every page (plots, timeline, tables). Pale enough to shade behind data.
KIND_COLOURS: dict[str, str] = {
    "partition": "#8ecae6",       # blue
    "kill": "#f28482",            # red
    "terminate": "#f6bd60",       # amber
    "rolling-restart": "#ffd6a5",  # pale orange
    "pause": "#b39ddb",           # violet
    "clock": "#9bd770",           # green
    "clock-strobe": "#2ec4b6",    # teal
    "lose-unfsynced": "#a47148",  # brown (power loss)
    "torn-write": "#7f5539",      # dark brown
    "latency": "#f7a8d8",         # pink
    "loss": "#adb5bd",            # grey
    "reassign": "#ffe66d",        # yellow
    "decommission": "#c9ada7",    # mauve
}
OTHER_COLOUR = "#d9d9d9"
#: what each kind does, for legends and the story
KIND_WORDS: dict[str, str] = {
    "partition": "network partition", "kill": "kill (SIGKILL)", "terminate": "clean shutdown (SIGTERM)",
    "rolling-restart": "rolling restart", "pause": "pause (SIGSTOP)", "clock": "clock bump",
    "clock-strobe": "clock strobe", "lose-unfsynced": "power loss", "torn-write": "power loss, torn writes",
    "latency": "added latency", "loss": "message loss", "reassign": "replica reassignment",
    "decommission": "broker decommission",
}


@dataclass
class Interval:
    fault: str               # the history's op name (start-<fault> .. stop-<fault>)
    start: float             # seconds since the history's start
    stop: float | None       # None: still active at the end
    value: Any               # the start's completion value
    skipped: str | None = None  # why the nemesis did nothing (not an interval then)

    @property
    def kind(self) -> str:
        return fault_kind(self.fault, self.value)

    @property
    def colour(self) -> str:
        return colour_of(self.kind)

    @property
    def targets(self) -> str:
        return targets_label(self.value)

    @property
    def name(self) -> str:
        """What the fault was asked as (``kill:one``, ``story:leader-churn``)."""
        v = self.value
        return str(v.get("fault")) if isinstance(v, dict) and v.get("fault") else self.fault


def fault_kind(op_name: str, value: Any) -> str:
    """The fault's kind: the name it was asked by when that is a kind with a
    colour (``clock-strobe`` is recorded as ``clock``), else the history's
    op name (a story's partition is a partition)."""
    asked = str(value.get("fault", "")) if isinstance(value, dict) else ""
    kind = asked.split(":", 1)[0]
    return kind if kind in KIND_COLOURS else op_name


def colour_of(kind: str) -> str:
    return KIND_COLOURS.get(kind, OTHER_COLOUR)


def _sides(cut: list[Any]) -> list[list[str]]:
    """The sides of a partition: groups of nodes that still reach each
    other (components of the links not cut, both ways)."""
    pairs = {(str(a), str(b)) for a, b in (p for p in cut if isinstance(p, (list, tuple)) and len(p) == 2)}
    nodes = sorted({n for p in pairs for n in p})
    side: dict[str, int] = {}
    out: list[list[str]] = []
    for n in nodes:
        if n in side:
            continue
        group, todo = [n], [n]
        side[n] = len(out)
        while todo:
            a = todo.pop()
            for b in nodes:
                if b not in side and (a, b) not in pairs and (b, a) not in pairs:
                    side[b] = len(out)
                    group.append(b)
                    todo.append(b)
        out.append(sorted(group))
    return out


def targets_label(value: Any, limit: int = 48) -> str:
    """A fault's targets in a few words: the nodes it hit, or a partition's
    sides (``n2 | n1 n3 c1 c2 c3``), or the node it isolated."""
    if not isinstance(value, dict):
        return ""
    if value.get("skipped"):
        return f"skipped: {value['skipped']}"
    if isinstance(value.get("left"), list) and isinstance(value.get("right"), list):
        text = " ".join(map(str, value["left"])) + " | " + " ".join(map(str, value["right"]))
        if value.get("bridge"):
            text += f" (bridge {value['bridge']})"
    elif value.get("isolated"):
        text = "isolated " + " ".join(map(str, value["isolated"]))
    elif isinstance(value.get("cut"), list) and value["cut"]:
        sides = _sides(value["cut"])
        if len(sides) == 2 and min(len(s) for s in sides) == 1:
            text = "isolated " + min(sides, key=len)[0]
        else:
            text = " | ".join(" ".join(s) for s in sorted(sides, key=len))
    elif isinstance(value.get("nodes"), list) and value["nodes"]:
        text = " ".join(map(str, value["nodes"]))
        if isinstance(value.get("offsets_ms"), dict):
            text = " ".join(f"{n} {int(ms):+d}ms" for n, ms in value["offsets_ms"].items()
                            if isinstance(ms, (int, float)))
    elif value.get("node"):
        text = str(value["node"])
    elif value.get("target"):
        text = str(value["target"])
    else:  # a value of another shape: its plain fields
        text = " ".join(f"{k}={v}" for k, v in value.items()
                        if k != "fault" and isinstance(v, (str, int, float)) and not isinstance(v, bool))
    if value.get("key") and value.get("step") is None:
        text += f" ({value['key']})"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def fault_intervals(ops: list[Op]) -> list[Interval]:
    """start-<fault> completion .. matching stop-<fault> completion (Jepsen's
    nemesis intervals); an unstopped fault runs to the end of the history.
    A start the nemesis skipped is kept as a skipped moment (``stop`` equal
    to its start), and its stop closes nothing."""
    open_: dict[str, Interval] = {}
    out: list[Interval] = []

    def event(op: Op) -> None:
        t = op.time / 1e9
        if op.f.startswith("start-"):
            fault = op.f[len("start-"):]
            skipped = op.value.get("skipped") if isinstance(op.value, dict) else None
            if skipped:
                out.append(Interval(fault, t, t, op.value, str(skipped)))
                return
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
    # that records a fault once is handled too. The completion holds what
    # the fault did (its nodes, or why it was skipped).
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


def active_at(intervals: list[Interval], t0: float, t1: float | None = None) -> list[Interval]:
    """The faults (not skipped) active at any moment of ``[t0, t1]``."""
    t1 = t0 if t1 is None else t1
    return [iv for iv in intervals if not iv.skipped and iv.start <= t1 and (iv.stop is None or iv.stop >= t0)]


def legend(intervals: list[Interval]) -> list[dict[str, str]]:
    """The kinds present, in the table's order, for a page's legend."""
    kinds = {iv.kind for iv in intervals}
    order = list(KIND_COLOURS) + sorted(kinds - set(KIND_COLOURS))
    return [{"kind": k, "colour": colour_of(k), "words": KIND_WORDS.get(k, k),
             "skipped": all(iv.skipped for iv in intervals if iv.kind == k)}
            for k in order if k in kinds]
