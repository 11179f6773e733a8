"""What the availability checker needs of a history, in one pass.

A history says when each fault changed (the nemesis's records), when the
final heal happened (the nemesis records whose value says ``final``), when
each partition accepted an acks=all write (``ok`` sends at acks=all), what
the writes after the heal met (the probe writes the final phase adds, and
any other send), and whether each partition's final read completed. Times
are the history's nanoseconds.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import orjson

from checkers.history.op import Op

#: acks levels whose acknowledgement counts as an acks=all write (a send
#: that does not say its acks is judged as acks=all by the queue checker too)
ALL_ACKS = ("all", "-1", None)


@dataclass
class NemesisEvent:
    """One fault change: a start or stop of a fault (or a story's step), at
    the time its completion was recorded, with what it did."""

    t_ns: int
    f: str
    value: Any

    @property
    def final(self) -> bool:
        return isinstance(self.value, dict) and bool(self.value.get("final"))

    @property
    def skipped(self) -> str | None:
        v = self.value if isinstance(self.value, dict) else {}
        return str(v["skipped"]) if v.get("skipped") else None

    def label(self) -> str:
        """``start-kill n1, n2`` or ``stop-partition``: the fault and its targets."""
        v = self.value if isinstance(self.value, dict) else {}
        nodes = v.get("nodes") or v.get("isolated") or v.get("restarted")
        fault = str(v.get("fault") or "")
        what = self.f + (f" {fault}" if fault not in ("", "all", self.f.split("-", 1)[-1]) else "")
        if isinstance(nodes, list) and nodes:
            what += " " + ", ".join(map(str, nodes))
        return what


@dataclass
class Attempt:
    """A send after the final heal: when it was invoked and how it ended."""

    invoked_ns: int
    ended_ns: int | None = None
    type: str | None = None
    error: Any = None
    probe: bool = False


@dataclass
class HistoryFacts:
    """The pass's result (:func:`facts_of`)."""

    nemesis: list[NemesisEvent] = field(default_factory=list)
    #: per key, the completion times of ok acks=all sends, in order
    acked_all: dict[str, array] = field(default_factory=dict)
    #: per key, every send invoked after the first final-heal record
    after_heal: dict[str, list[Attempt]] = field(default_factory=dict)
    #: per key, the final read's completion type (``ok``, ``info``, ``fail``)
    final_reads: dict[str, str] = field(default_factory=dict)
    #: whether any send was acks=all (a run of acks=1 writers has no such evidence)
    all_writers: bool = False
    end_ns: int = 0
    #: until when the workload was writing: its last send's invocation or
    #: completion before the final heal, or the heal itself if a send was
    #: still waiting for its answer then
    workload_end_ns: int = 0

    @property
    def heal_ns(self) -> int | None:
        """When the final heal was done: its last record; without a nemesis,
        when the final phase began (its first probe or final read)."""
        finals = [e.t_ns for e in self.nemesis if e.final]
        if finals:
            return max(finals)
        starts = [a.invoked_ns for atts in self.after_heal.values() for a in atts]
        return min(starts) if starts else self._first_final

    _first_final: int | None = None


class _Pass:
    """Feeds operations (as their fields) into :class:`HistoryFacts`."""

    def __init__(self) -> None:
        self.facts = HistoryFacts()
        self.open_nemesis: dict[str, int] = {}
        self.open_sends: dict[Any, Attempt | None] = {}
        #: processes with a send of the workload proper in flight
        self.writing: set[Any] = set()
        self.healing = False

    def feed(self, process: Any, type_: str, f: str, value: Any, t: int, error: Any, extra: dict[str, Any]) -> None:
        facts = self.facts
        if t > facts.end_ns:  # max(end_ns, t)
            facts.end_ns = t
        if process == "nemesis":
            self._nemesis(f, value, t)
            return
        final = extra.get("final")
        if (extra.get("probe") or final) and not self.healing:
            self._final_phase(t)  # a run without a nemesis: its final phase begins here
        if final and f in ("poll", "assign"):
            if facts._first_final is None:
                facts._first_final = t
            if f == "poll" and type_ != "invoke" and not extra.get("output"):
                for key in _poll_keys(value, extra):
                    facts.final_reads[key] = type_
                for key in extra.get("incomplete") or ():  # the simulator's reads say so
                    facts.final_reads[str(key)] = "incomplete"
            return
        if f != "send":
            return
        acks = extra.get("acks")
        acks_all = acks in ALL_ACKS
        if acks_all:
            facts.all_writers = True
        if not self.healing:
            if t > facts.workload_end_ns:
                facts.workload_end_ns = t
            if type_ == "invoke":
                self.writing.add(process)
            else:
                self.writing.discard(process)
        if type_ == "invoke":
            if self.healing and acks_all:
                attempt = Attempt(t, probe=bool(extra.get("probe")))
                self.open_sends[process] = attempt
                for key in _send_keys(value):
                    facts.after_heal.setdefault(key, []).append(attempt)
            return
        done = self.open_sends.pop(process, None)
        if done is not None:
            done.ended_ns, done.type, done.error = t, type_, error
        if type_ == "ok" and acks_all:
            acked = facts.acked_all
            for key in _send_keys(value):
                times = acked.get(key)
                if times is None:
                    times = acked[key] = array("q")
                times.append(t)

    def _final_phase(self, t: int) -> None:
        self.healing = True
        if self.writing:  # sends still waiting: the workload was writing until now
            self.facts.workload_end_ns = max(self.facts.workload_end_ns, t)

    def _nemesis(self, f: str, value: Any, t: int) -> None:
        if isinstance(value, dict) and value.get("final") and not self.healing:
            self._final_phase(t)
        if f in self.open_nemesis:  # the pair's completion: the change is done
            del self.open_nemesis[f]
            self.facts.nemesis.append(NemesisEvent(t, f, value))
        else:
            self.open_nemesis[f] = t


def _send_keys(value: Any) -> list[str]:
    if type(value) is list and len(value) == 1:  # the common send: one micro-op
        mop = value[0]
        if type(mop) is list and len(mop) >= 2 and mop[0] == "send":
            return [str(mop[1])]
    out = []
    if isinstance(value, list):
        for mop in value:
            if isinstance(mop, list) and len(mop) >= 2 and mop[0] == "send":
                out.append(str(mop[1]))
    return out


def _poll_keys(value: Any, extra: dict[str, Any]) -> list[str]:
    if extra.get("key") is not None:
        return [str(extra["key"])]
    out: list[str] = []
    if isinstance(value, list):
        for mop in value:
            if isinstance(mop, list) and len(mop) >= 2 and mop[0] == "poll" and isinstance(mop[1], dict):
                out.extend(str(k) for k in mop[1])
    return out


def facts_of(ops: Iterable[Op]) -> HistoryFacts:
    """The facts of a history given as operations (in history order).

    A client's operation that is not a send and not of the final phase (a
    poll, assign or transaction of the workload proper: a quarter of a
    simulated seed's operations) moves only the history's end, which is
    done here without the rest of :meth:`_Pass.feed`."""
    p = _Pass()
    feed, facts = p.feed, p.facts
    for op in ops:
        extra = op.extra
        if op.f != "send" and op.process != "nemesis" and not (extra.get("probe") or extra.get("final")):
            t = op.time
            if t > facts.end_ns:  # max(end_ns, t), as feed would
                facts.end_ns = t
            continue
        feed(op.process, op.type, op.f, op.value, op.time, op.error, extra)
    return facts


_CORE = frozenset(("index", "time", "process", "type", "f", "value", "error"))
#: a line the pass can use names one of these (every other line is a poll or
#: a transaction of the workload proper, skipped unparsed): a probe's poll
#: begins the final phase as a probe's send does
_WANTED = (b'"nemesis"', b'"send"', b'"final"', b'"probe"')


def facts_of_jsonl(path: str | Path) -> HistoryFacts:
    """The facts of a ``history.jsonl``, the same as :func:`facts_of` of its
    operations, reading only the lines that can matter (nemesis records,
    sends, probes, final reads) and the last line for the history's end; a
    line that is not JSON is skipped (the queue checker reports it)."""
    p = _Pass()
    #: the last line skipped after the last one fed: its time may still be
    #: the history's end (a plain poll last), which :func:`facts_of` counts;
    #: a history's times never go back, so no earlier skipped line can be
    last_skipped: bytes | None = None
    with open(path, "rb") as fh:
        for line in fh:
            if not any(w in line for w in _WANTED):
                last_skipped = line
                continue
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(d, dict) or not isinstance(d.get("time"), int):
                continue
            extra = {k: v for k, v in d.items() if k not in _CORE}
            p.feed(d.get("process"), str(d.get("type")), str(d.get("f")), d.get("value"), d["time"],
                   d.get("error"), extra)
            last_skipped = None
    if last_skipped is not None:
        try:
            d = orjson.loads(last_skipped)
        except orjson.JSONDecodeError:
            d = None  # a truncated last line, as the readers skip it
        if isinstance(d, dict) and isinstance(d.get("time"), int) and d["time"] > p.facts.end_ns:
            p.facts.end_ns = d["time"]
    return p.facts
