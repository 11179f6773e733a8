"""The availability checker's one pass over a history (:mod:`.facts`), compiled.

What :class:`FactPass` takes from each operation is told in
:mod:`checkers.availability.facts`; this module is its rule, the only one:
:func:`~.gather.facts_of`, :func:`~.gather.facts_of_jsonl` and the queue
checker's reading of a simulated seed's operations
(:func:`checkers.queue.scan.scan_ops` with ``facts``, the same walk over the
operations as the queue folds') all feed one.

It runs once per operation of every simulated seed, so it is in the
accelerator (:data:`reference_impl.accel.MODULES`): the state it changes on
every operation (the history's end, the workload's end, whether any writer
was acks=all, each key's acknowledged times) is held in the pass's own typed
attributes and handed to :class:`~.facts.HistoryFacts` once, by
:meth:`FactPass.finish`. Nothing imports this module at the top of a module
the harness may import before the accelerator's loader (``checkers.availability``
does not): a compiled module imported before it leaves the whole build unused.
"""

from __future__ import annotations

from array import array
from typing import Any, Final, Iterable

from checkers.history.op import Op

from .facts import Attempt, HistoryFacts, NemesisEvent

#: Final: compiled, each is a constant where a plain global was a lookup in
#: the module's dict at every use (a few every send)
_SEND: Final = "send"
_POLL: Final = "poll"
_ASSIGN: Final = "assign"
_INVOKE: Final = "invoke"
_NEMESIS: Final = "nemesis"


class FactPass:
    """Feeds operations (or their fields) into a :class:`~.facts.HistoryFacts`,
    in history order; :meth:`finish` once they are all in."""

    def __init__(self) -> None:
        self.facts = HistoryFacts()
        self.open_nemesis: dict[str, int] = {}
        self.open_sends: dict[Any, Attempt] = {}
        #: processes with a send of the workload proper in flight
        self.writing: set[Any] = set()
        self.healing = False
        self.end_ns = 0
        self.workload_end_ns = 0
        self.all_writers = False
        self.first_final: int | None = None
        #: per key, the completion times of ok acks=all sends (an array each at :meth:`finish`)
        self.acked: dict[str, list[int]] = {}
        self.nemesis: list[NemesisEvent] = self.facts.nemesis
        self.after_heal: dict[str, list[Attempt]] = self.facts.after_heal
        self.final_reads: dict[str, str] = self.facts.final_reads

    def feed_op(self, op: Op) -> None:
        """One operation. A client's operation that is not a send and not of
        the final phase (a poll, assign or transaction of the workload proper:
        a quarter of a simulated seed's operations) moves only the history's
        end."""
        extra: dict[str, Any] = op.extra
        f: str = op.f
        process = op.process
        if f != _SEND and (type(process) is int or process != _NEMESIS) \
                and not (extra.get("probe") or extra.get("final")):
            t: int = op.time
            if t > self.end_ns:
                self.end_ns = t
            return
        self.feed(process, op.type, f, op.value, op.time, op.error, extra)

    def feed_ops(self, ops: Iterable[Op]) -> None:
        """Operations in history order (a compiled loop: one native call an operation)."""
        for op in ops:
            self.feed_op(op)

    def see_time(self, t: int) -> None:
        """A time the history reached (a line read for nothing else)."""
        if t > self.end_ns:
            self.end_ns = t

    def feed(self, process: Any, type_: str, f: str, value: Any, t: int, error: Any, extra: dict[str, Any]) -> None:
        """One operation, as its fields."""
        if t > self.end_ns:
            self.end_ns = t
        if type(process) is not int and process == _NEMESIS:
            self._nemesis(f, value, t)
            return
        final = extra.get("final")
        if (extra.get("probe") or final) and not self.healing:
            self._final_phase(t)  # a run without a nemesis: its final phase begins here
        if final and (f == _POLL or f == _ASSIGN):
            if self.first_final is None:
                self.first_final = t
            if f == _POLL and type_ != _INVOKE and not extra.get("output"):
                for key in _poll_keys(value, extra):
                    self.final_reads[key] = type_
                for k in extra.get("incomplete") or ():  # the simulator's reads say so
                    self.final_reads[str(k)] = "incomplete"
            return
        if f == _SEND:
            self._send(process, type_, value, t, error, extra)

    def feed_send(self, process: Any, type_: str, value: Any, t: int, extra: dict[str, Any]) -> None:
        """:meth:`feed` of a send of the workload proper whose fields the
        caller has read (:class:`checkers.queue.opbatch.OpBatches`): a
        client's, without error, ``probe`` or ``final``."""
        if t > self.end_ns:
            self.end_ns = t
        self._send(process, type_, value, t, None, extra)

    def _send(self, process: Any, type_: str, value: Any, t: int, error: Any, extra: dict[str, Any]) -> None:
        acks = extra.get("acks")
        # in ALL_ACKS; a string compared as one (an untyped == is Python's generic compare)
        acks_all = acks is None or (isinstance(acks, str) and _all_acks(acks))
        if acks_all:
            self.all_writers = True
        invoke = type_ == _INVOKE
        if not self.healing:
            if t > self.workload_end_ns:
                self.workload_end_ns = t
            if invoke:
                self.writing.add(process)
            else:
                self.writing.discard(process)
        if invoke:
            if self.healing and acks_all:
                attempt = Attempt(t, probe=bool(extra.get("probe")))
                self.open_sends[process] = attempt
                for key in _send_keys(value):
                    self.after_heal.setdefault(key, []).append(attempt)
            return
        if self.open_sends:
            done = self.open_sends.pop(process, None)
            if done is not None:
                done.ended_ns, done.type, done.error = t, type_, error
        if type_ == "ok" and acks_all:
            acked = self.acked
            if type(value) is list and len(value) == 1:  # the common send: one micro-op
                one = _send_key(value[0])
                if one is not None:
                    times = acked.get(one)
                    if times is None:
                        acked[one] = [t]
                    else:
                        times.append(t)
                    return
            for key in _send_keys(value):
                times = acked.get(key)
                if times is None:
                    acked[key] = [t]
                else:
                    times.append(t)

    def _final_phase(self, t: int) -> None:
        self.healing = True
        if self.writing and t > self.workload_end_ns:  # sends still waiting: the workload was writing until now
            self.workload_end_ns = t

    def _nemesis(self, f: str, value: Any, t: int) -> None:
        if isinstance(value, dict) and value.get("final") and not self.healing:
            self._final_phase(t)
        if f in self.open_nemesis:  # the pair's completion: the change is done
            del self.open_nemesis[f]
            self.nemesis.append(NemesisEvent(t, f, value))
        else:
            self.open_nemesis[f] = t

    def finish(self) -> HistoryFacts:
        """The facts of what was fed (the pass may be fed on after, and finished again)."""
        facts = self.facts
        facts.end_ns = self.end_ns
        facts.workload_end_ns = self.workload_end_ns
        facts.all_writers = self.all_writers
        facts._first_final = self.first_final
        facts.acked_all = {k: array("q", ts) for k, ts in self.acked.items()}
        return facts


def _all_acks(acks: str) -> bool:
    return acks == "all" or acks == "-1"


def _send_key(mop: Any) -> str | None:
    """The key of one send micro-op, None if it is not one."""
    if type(mop) is list and len(mop) >= 2 and mop[0] == _SEND:
        return str(mop[1])
    return None


def _send_keys(value: Any) -> list[str]:
    out = []
    if isinstance(value, list):
        for mop in value:
            if isinstance(mop, list) and len(mop) >= 2 and mop[0] == _SEND:
                out.append(str(mop[1]))
    return out


def _poll_keys(value: Any, extra: dict[str, Any]) -> list[str]:
    if extra.get("key") is not None:
        return [str(extra["key"])]
    out: list[str] = []
    if isinstance(value, list):
        for mop in value:
            if isinstance(mop, list) and len(mop) >= 2 and mop[0] == _POLL and isinstance(mop[1], dict):
                out.extend(str(k) for k in mop[1])
    return out
