"""``check``: linearizability of a history against a model, key by key.

The history is partitioned into independent sub-histories (one per key, see
:mod:`.prepare`), each searched with WGL (:mod:`.wgl`). The searches are
generators, run round-robin in slices under one shared time and memory
budget, so a single hard key cannot starve the others: easy keys finish in
their first slices, and whatever is still running when the budget runs out
is reported ``"unknown"`` instead of hanging. Every key gets at least its
first slice, even past the budget, so the budget can be overrun by at most
one slice per key.

Verdict: ``False`` if any key is not linearizable (a violation on one key is
a violation of the whole history, by locality), else ``"unknown"`` if any key
ran out of budget, else ``True`` (also for a history with nothing to check,
as Knossos answers; :func:`checkers.check.check_history` calls such a run
"unknown").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Generator, Iterable

from checkers.verdict import UNKNOWN, combine

from .models import Model, ModelError, make_model
from .prepare import SubHistory, prepare
from .wgl import SearchResult, compile_problem, search
from .windows import refute

__all__ = ["check", "DEFAULT_MEMORY_BUDGET_MB"]

DEFAULT_MEMORY_BUDGET_MB = 1024
#: slices of window refutation per slice of whole-key WGL once the latter
#: has had its first: a key WGL has not decided by then is more often one
#: whose search space explodes, and windows on a linearizable key run out
#: fast (each window finds its linearization early)
WINDOW_SHARE = 3


def _key_name(key: Any) -> str:
    if key is None:
        return "all"
    if isinstance(key, frozenset):
        return ",".join(sorted(map(str, key))) or "all"
    return str(key)


def _op_view(sub: SubHistory, i: int) -> dict[str, Any]:
    o = sub.ops[i]
    return {
        "invoke_index": o.invoke_index,
        "complete_index": o.complete_index,
        "f": o.f,
        "value": _jsonable(o.value),
    }


def _jsonable(x: Any) -> Any:
    """Model values and states as JSON-ready values (results.json)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (frozenset, set)):
        return sorted((_jsonable(v) for v in x), key=repr)
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if hasattr(x, "records"):  # a kafka-log state: summarise, a log can be long
        recs = x.records()
        return {"length": len(recs), "last": _jsonable(recs[-1]) if recs else None}
    return repr(x)


def check(
    ops: Iterable[Any],
    model: str | Model = "cas-register",
    time_budget: float = 10.0,
    memory_budget_mb: float = DEFAULT_MEMORY_BUDGET_MB,
    slice_steps: int = 20000,
    stop_on_failure: bool = True,
    **model_options: Any,
) -> dict[str, Any]:
    """Check ``ops`` (``Op`` objects or dicts, in history order) for
    linearizability against ``model`` (a name from
    :data:`checkers.linearizable.models.MODELS` plus constructor options, e.g.
    ``initial=0``, ``independent=True``; or a :class:`Model` instance).

    ``stop_on_failure`` (default, as Porcupine does): once one key is not
    linearizable the verdict is settled, so the searches still running after
    that round are stopped (reported "unknown", cause ``"stopped"``) instead
    of spending the rest of the budget on them; every key still gets its
    first turn (:data:`FIRST_TURN` steps), so small keys are decided either
    way. Pass False to search every key to the end of the budget (all
    failing keys reported). Later turns are ``slice_steps`` long.

    Returns a dict: ``valid`` (True / False / "unknown"), ``cause`` (when
    unknown), ``keys`` (per-key results, keyed by the key's name), for the
    first failing key ``key``/``op``/``unlinearizable``/``longest_prefix``
    (history op indices), and ``stats``.

    Raises :class:`~checkers.history.op.HistoryError` for malformed input
    and :class:`~checkers.linearizable.models.ModelError` for a bad model.
    """
    t0 = time.monotonic()
    mdl = make_model(model, **model_options)
    subs, counts = prepare(ops, mdl)
    quantum = max(1, min(FIRST_TURN, slice_steps))
    running = []
    for key, sub in subs.items():
        try:
            init = mdl.init_for(key)
        except (TypeError, ValueError) as e:
            raise ModelError(f"model {mdl.name}: bad initial state for key {key!r}: {e}") from None
        prob = compile_problem(sub.ops, mdl, init)
        running.append(_Key(key, sub, _key_search(sub, prob, mdl, quantum, slice_steps)))
    # Smallest sub-histories first: cheap verdicts land early.
    running.sort(key=lambda r: len(r.sub.ops))
    sched = _Scheduler(t0 + max(0.0, float(time_budget)), float(memory_budget_mb) * 1024 * 1024,
                       stop_on_failure)
    results = sched.run(running, max(1, slice_steps // quantum))
    return _assemble(mdl, subs, results, counts, time.monotonic() - t0, sched.cause)


#: steps of every key's first turn: enough for most keys to be decided, and
#: small, so that with ``stop_on_failure`` the keys run after the first one
#: found failing cost little
FIRST_TURN = 100


@dataclass
class _Key:
    key: Any
    sub: SubHistory
    gen: Generator[SearchResult, None, SearchResult]


class _Scheduler:
    """Round-robin turns over the keys' searches under one time and memory
    budget: the first round one :data:`FIRST_TURN` each (every key gets it,
    even past the budget), later ones ``slice_steps`` each until every key
    is decided or the budget (or, with ``stop_on_failure``, a failing key)
    ends the run."""

    def __init__(self, deadline: float, mem_limit: float, stop_on_failure: bool) -> None:
        self.deadline, self.mem_limit, self.stop_on_failure = deadline, mem_limit, stop_on_failure
        self.cause: str | None = None
        self.results: dict[Any, dict[str, Any]] = {}
        self.progress: dict[Any, SearchResult] = {}

    def run(self, running: list[_Key], turn: int) -> dict[Any, dict[str, Any]]:
        """Every key's first turn, then turns of ``turn`` quanta until all
        are decided or the run is over (the rest of that round is skipped)."""
        running = [k for k in running if not self._turn(k, 1)]
        while running and self.cause is None:
            running = [k for k in running if self.cause is not None or not self._turn(k, turn)]
        for k in running:
            k.gen.close()
            self.results[k.key] = _unknown_result(k.sub, self.progress.get(k.key), self.cause or "timeout")
        return self.results

    def _turn(self, k: _Key, quanta: int) -> bool:
        """Run one key for ``quanta`` of its search; True when decided."""
        try:
            for _ in range(quanta):
                self.progress[k.key] = next(k.gen)
        except StopIteration as stop:
            self.results[k.key] = _key_result(k.sub, stop.value)
            self.progress.pop(k.key, None)
            if self.stop_on_failure and stop.value.valid is False and self.cause is None:
                self.cause = "stopped"
            return True
        except ModelError as e:
            raise ModelError(f"key {_key_name(k.key)}: {e}") from None
        if self.cause is None:
            if time.monotonic() >= self.deadline:
                self.cause = "timeout"
            elif sum(p.mem_estimate for p in self.progress.values()) >= self.mem_limit:
                self.cause = "memory"
        return False


def _key_search(sub: SubHistory, prob: Any, mdl: Model, quantum: int, slice_steps: int
                ) -> Generator[SearchResult, None, SearchResult]:
    """WGL over the whole key, yielding every ``quantum`` steps, with window
    refutation (:mod:`.windows`) interleaved (:data:`WINDOW_SHARE` quanta to
    one) once WGL has had ``slice_steps`` steps, when the model has a
    wildcard state: the first to decide answers (a window can only refute)."""
    full = search(prob, mdl, quantum)
    windows: Any = None
    started = mdl.any_state() is None  # no wildcard: no windows
    while True:
        try:
            progress = next(full)
        except StopIteration as stop:
            return stop.value
        # most keys are decided within WGL's first slice: windows join after
        # it, starting where that search keeps failing
        if not started and progress.steps >= slice_steps:
            started = True
            windows = refute(sub.ops, mdl, quantum, focus=progress.frontier)
        elif windows is not None:
            for _ in range(WINDOW_SHARE):
                try:
                    next(windows)
                except StopIteration as stop:
                    windows = None
                    if stop.value is not None:
                        full.close()
                        stop.value.mem_estimate = progress.mem_estimate
                        return stop.value
                    break
        yield progress


def _stats(r: Any) -> dict[str, Any]:
    return {
        "steps": r.steps,
        "lifts": r.lifts,
        "backtracks": r.backtracks,
        "cache_size": r.cache_size,
        "states": r.states,
        "mem_estimate_bytes": r.mem_estimate,
    }


def _key_result(sub: SubHistory, r: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "valid": bool(r.valid),
        "op_count": len(sub.ops),
        "dropped": sub.dropped,
        "stats": _stats(r),
    }
    if r.valid:
        out["final_state"] = _jsonable(r.final_state)
    else:
        out["longest_prefix"] = [sub.ops[i].invoke_index for i in r.longest]
        if r.window is not None:
            # refuted by a stretch of the history alone (see .windows)
            lo, hi = r.window
            out["window"] = {"first_invoke": sub.ops[lo].invoke_index, "ops": hi - lo,
                             "before": sub.ops[hi].invoke_index if hi < len(sub.ops) else None}
        if r.blocked is not None:
            bo = sub.ops[r.blocked]
            out["op"] = _op_view(sub, r.blocked)
            out["unlinearizable"] = [bo.invoke_index, bo.complete_index]
        else:
            out["unlinearizable"] = []
    return out


def _unknown_result(sub: SubHistory, progress: Any, cause: str) -> dict[str, Any]:
    out: dict[str, Any] = {"valid": UNKNOWN, "cause": cause, "op_count": len(sub.ops),
                           "dropped": sub.dropped}
    if progress is not None:
        out["stats"] = _stats(progress)
    return out


def _assemble(mdl: Model, subs: dict, results: dict, counts: dict, elapsed: float,
              cause: str | None) -> dict[str, Any]:
    names = {k: _key_name(k) for k in subs}
    if len(set(names.values())) < len(names):  # e.g. keys 1 and "1"
        names = {k: repr(k) for k in subs}
    keys = {names[k]: results[k] for k in subs}
    failed = [names[k] for k in subs if results[k]["valid"] is False]
    unknown = [names[k] for k in subs if results[k]["valid"] == UNKNOWN]
    valid = combine(results[k]["valid"] for k in subs)
    out: dict[str, Any] = {
        "valid": valid,
        "model": mdl.name,
        "keys": keys,
        "failed_keys": failed,
        "unknown_keys": unknown,
    }
    if unknown:
        out["cause"] = cause
    if failed:
        first = keys[failed[0]]
        out["key"] = failed[0]
        out["op"] = first.get("op")
        out["unlinearizable"] = first["unlinearizable"]
        out["longest_prefix"] = first["longest_prefix"]
    totals = {"steps": 0, "lifts": 0, "backtracks": 0, "cache_size": 0}
    for r in results.values():
        for k in totals:
            totals[k] += r.get("stats", {}).get(k, 0)
    out["stats"] = {
        "elapsed_s": round(elapsed, 6),
        "keys": len(subs),
        "history": counts,
        **totals,
    }
    return out

