"""The checking pipeline: history -> per-key events -> Spark DataFrame split
by key (topic-partition) -> per-key checkers on the executors -> merged.

Two engines run the *same* per-key function (:func:`checkers.queue.keycheck.check_key`):

``inline``  in this process, key after key;
``spark``   on a SparkSession: an embedded ``local[*]`` one bound to 127.0.0.1
            with quiet logs by default, or any cluster via ``spark_master``.
            The driver writes each key's events to a file of their own, in
            columns (:mod:`checkers.queue.columns`: a few bytes per event);
            one row per key names its file, ``mapPartitions`` runs the checks
            on the executors, which read the files and only send back the
            small per-key results (anomaly examples, counts, graph edges,
            durability partials). No history passes through the JVM or the
            driver's task payloads. The files go to a private directory on
            the driver's machine, or to ``KRAFTWERK_SPARK_DIR`` (a directory
            every executor sees at the same path) for a cluster elsewhere.

The session is created once per process and reused (start-up is ~6 s). Its
files (the JVM's output, the log4j2 settings, the package zip) live in a
private directory made for this process (``mkdtemp``, 0700) and created
there with ``O_EXCL``, so no other local user can plant or redirect them;
the directory is removed at exit unless start-up failed (then the error
message names the log in it).
Executors get the ``checkers`` package as a zip through ``addPyFile``, so a
remote cluster needs nothing but Python and PySpark.
"""

from __future__ import annotations

import atexit
import gc
import io
from array import array
import marshal
import os
import pickle
import shutil
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from checkers.forked import MIN_OPS, Forked, can_fork
from checkers.queue.columns import KeyEvents, events_from_payload
from checkers.queue.keycheck import check_key
from checkers.queue.keyfast import check_clean_key

ENGINES = ("inline", "spark")

_lock = threading.Lock()
_sessions: dict[str, Any] = {}
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


_private: Path | None = None


def _private_dir() -> Path:
    """This process's own directory for Spark's files: made by us (0700),
    never one found lying in the shared temp directory."""
    global _private
    if _private is None:
        _private = Path(tempfile.mkdtemp(prefix="kraftwerk-spark-"))
    return _private


def _create(path: Path, data: bytes) -> Path:
    """Write a new file that must not exist yet (O_EXCL, no symlink followed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _package_zip() -> str:
    """Zip the ``checkers`` package for executors into the private directory."""
    root = Path(__file__).resolve().parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(root.rglob("*.py")):
            info = zipfile.ZipInfo(str(Path("checkers") / p.relative_to(root)), date_time=(2020, 1, 1, 0, 0, 0))
            z.writestr(info, p.read_bytes())
    return str(_create(_private_dir() / f"checkers-{uuid.uuid4().hex[:8]}.zip", buf.getvalue()))


def _remove_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


class SparkUnavailable(RuntimeError):
    """No SparkSession could be started (no Java, bad master URL...)."""


def _last_error(log_path: Path) -> str:
    """The last error-looking line the JVM wrote, for a one-line message."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()[-200:]
    except OSError:
        return ""
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("at ") or line.startswith("..."):
            continue  # stack frames
        if "Exception" in line or "Error" in line or "error" in line:
            return line[:200]
    return ""


def get_spark(master: str | None = None) -> Any:
    """The process-wide SparkSession for ``master`` (default ``local[*]``)."""
    master = master or "local[*]"
    with _lock:
        s = _sessions.get(master)
        if s is not None and s.sparkContext._jsc is not None:
            return s
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        private = _private_dir()
        log4j = private / "log4j2.properties"
        if not log4j.exists():
            _create(log4j, _LOG4J.encode())
        from pyspark.sql import SparkSession  # late: pyspark (JVM-backed, a second to import), only for Spark

        java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Dlog4j.configurationFile=file:{log4j}"
        b = (SparkSession.builder.master(master).appName("kraftwerk-check")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.extraJavaOptions", java_opts)
             .config("spark.executor.extraJavaOptions", java_opts)
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.python.worker.reuse", "true"))
        if master.startswith("local"):
            b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        # The JVM inherits stderr when it is launched: hand it a log file
        # instead, so its banner and warnings stay out of the user's terminal.
        log_path = private / f"spark-{uuid.uuid4().hex[:8]}.log"
        saved = os.dup(2)
        try:
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "ab") as logf:
                os.dup2(logf.fileno(), 2)
                s = b.getOrCreate()
        except Exception as e:
            # the JVM's last error goes into the message; its whole log stays
            # only for a user who asked for the details (nothing else a
            # failed start makes outlives the process)
            keep = bool(os.environ.get("KRAFTWERK_DEBUG"))
            if not keep:
                atexit.register(_remove_dir, private)
            where = f"log: {log_path}" if keep else "KRAFTWERK_DEBUG=1 keeps Spark's log"
            raise SparkUnavailable(
                f"cannot start Spark (master {master}): {_last_error(log_path) or e} ({where})"
            ) from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        atexit.register(_remove_dir, private)
        s.sparkContext.setLogLevel("ERROR")
        s.sparkContext.addPyFile(_package_zip())
        _sessions[master] = s
        return s


def stop_spark() -> None:
    with _lock:
        for s in _sessions.values():
            try:
                s.stop()
            except Exception:  # already gone
                pass
        _sessions.clear()


def _run_partition(rows: Iterator[Any], want_rw: bool, all_errors: bool = False) -> Iterator[bytes]:
    """Executor side: read each key's file and check the key."""
    gc.disable()  # short-lived worker, acyclic data: skip collector passes
    try:
        for row in rows:
            with open(row["path"], "rb") as f:
                key, events = _load_key(f.read())
            yield marshal.dumps(check_key(key, events, want_rw, all_errors))
            del events
    finally:
        gc.enable()


def _dump_key(keys: Mapping[str, list], key: str) -> bytes:
    """A key's file: its columns when the projection keeps them
    (:class:`checkers.queue.columns.KeyEvents`), else its events."""
    if isinstance(keys, KeyEvents):
        return marshal.dumps(("columns", keys.payload(key)))
    return marshal.dumps(("events", (key, keys[key])))


def _load_key(b: bytes) -> tuple[str, list]:
    tag, payload = marshal.loads(b)
    return events_from_payload(payload) if tag == "columns" else payload


def _key_dir() -> Path:
    """Where the driver writes the per-key files the executors read:
    ``KRAFTWERK_SPARK_DIR`` (a directory every executor sees at the same
    path, for a cluster on other machines), else this process's private
    directory (local[*] and a cluster on this machine)."""
    shared = os.environ.get("KRAFTWERK_SPARK_DIR")
    base = Path(shared) if shared else _private_dir()
    return Path(tempfile.mkdtemp(prefix="keys-", dir=base))


def _balanced(items: list[tuple[str, Any]], n: int,
              size: Callable[[tuple[str, Any]], int] = lambda kv: len(kv[1])) -> list[tuple[str, Any]]:
    """Order rows so that Spark's contiguous, equal-count slicing of a local
    list into ``n`` partitions gives each a similar number of bytes: deal the
    rows largest first in snake order (0..n-1, n-1..0, ...) into ``n`` bins of
    equal count, then lay the bins end to end."""
    bins: list[list[tuple[str, Any]]] = [[] for _ in range(n)]
    for i, kv in enumerate(sorted(items, key=lambda kv: -size(kv))):
        r, j = divmod(i, n)
        bins[j if r % 2 == 0 else n - 1 - j].append(kv)
    return [kv for b in bins for kv in b]


class PerKeyBudgetExceeded(Exception):
    """The per-key stage ran out of time; ``results`` holds the keys done."""

    def __init__(self, results: list[dict[str, Any]]) -> None:
        super().__init__("per-key checks exceeded the time budget")
        self.results = results


def _compact(r: dict[str, Any]) -> dict[str, Any]:
    """A key's result as the driver keeps it: its graph edges (op indices,
    millions at 10M operations) in flat arrays rather than lists of ints."""
    for name, e in r["edges"].items():
        try:
            r["edges"][name] = array("q", e)
        except (OverflowError, TypeError):  # an op index past 64 bits: kept as it is
            pass
    return r


def run_keys(keys: Mapping[str, list], engine: str = "inline", spark_master: str | None = None,
             want_rw: bool = True, deadline: float | None = None,
             all_errors: bool = False, release: bool = False) -> list[dict[str, Any]]:
    """Run the per-key checks on every key with the chosen engine
    (``all_errors``: keep every example, not the first of each type). Past
    ``deadline`` (a ``time.monotonic()`` value) the inline engine stops
    between keys and Spark jobs are cancelled: :class:`PerKeyBudgetExceeded`.
    ``release``: each key's columns are freed once handed over (the
    projection's keys are then names only), so the driver's memory does
    not hold the history and the results at once."""
    drop = keys.release if release and isinstance(keys, KeyEvents) else (lambda _k: None)
    if engine == "inline":
        names = list(keys)
        if isinstance(keys, KeyEvents) and can_fork() and len(names) > 1 \
                and sum(map(len, keys.columns.values())) >= MIN_OPS:
            return _inline_forked(keys, names, want_rw, deadline, all_errors, drop)
        out, done = _inline(keys, names, want_rw, deadline, all_errors, drop)
        if not done:
            raise PerKeyBudgetExceeded(out)
        return out
    if engine != "spark":
        raise ValueError(f"unknown engine {engine!r} (expected inline or spark)")
    if not keys:
        return []
    spark = get_spark(spark_master)
    from pyspark.sql.types import StringType, StructField, StructType  # late: only for Spark (see get_spark)

    schema = StructType([StructField("key", StringType(), False),
                         StructField("path", StringType(), False)])
    # The driver writes one file per key (its columns: a few bytes per
    # event) and sends the executors only the paths; they read the files.
    # Rows are laid out so the local-list slicing already splits them into
    # balanced partitions (no shuffle).
    n = max(1, min(len(keys), spark.sparkContext.defaultParallelism))
    kdir = _key_dir()
    try:
        files: list[tuple[str, tuple[str, int]]] = []
        for i, k in enumerate(keys):
            path = kdir / f"{i}.key"
            data = _dump_key(keys, k)
            drop(k)
            _create(path, data)
            files.append((k, (str(path), len(data))))
        rows = _balanced(files, n, size=lambda kv: kv[1][1])
        df = spark.createDataFrame([(k, p) for k, (p, _n) in rows], schema)
        return _collect_keys(spark, df, want_rw, all_errors, deadline)
    finally:
        _remove_dir(kdir)


def _inline(keys: Mapping[str, list], names: list[str], want_rw: bool, deadline: float | None,
            all_errors: bool, drop: Callable[[str], None]) -> tuple[list[dict[str, Any]], bool]:
    """The per-key checks of ``names`` here, in order: the results, and
    whether every key was checked before ``deadline``."""
    # a clean key of the plain shape is checked from its columns
    # (checkers.queue.keyfast), the same result; any other key as events
    columnar = isinstance(keys, KeyEvents)
    assigns = keys.assigns if columnar else ()  # type: ignore[attr-defined]
    out: list[dict[str, Any]] = []
    for k in names:
        if deadline is not None and time.monotonic() > deadline:
            return out, False
        cols = keys.columns.get(k) if columnar else None  # type: ignore[attr-defined]
        r = check_clean_key(k, cols, want_rw, assigns) if cols is not None else None
        if r is not None:
            drop(k)
            out.append(_compact(r))
            continue
        evs = keys[k]
        drop(k)
        out.append(_compact(check_key(k, evs, want_rw, all_errors)))
        del evs
    return out, True


def _inline_forked(keys: Any, names: list[str], want_rw: bool, deadline: float | None, all_errors: bool,
                   drop: Callable[[str], None]) -> list[dict[str, Any]]:
    """The inline per-key checks on two cores: about half the events'
    keys checked in a forked process (:mod:`checkers.forked`) while this
    one checks the rest; the results in key order, as :func:`_inline`
    gives them (and its own if the fork fails)."""
    size = {k: len(keys.columns[k]) for k in names}
    mine: list[str] = []
    theirs: list[str] = []
    load = [0, 0]
    for k in sorted(names, key=lambda k: -size[k]):  # the biggest first, each to the lighter side
        side = 0 if load[0] <= load[1] else 1
        (mine, theirs)[side].append(k)
        load[side] += size[k]
    order = {k: i for i, k in enumerate(names)}
    mine.sort(key=order.__getitem__)
    theirs.sort(key=order.__getitem__)
    with Forked(_inline_part, keys, theirs, want_rw, deadline, all_errors) as other:
        out, done = _inline(keys, mine, want_rw, deadline, all_errors, drop)
        f = other.output()
        if f is not None:
            got, done_there = pickle.load(f)
            for k in theirs:
                drop(k)
        else:
            got, done_there = _inline(keys, theirs, want_rw, deadline, all_errors, drop)
    out += got
    out.sort(key=lambda r: order[r["key"]])
    if not (done and done_there):
        raise PerKeyBudgetExceeded(out)
    return out


def _inline_part(out: Any, keys: Any, names: list[str], want_rw: bool, deadline: float | None,
                 all_errors: bool) -> None:
    """In the forked process: :func:`_inline` of ``names``, pickled."""
    pickle.dump(_inline(keys, names, want_rw, deadline, all_errors, lambda _k: None), out,
                protocol=pickle.HIGHEST_PROTOCOL)


def _collect_keys(spark: Any, df: Any, want_rw: bool, all_errors: bool,
                  deadline: float | None) -> list[dict[str, Any]]:
    """Run the per-key checks over ``df``'s rows on the executors, under the deadline."""
    rw, every = bool(want_rw), bool(all_errors)
    rdd = df.rdd.mapPartitions(lambda it: _run_partition(it, rw, every))
    sc = spark.sparkContext
    group = f"kraftwerk-check-{uuid.uuid4().hex[:12]}"
    box: dict[str, Any] = {}

    def collect() -> None:
        try:
            sc.setJobGroup(group, "kraftwerk per-key checks", interruptOnCancel=True)
            box["out"] = rdd.collect()
        except BaseException as e:  # re-raised on the calling thread
            box["error"] = e

    th = threading.Thread(target=collect, name="kraftwerk-spark-collect", daemon=True)
    th.start()
    th.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    if th.is_alive():
        sc.cancelJobGroup(group)
        th.join(30)
        raise PerKeyBudgetExceeded([])
    if "error" in box:
        raise box["error"]
    out = box.pop("out")
    return [_compact(marshal.loads(out.pop())) for _ in range(len(out))][::-1]
