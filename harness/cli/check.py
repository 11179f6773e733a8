"""``kraftwerk check PATH``: check a history and print (and store) the verdict.

PATH is a run directory (its ``history.jsonl`` is read and ``results.json``
written next to it; a queue run's liveness after its final heal is judged
too, ``checkers.availability``), a ``.jsonl`` history or a Jepsen ``.edn``
history. An unknown verdict prints its cause.
Exit codes: 0 valid, 1 anomalies, 2 bad input, 3 unknown (budget exhausted,
or findings that cannot be judged, e.g. unseen records of a key whose final
read never completed).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

import reference_impl  # noqa: F401  its compiled line reader, when built (reference_impl.accel)
from checkers.availability import check_run_dir, merge_availability, set_cause
from checkers.check import check_history, queue_options_from_test, trace_invariants
from checkers.history.edn import read_edn
from checkers.history.jsonl import is_partial, read_jsonl
from checkers.history.op import HistoryError
from checkers.history.source import MAX_BYTES, check_size
from checkers.invariants import TraceError
from checkers.queue.checker import KNOWN_ANOMALIES
from checkers.queue.readings import JEPSEN, KRAFTWERK, declared_options
from checkers.queue.scan import MalformedOp, scan_jsonl
from harness.errors import HarnessError, UsageError, exit_code_for_valid
from harness.rundir.trust import trusted_dir, write_file

MODEL_CHOICES = ("queue", "cas-register", "register", "multi-register", "mutex", "set",
                 "fifo-queue", "kv", "kafka-log")


def _load(path: Path, warnings: list[str], model: str = "queue",
          max_bytes: int | None = None) -> tuple[Any, Path | None]:
    """Read the history; returns (ops, run_dir or None). A JSONL history
    checked with the queue model is scanned line by line into columns
    (:func:`checkers.queue.scan.scan_jsonl`), never held as operations.
    Only a regular file of at most ``max_bytes`` is read
    (:mod:`checkers.history.source`)."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    run_dir = None
    if path.is_dir():
        run_dir = trusted_dir(path, "kraftwerk check RUN_DIR", create=False)  # results.json goes there
        path = run_dir / "history.jsonl"
        if not path.is_file():
            raise UsageError(f"{run_dir}: not a run directory (no history.jsonl)")
    suffix = path.suffix.lower()
    try:
        check_size(path, MAX_BYTES if max_bytes is None else max_bytes)
        if suffix == ".edn":
            ops = read_edn(path)
        elif suffix in (".jsonl", ".json"):
            ops = scan_jsonl(path, warnings) if model == "queue" else read_jsonl(path, warnings)
        else:
            raise UsageError(f"{path}: expected a run directory, a .jsonl or an .edn history")
    except MalformedOp as e:  # read, but not a queue history: as check_history words it
        raise UsageError(f"bad history for model {model}: {e}") from None
    except HistoryError as e:
        raise UsageError(f"bad history: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read ({e})") from None
    return ops, run_dir


def _partial(path: Path, run_dir: Path | None, warnings: list[str]) -> bool:
    """A history whose recorder never closed it (a killed harness), or whose
    last line is torn: it checks, but it is a partial run, and says so."""
    hist = run_dir / "history.jsonl" if run_dir is not None else path
    torn = any("truncated last line" in w for w in warnings)
    if is_partial(hist) or torn:
        warnings.append(f"{hist}: partial run: the harness stopped before closing its history; "
                        "checking the operations it had recorded")
        return True
    return False


def parse_model_options(items: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs -> a dict; VALUE is read as JSON when it parses
    (``initial={"x":0}``, ``independent=true``), else kept as a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--model-option {item!r}: expected KEY=VALUE")
        if not key.isidentifier():
            raise UsageError(f"--model-option {item!r}: {key!r} is not an option name")
        if key in out:
            raise UsageError(f"--model-option {key}: given twice")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _queue_options(path: Path, ops: Any, test: dict[str, Any] | None, sub_via: tuple[str, ...],
                   txn: bool | None, also_allowed: tuple[str, ...], ww_deps: bool | None,
                   jepsen: bool | None, strict_cycles: bool | None, all_errors: bool | None) -> Any:
    """The queue checker's options: the flags, else test.json, else what a
    Jepsen history declares by its own operations (its :assign/:subscribe
    ops, its :txn ops), else the reading's defaults (``checkers.queue.readings``)."""
    unknown = [a for a in also_allowed if a not in KNOWN_ANOMALIES]
    if unknown:
        raise UsageError(f"--allow {unknown[0]}: not a queue anomaly type "
                         f"(one of {', '.join(sorted(KNOWN_ANOMALIES))})")
    if jepsen is None:
        jepsen = path.suffix.lower() == ".edn"
    if jepsen and strict_cycles:
        raise UsageError("--strict-cycles is kraftwerk's reading: drop it, or add --kraftwerk")
    declared = declared_options(ops) if not test else {}
    base = queue_options_from_test({**declared, **(test or {})}, JEPSEN if jepsen else KRAFTWERK)
    return replace(base, sub_via=tuple(sub_via) or base.sub_via, txn=bool(txn) or base.txn,
                   also_allowed=frozenset(also_allowed),
                   ww_deps=base.ww_deps if ww_deps is None else ww_deps,
                   strict_cycles=bool(strict_cycles) or base.strict_cycles,
                   all_errors=bool(all_errors) or base.all_errors)


def _read_test(run_dir: Path | None) -> dict[str, Any] | None:
    """A run directory's test.json, if it has one that is an object."""
    if run_dir is None or not (run_dir / "test.json").is_file():
        return None
    try:
        test = json.loads((run_dir / "test.json").read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{run_dir / 'test.json'}: not valid JSON ({e})") from None
    return test if isinstance(test, dict) else None


@click.command("check")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--model", type=click.Choice(MODEL_CHOICES), default="queue", show_default=True,
              help="queue: Kafka anomalies + durability; the others: linearizability against that model.")
@click.option("--engine", type=click.Choice(("inline", "spark")), default=None,
              help="Where per-key checks run [default: inline; spark if --spark-master is given].")
@click.option("--spark-master", metavar="URL", default=None,
              help="Spark master (default: an embedded local[*] session).")
@click.option("--time-budget", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Give up with 'unknown' after this long (default 300).")
@click.option("--sub-via", type=click.Choice(("assign", "subscribe")), multiple=True,
              help="How consumers got partitions (queue; default from test.json, else assign). "
                   "subscribe allows poll-skip and nonmonotonic-poll, as in Jepsen.")
@click.option("--txn", is_flag=True, default=None,
              help="Operations were Kafka transactions (queue): G0/G1c cycles are allowed.")
@click.option("--allow", "also_allowed", multiple=True, metavar="TYPE",
              help="Also allow this queue anomaly type (repeatable).")
@click.option("--fail-on-acks1-loss", "strict_acks1", is_flag=True, default=None,
              help="Lost acks=1 records make the run invalid (queue). By default they are reported "
                   "(lost-acks1-write, lost-write-acks1, unseen-acks1) but allowed: acks=1 never "
                   "promised to survive a leader failure. Default from test.json's strict_acks1.")
@click.option("--fail-on-duplicates", "strict_duplicates", is_flag=True, default=None,
              help="Count duplicate-nonidempotent (a value appended twice by a non-idempotent "
                   "producer's retry: at-least-once, allowed by default) as an anomaly. "
                   "Default from test.json's strict_duplicates.")
@click.option("--ww-deps/--no-ww-deps", "ww_deps", default=None,
              help="Infer write-write dependencies from offsets (queue; Jepsen's :ww-deps), which finds G0 "
                   "and allows G1c. Default: on in kraftwerk's reading, off in Jepsen's (as Jepsen's), "
                   "or test.json's ww_deps.")
@click.option("--jepsen/--kraftwerk", "jepsen", default=None,
              help="Which reading decides the verdict (queue): --jepsen is Jepsen's allowed-error-types for "
                   "the options (--sub-via, --ww-deps; an EDN history's own :assign/:subscribe operations) "
                   "and nothing else; --kraftwerk is kraftwerk's (acks-level promises, unverified keys "
                   "unknown, ww deps on). Default: --jepsen for an .edn history, --kraftwerk otherwise.")
@click.option("--strict-cycles", is_flag=True, default=None,
              help="kraftwerk's stricter reading (queue): G0/G1c cycles count unless --txn "
                   "(Jepsen allows G0 always and G1c with ww deps).")
@click.option("--all-errors", is_flag=True, default=None,
              help="Keep every example of every anomaly (queue); by default a sample, as Jepsen's.")
@click.option("--model-option", "model_option", multiple=True, metavar="KEY=VALUE",
              help="Option for the linearizability model, VALUE as JSON when it parses "
                   "(repeatable), e.g. --model-option 'initial={\"x\":0,\"y\":0}'.")
@click.option("--max-history-bytes", type=click.IntRange(min=1), default=None, metavar="BYTES",
              help="Refuse a history file larger than this (default 2 GiB).")
@click.option("--json", "as_json", is_flag=True, help="Print the result object on stdout.")
def check_cmd(path: Path, model: str, engine: str | None, spark_master: str | None,
              time_budget: float | None, sub_via: tuple[str, ...], txn: bool | None,
              also_allowed: tuple[str, ...], strict_acks1: bool | None,
              strict_duplicates: bool | None, ww_deps: bool | None, jepsen: bool | None,
              strict_cycles: bool | None, all_errors: bool | None, model_option: tuple[str, ...],
              max_history_bytes: int | None,
              as_json: bool) -> int:
    """Check a history: a run directory, a .jsonl or an .edn file.

    \b
    A run directory's results.json is (re)written; its node traces, when
    present, go through the invariant monitor (a violation is invalid).
    Exit codes: 0 valid, 1 anomalies, 2 bad input, 3 unknown (budget), 4 harness error.
    Bad input is one line: not a regular file, larger than --max-history-bytes,
    a line that is not an operation, a number that is not one (NaN,
    Infinity, 1e999), a field or value of the wrong type. A run directory's
    history cut short by a crash is checked as far as it is whole.
    """
    model_options = parse_model_options(model_option)
    if model_options and model == "queue":
        raise UsageError("--model-option: the queue model takes no options "
                         "(use --sub-via, --txn, --allow, --fail-on-acks1-loss, --fail-on-duplicates, "
                         "--ww-deps/--no-ww-deps, --jepsen/--kraftwerk, --strict-cycles, --all-errors)")
    warnings: list[str] = []
    ops, run_dir = _load(path, warnings, model, max_history_bytes)
    partial = _partial(path, run_dir, warnings)
    for w in warnings:
        click.echo(f"kraftwerk: warning: {w}", err=True)
    if engine is None:
        engine = "spark" if spark_master else "inline"
    test = _read_test(run_dir)
    if partial:
        # the run was meant to end in final reads: a key none covered is unverified, not lost
        test = {**(test or {}), "partial": True}
    queue_options = None
    if model == "queue":
        queue_options = _queue_options(path, ops, test, sub_via, txn, also_allowed, ww_deps, jepsen,
                                       strict_cycles, all_errors)
    invariants = None
    if run_dir is not None and model == "queue":
        try:
            invariants = trace_invariants(run_dir, test)
        except TraceError as e:
            raise UsageError(f"bad trace: {e}") from None
    try:
        res = check_history(ops, model=model, engine=engine, spark_master=spark_master,
                            time_budget=time_budget, test=test, queue_options=queue_options,
                            strict_acks1=strict_acks1, model_options=model_options or None,
                            strict_duplicates=strict_duplicates, invariants=invariants)
    except HistoryError as e:
        raise UsageError(f"bad history for model {model}: {e}") from None
    except ValueError as e:
        if type(e).__name__ in ("ModelError", "UnknownModel"):
            raise UsageError(f"model {model}: {e}") from None
        raise
    except RuntimeError as e:
        if type(e).__name__ == "SparkUnavailable":
            raise HarnessError(str(e)) from None
        raise
    if run_dir is not None and model == "queue":  # the run's liveness after its final heal, as the run judged it
        merge_availability(res, check_run_dir(run_dir, test))
    set_cause(res)
    if warnings:
        res.setdefault("warnings", []).extend(warnings)
    if partial:
        res["partial"] = True
    if run_dir is not None:
        write_file(run_dir / "results.json", json.dumps(res, indent=1, default=str) + "\n")
    if as_json:
        click.echo(json.dumps(res, default=str))
    else:
        from harness.cli.check_summary import print_summary  # late: rich (~40 ms) only for this, not --json

        print_summary(res, str(path))
    return exit_code_for_valid(res.get("valid"))


def register(group: click.Group) -> None:
    group.add_command(check_cmd)
