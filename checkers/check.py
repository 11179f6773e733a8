"""The one entry point that turns a history into results.json.

``check_history(ops, model="queue", engine="inline" | "spark", ...)`` runs
the checkers a model calls for and assembles the results.json object of
ARCHITECTURE.md: ``valid`` (true / false / "unknown"), ``anomaly_types``,
``anomalies`` ({type: [examples]}), ``durability``, ``stats`` and
``checkers`` ({name: {...}}).

* ``queue`` — Jepsen's Kafka anomaly taxonomy (:mod:`checkers.queue`) and the
  durability accounting (:mod:`checkers.durability`), per key on the chosen
  engine, cycles across keys on the driver.
* any other model (``register``, ``cas-register``, ``mutex``, ``kafka-log``...)
  — linearizability (:mod:`checkers.linearizable`).

Every checker runs under ``time_budget`` seconds and answers ``"unknown"``
rather than hanging. ``valid`` is false if any checker found a disallowed
anomaly, else unknown if any checker ran out of budget or a finding could not
be judged, else true.

The queue verdict judges each write by its acks level's promise (seed 003):
acks=all losses invalidate; acks=1/0 losses are reported (durability rows,
``lost-acks1-write``, ``lost-write-acks1``, ``unseen-acks1``, ...) and
invalidate only with ``strict_acks1`` (acks=1). Keys whose final read never
completed (:mod:`checkers.final_reads`) are unverified: their unseen records
and the acknowledged writes they hold make a clean verdict "unknown".
"""

from __future__ import annotations

import gc
import time as _time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers import observed
from checkers.durability import LOSS_ANOMALY, durability_verdict, merge_durability
from checkers.history.op import Op
from checkers.pipeline import PerKeyBudgetExceeded, get_spark, run_keys
from checkers.queue.checker import QueueOptions, finish, merge_key_results
from checkers.queue.keycheck import EXAMPLES
from checkers.queue.readings import JEPSEN
from checkers.verdict import UNKNOWN, Verdict, combine

# checkers.queue.scan, checkers.invariants and checkers.linearizable are
# imported where they are used: reference_impl.accel compiles them, the
# harness imports this module before the accelerator's loader, and a
# compiled module imported before the loader leaves the whole build unused
if TYPE_CHECKING:
    from checkers.queue.scan import QueueScan  # late: its line reader is compiled; loaded after the accelerator's loader

QUEUE_MODELS = ("queue",)
LINEARIZABLE_MODELS = ("register", "cas-register", "multi-register", "mutex", "set",
                       "fifo-queue", "kv", "kafka-log")
MODELS = QUEUE_MODELS + LINEARIZABLE_MODELS
DEFAULT_TIME_BUDGET = 300.0


class UnknownModel(ValueError):
    pass


def anomaly_counts(res: dict[str, Any]) -> dict[str, Any]:
    """Every checker's whole count per anomaly type, from a results.json
    object: ``anomalies`` keeps only the first examples of each."""
    counts: dict[str, Any] = {}
    for c in (res.get("checkers") or {}).values():
        if isinstance(c, dict) and isinstance(c.get("counts"), dict):
            counts.update(c["counts"])
    return counts


def check_history(
    ops: "list[Op] | QueueScan",
    *,
    model: str = "queue",
    engine: str = "inline",
    spark_master: str | None = None,
    time_budget: float | None = None,
    queue_options: Any = None,
    test: dict[str, Any] | None = None,
    strict_acks1: bool | None = None,
    model_options: dict[str, Any] | None = None,
    strict_duplicates: bool | None = None,
    invariants: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Check ``ops`` and return the results.json object.

    ``ops`` is the history's operations, or (queue model) a
    :class:`checkers.queue.scan.QueueScan` of them, e.g. a file read by
    :func:`checkers.queue.scan.scan_jsonl` without holding its operations;
    both give the same results. A scan is checked once: each key's columns
    are freed as the key is checked.

    ``test`` (a run's test.json) may carry the queue workload's
    ``sub_via``, ``txn`` and ``strict_acks1`` settings, which decide the
    allowed anomalies, and its ``keys`` (every key the run used: one that no
    final read covered is unverified). ``strict_acks1`` (when not None)
    overrides the options' setting. ``model_options`` go to the
    linearizability model's constructor (e.g. ``{"initial": {"x": 0}}``);
    the queue model takes none. ``strict_duplicates`` (when not None)
    makes ``duplicate-nonidempotent`` invalid. ``invariants`` (an
    :meth:`checkers.invariants.InvariantMonitor.summary` of the run's
    traces) is merged into the verdict by :func:`merge_invariants`, the same
    way for simulated and real runs."""
    if model not in MODELS:
        raise UnknownModel(f"unknown model {model!r} (expected one of {', '.join(MODELS)})")
    if engine not in ("inline", "spark"):
        raise ValueError(f"unknown engine {engine!r} (expected inline or spark)")
    from checkers.queue.scan import QueueScan, op_stats, scan_ops  # late: its line reader is compiled; loaded after the accelerator's loader

    if isinstance(ops, QueueScan) and model not in QUEUE_MODELS:
        raise UnknownModel(f"model {model!r} checks a list of operations, not a queue scan")
    if model_options and model in QUEUE_MODELS:
        raise UnknownModel(f"model {model!r} takes no model options (got {', '.join(sorted(model_options))})")
    queue_options = _queue_options(model, queue_options, test, strict_acks1, strict_duplicates)
    test_keys = (test or {}).get("keys")
    if not isinstance(test_keys, list):
        test_keys = None
    budget = DEFAULT_TIME_BUDGET if time_budget is None else float(time_budget)
    t0 = _time.monotonic()
    deadline = t0 + budget
    # The checks allocate millions of small acyclic containers; the cyclic
    # collector would rescan the whole history each time, so pause it.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if model in QUEUE_MODELS:
            # the operation counts come from the queue checker's own scan of
            # the history (a second pass over a list cost ~3% of a check)
            t = _time.monotonic()
            scan = ops if isinstance(ops, QueueScan) else scan_ops(ops)
            res = _check_queue(scan, _time.monotonic() - t, engine, spark_master, deadline, queue_options,
                               test_keys, partial=bool((test or {}).get("partial")))
            stats = scan.stats.result()
        else:
            res = _check_linearizable(ops, model, budget, model_options or {})
            stats = op_stats(ops)
    finally:
        if gc_was_enabled:
            gc.enable()
    res["stats"] = {**stats, **res.get("stats", {}),
                    "model": model, "engine": engine if model in QUEUE_MODELS else "inline",
                    "check_seconds": round(_time.monotonic() - t0, 3), "time_budget_s": budget}
    if invariants is not None:
        merge_invariants(res, invariants)
    return res


def _queue_options(model: str, queue_options: Any, test: dict[str, Any] | None,
                   strict_acks1: bool | None, strict_duplicates: bool | None) -> Any:
    """The queue options: given, else test.json's; ``strict_acks1`` and
    ``strict_duplicates`` (when not None) override theirs."""
    if queue_options is None and test:
        queue_options = queue_options_from_test(test)
    if strict_acks1 is not None and model in QUEUE_MODELS:
        queue_options = replace(queue_options or QueueOptions(), strict_acks1=bool(strict_acks1))
    if strict_duplicates is not None and model in QUEUE_MODELS:
        queue_options = replace(queue_options or QueueOptions(), strict_duplicates=bool(strict_duplicates))
    return queue_options


def trace_invariants(run_dir: Any, test: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The invariant monitor over a run directory's ``nodes/*/trace.jsonl``
    (:func:`checkers.invariants.check_trace_dir`), or None when the run has no
    traces (a bare history). ``seed`` and ``min_isr`` come from test.json."""
    from checkers.invariants import check_trace_dir  # late: compiled; loaded after the accelerator's loader

    nodes = Path(run_dir) / "nodes"
    if not nodes.is_dir() or not any(nodes.glob("*/trace.jsonl")):
        return None
    test = test or {}
    nested = test.get("options") if isinstance(test.get("options"), dict) else {}
    min_isr = test.get("min_isr", nested.get("min_isr"))
    summary = check_trace_dir(run_dir, seed=test.get("seed"), min_isr=min_isr)
    # real Kafka's observer: the rules on what it saw from outside (checkers.observed)
    return observed.merge(summary, observed.check_observer_trace(run_dir))


def merge_invariants(res: dict[str, Any], inv: dict[str, Any]) -> dict[str, Any]:
    """Fold the invariant monitor's summary (:mod:`checkers.invariants`) into
    a results object, in place: ``checkers.invariants``, ``invariants``, each
    violated invariant's kind in ``anomaly_types``/``anomalies``, and ``valid``
    false on any violation (a broken protocol invariant is a bug whatever the
    client history shows). Both runtimes call this, so a simulated run and a
    real one with the same findings get the same verdict."""
    counts = dict(inv.get("counts") or {})
    violations = list(inv.get("violations") or [])
    res["invariants"] = inv
    res.setdefault("checkers", {})["invariants"] = {
        "valid": inv.get("valid", not counts), "counts": counts, "steps": inv.get("steps")}
    if counts:
        anomalies = res.setdefault("anomalies", {})
        for v in violations:
            lst = anomalies.setdefault(v.get("kind", "invariant"), [])
            if len(lst) < 32:
                lst.append(v)
        for k in counts:
            anomalies.setdefault(k, [])
        res["anomaly_types"] = sorted(set(res.get("anomaly_types") or []) | set(counts))
    if counts or inv.get("valid") is False:
        res["valid"] = False
    return res


def queue_options_from_test(test: dict[str, Any], reading: str = "kraftwerk") -> Any:
    """Queue checker options from a run's test.json (``sub_via``, ``txn``,
    ``strict_acks1``, ``strict_duplicates``, ``ww_deps``, ``strict_cycles``,
    ``all_errors``, at top level or under ``options``), for ``reading``
    (:mod:`checkers.queue.readings`): ww dependencies default on in
    kraftwerk's reading and off in Jepsen's, as Jepsen's ``:ww-deps``."""
    nested = test.get("options") if isinstance(test.get("options"), dict) else {}

    def opt(name: str, default: bool) -> bool:
        return bool(test.get(name, nested.get(name, default)))

    sv = test.get("sub_via") or nested.get("sub_via") or ("assign",)
    return QueueOptions(sub_via=tuple([sv] if isinstance(sv, str) else sv),
                        txn=opt("txn", False), strict_acks1=opt("strict_acks1", False),
                        strict_duplicates=opt("strict_duplicates", False),
                        ww_deps=opt("ww_deps", reading != JEPSEN), strict_cycles=opt("strict_cycles", False),
                        all_errors=opt("all_errors", False), reading=reading)


def _check_queue(scan: "QueueScan", t_scan: float, engine: str, spark_master: str | None, deadline: float,
                 queue_options: Any, test_keys: list[Any] | None = None,
                 partial: bool = False) -> dict[str, Any]:
    """The queue checks' results from the scan of the history (made in
    ``t_scan`` seconds)."""
    opts = queue_options or QueueOptions()
    t = _time.monotonic()
    proj = scan.finish().projection
    assert proj is not None
    t_proj = t_scan + _time.monotonic() - t
    t_spark = 0.0
    if engine == "spark" and proj.keys:
        t = _time.monotonic()
        get_spark(spark_master)  # once per process; timed apart from the checks
        t_spark = _time.monotonic() - t
    t = _time.monotonic()
    per_key_complete = True
    try:
        # rw edges only when rw cycles are searched; each key's columns are
        # freed as it is handed over (only the key names are used below)
        results = run_keys(proj.keys, engine=engine, spark_master=spark_master, want_rw=opts.rw,
                           deadline=deadline, all_errors=opts.all_errors, release=True)
    except PerKeyBudgetExceeded as e:
        results = e.results
        per_key_complete = False
    t_keys = _time.monotonic() - t
    coverage = scan.finals.result(set(proj.keys) | {str(k) for k in (test_keys or ())}, partial=partial)
    unverified = coverage["incomplete_keys"] if coverage is not None else []
    merged = merge_key_results(results, unverified, None if opts.all_errors else EXAMPLES)
    t = _time.monotonic()
    q = finish(proj, merged, opts, deadline)  # past the deadline: cycles "unknown"
    q["per_key"] = "complete" if per_key_complete else "budget-exceeded"
    q["keys_checked"] = len(results)
    if not per_key_complete and q["valid"] is True:
        q["valid"] = UNKNOWN
    t_cross = _time.monotonic() - t
    durability = merge_durability(merged["durability"])
    dur_anoms, dur_bad = durability_verdict(durability, opts.strict_acks1)
    dur_valid: Verdict = False if dur_bad else (True if per_key_complete else UNKNOWN)
    anomalies = dict(q["anomalies"])
    anomalies.update(dur_anoms)
    fr_valid, coverage = _final_reads_verdict(coverage, merged, opts)
    q["worst_realtime_lag"] = scan.lag.result()
    q["consume_counts"] = scan.consume.result()
    q["info_txn_causes"] = scan.causes.result()
    acked = sum(n for r in results for n in r.get("acked", {}).values())
    # nothing was at stake: a run that checked no key, or in which no write
    # was acknowledged, shows nothing about the log (Jepsen would say valid)
    evidence: Verdict = True if (results and acked) or opts.reading == JEPSEN else UNKNOWN
    q["evidence"] = {"keys_checked": len(results), "acked_writes": acked, "valid": evidence}
    processing = scan.processing.result()  # consume-transform-produce rounds, if any
    if processing is not None:
        anomalies.update(processing["anomalies"])
    # a read_committed final read held below the HW to its deadline (checkers.final_reads)
    stuck = (coverage or {}).get("lso_stuck") or []
    if stuck:
        anomalies["read-committed-stuck"] = stuck[:EXAMPLES]
    valid = combine([q["valid"], dur_valid, fr_valid, evidence, not stuck] +
                    ([processing["valid"]] if processing is not None else []))
    q["seconds"] = {"project": round(t_proj, 3), "spark_start": round(t_spark, 3), "per_key": round(t_keys, 3),
                    "cross_key": round(t_cross, 3)}
    return {
        "valid": valid,
        "reading": opts.reading_name,
        "anomaly_types": sorted(anomalies),
        "anomalies": anomalies,
        "durability": durability,
        "stats": {"keys": len(proj.keys), "warnings": proj.warnings[:20],
                  "warning_count": len(proj.warnings), "history": proj.counts},
        "checkers": {
            "queue": q,
            "durability": _durability_checker(durability, dur_anoms, dur_bad, dur_valid, per_key_complete,
                                              opts.strict_acks1),
            **({"final-reads": coverage} if coverage is not None else {}),
            **({"processing": processing} if processing is not None else {}),
        },
    }


def _final_reads_verdict(coverage: dict[str, Any] | None, merged: dict[str, Any],
                         opts: Any) -> tuple[Verdict, dict[str, Any] | None]:
    """Unknown when a key no final read covered holds acknowledged writes
    whose loss would count; the coverage with that verdict and those writes."""
    if coverage is None:
        return True, None
    judged = ("all", "None") + (("1",) if opts.strict_acks1 else ())
    at_stake = {k: sum(n for lv, n in acked.items() if lv in judged)
                for k, acked in merged["unverified_acked"].items()}
    at_stake = {k: n for k, n in sorted(at_stake.items()) if n}
    # Jepsen's reading has no unverified keys: their unseen records are
    # judged as unseen (checkers.queue.checker.finish)
    fr_valid: Verdict = UNKNOWN if at_stake and opts.reading != JEPSEN else True
    return fr_valid, {"valid": fr_valid, **coverage, "unverified_acked_writes": at_stake}


def _durability_checker(durability: dict[str, Any], anomalies: dict[str, Any], bad: list[str],
                        valid: Verdict, complete: bool, strict_acks1: bool) -> dict[str, Any]:
    """results.json's ``checkers.durability``."""
    return {"valid": valid,
            "complete": complete,
            "anomaly_types": sorted(anomalies),
            "bad_anomaly_types": bad,
            # the whole count: the examples stop at EXAMPLES
            "counts": {name: durability[label]["lost"] for label, name in LOSS_ANOMALY.items()
                       if name in anomalies},
            "examples": anomalies,
            "strict_acks1": strict_acks1,
            "rule": "acks=all acknowledged records must survive; "
                    "acks=1/0 losses are reported (lost-acks1-write, "
                    "lost-acks0-write), acks=1 ones invalid only with strict_acks1"}


def _check_linearizable(ops: list[Op], model: str, budget: float,
                        model_options: dict[str, Any]) -> dict[str, Any]:
    import checkers.linearizable as lin  # late: its WGL search is compiled; loaded after the accelerator's loader

    mdl: Any = model
    if model_options:
        # build the model here so that a wrongly typed option is a ModelError
        # (one line for the user), not a crash deep in the search
        try:
            mdl = lin.make_model(model, **model_options)
        except lin.ModelError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as e:
            raise lin.ModelError(f"bad options for model {model!r}: {e}") from None
    r = lin.check(ops, model=mdl, time_budget=budget)
    if r.get("valid") is True and not r.get("keys"):
        # linearizable by the definition (nothing to order), but a run that
        # checked no operation is no evidence: unknown, never valid
        r["valid"], r["cause"] = UNKNOWN, "no-ops"
    valid = r.get("valid")
    anomalies: dict[str, list] = {}
    if valid is False:
        anomalies["nonlinearizable"] = [{k: r.get(k) for k in ("key", "op", "unlinearizable")
                                         if k in r}]
    return {
        "valid": valid,
        "anomaly_types": sorted(anomalies),
        "anomalies": anomalies,
        "durability": {},
        "stats": {},
        "checkers": {"linearizable": r},
    }
