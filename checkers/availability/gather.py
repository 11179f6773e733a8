"""The facts of a history (:class:`~checkers.availability.facts.HistoryFacts`):
of its operations, or of its ``history.jsonl`` read for the lines that can
matter, both through the one pass (:class:`checkers.availability.factpass.FactPass`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import orjson

from checkers.history.op import Op

from .facts import HistoryFacts


def _new_pass() -> Any:
    """A :class:`checkers.availability.factpass.FactPass`: the pass's rule,
    compiled (``checkers.availability`` is imported before the accelerator's
    loader in places, so the compiled module is loaded only when a pass is made)."""
    from .factpass import FactPass  # late: compiled; loaded after the accelerator's loader

    return FactPass()


def facts_of(ops: Iterable[Op]) -> HistoryFacts:
    """The facts of a history given as operations (in history order)."""
    p = _new_pass()
    p.feed_ops(ops)
    return p.finish()


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
    p = _new_pass()
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
        if isinstance(d, dict) and isinstance(d.get("time"), int):
            p.see_time(d["time"])
    return p.finish()
