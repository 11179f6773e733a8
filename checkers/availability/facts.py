"""What the availability checker needs of a history, in one pass.

A history says when each fault changed (the nemesis's records), when the
final heal happened (the nemesis records whose value says ``final``), when
each partition accepted an acks=all write (``ok`` sends at acks=all), what
the writes after the heal met (the probe writes the final phase adds, and
any other send), and whether each partition's final read completed. Times
are the history's nanoseconds.

This module holds what the pass makes; its rule is
:class:`checkers.availability.factpass.FactPass` (compiled), and
:mod:`checkers.availability.gather` reads a history into it.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

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
    """The pass's result (:func:`checkers.availability.gather.facts_of`)."""

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
