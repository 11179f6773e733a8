"""Campaign aggregation over run directories, on Spark or in this process.

Each run directory is read where the work runs: on Spark, the executors open
the runs' ``results.json`` (or, with ``recheck``, check the run's
``history.jsonl`` again with the inline checkers), so the driver holds only
the per-cell sums, never a history. The directories must be on a path every
executor sees (a shared filesystem on a real cluster; anything on one
machine).

One row per run::

    (cell, run_dir, valid, durability {level: (acked, lost)}, anomaly_types)

summed per cell into: runs, valid / invalid / unknown runs, acknowledged and
lost writes per acks level with the lost-write rate and its 95% Wilson
interval, the number of runs each anomaly type was found in, and the invalid
runs. ``write_parquet`` keeps the per-run rows and the cell table as Parquet
for users' own analysis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from checkers.check import check_history, trace_invariants
from checkers.durability import wilson_interval
from checkers.pipeline import get_spark

ENGINES = ("inline", "spark")
LEVELS = ("acks=all", "acks=1")


def run_row(cell: str, run_dir: str, recheck: bool = False) -> dict[str, Any]:
    """What one run adds to its cell, read from its directory."""
    d = Path(run_dir)
    if recheck:
        res = _recheck(d)
    else:
        try:
            res = json.loads((d / "results.json").read_text())
        except (OSError, ValueError) as e:
            res = {"valid": "unknown", "error": f"results.json unreadable: {e}"}
    dur = res.get("durability") or {}
    return {
        "cell": cell,
        "run_dir": str(d),
        "valid": res.get("valid") if res.get("valid") in (True, False) else "unknown",
        "acked": {lv: int((dur.get(lv) or {}).get("acked") or 0) for lv in LEVELS},
        "lost": {lv: int((dur.get(lv) or {}).get("lost") or 0) for lv in LEVELS},
        "anomaly_types": sorted(res.get("anomaly_types") or []),
    }


def _recheck(d: Path) -> dict[str, Any]:
    """The run's history checked again here (inline, with its test.json and
    traces), without touching its results.json."""
    # imported here: reference_impl.accel compiles it (see checkers/check.py)
    from checkers.queue.scan import scan_jsonl  # late: compiled (reference_impl.accel), loaded after the accelerator's loader

    try:
        test = json.loads((d / "test.json").read_text()) if (d / "test.json").is_file() else None
        ops = scan_jsonl(d / "history.jsonl", [])  # read in columns: no operation kept
        return check_history(ops, model="queue", test=test, invariants=trace_invariants(d, test))
    except Exception as e:  # one bad run is an unknown row, not a failed campaign
        return {"valid": "unknown", "error": f"{type(e).__name__}: {e}"}


def _rows_partition(pairs: Iterator[tuple[str, str]], recheck: bool) -> Iterator[str]:
    for cell, run_dir in pairs:
        yield json.dumps(run_row(cell, run_dir, recheck))


def collect_rows(runs: Iterable[tuple[str, str]], engine: str = "inline", spark_master: str | None = None,
                 recheck: bool = False) -> list[dict[str, Any]]:
    """One row per (cell, run directory), read inline or on Spark executors."""
    pairs = [(str(c), str(d)) for c, d in runs]
    if engine == "inline" or not pairs:
        return [run_row(c, d, recheck) for c, d in pairs]
    if engine != "spark":
        raise ValueError(f"engine must be one of {ENGINES}")
    spark = get_spark(spark_master)
    rdd = spark.sparkContext.parallelize(pairs, max(1, min(len(pairs), 64)))
    return [json.loads(s) for s in rdd.mapPartitions(lambda it: _rows_partition(it, recheck)).collect()]


def cell_table(rows: list[dict[str, Any]], order: list[str] | None = None) -> list[dict[str, Any]]:
    """The per-cell sums of ``rows``, in ``order`` (else first seen)."""
    cells: dict[str, dict[str, Any]] = {}
    for cid in order or []:
        cells[cid] = _empty(cid)
    for r in sorted(rows, key=lambda r: r["run_dir"]):
        c = cells.setdefault(r["cell"], _empty(r["cell"]))
        c["runs"] += 1
        c[{True: "valid", False: "invalid"}.get(r["valid"], "unknown")] += 1
        c["run_dirs"].append(r["run_dir"])
        if r["valid"] is False:
            c["invalid_runs"].append(r["run_dir"])
        for lv in LEVELS:
            c["durability"][lv]["acked"] += r["acked"][lv]
            c["durability"][lv]["lost"] += r["lost"][lv]
        for t in r["anomaly_types"]:
            c["anomaly_runs"][t] = c["anomaly_runs"].get(t, 0) + 1
    for c in cells.values():
        for lv in LEVELS:
            b = c["durability"][lv]
            b["lost_rate"] = b["lost"] / b["acked"] if b["acked"] else 0.0
            b["lost_rate_ci95"] = list(wilson_interval(b["lost"], b["acked"]))
        c["durability"] = {lv: b for lv, b in c["durability"].items() if b["acked"]}
    return list(cells.values())


def _empty(cid: str) -> dict[str, Any]:
    return {"id": cid, "runs": 0, "valid": 0, "invalid": 0, "unknown": 0,
            "durability": {lv: {"acked": 0, "lost": 0} for lv in LEVELS},
            "anomaly_runs": {}, "run_dirs": [], "invalid_runs": []}


def write_parquet(rows: list[dict[str, Any]], cells: list[dict[str, Any]], out_dir: str | Path,
                  spark_master: str | None = None) -> list[Path]:
    """runs.parquet (one row per run) and cells.parquet (one per cell), flat
    columns, written with Spark's own Parquet writer (single files)."""
    spark = get_spark(spark_master)
    out = Path(out_dir)
    flat_runs = [{"cell": r["cell"], "run_dir": r["run_dir"], "valid": str(r["valid"]).lower(),
                  **{f"{lv}_{k}": r[k][lv] for lv in LEVELS for k in ("acked", "lost")},
                  "anomaly_types": ",".join(r["anomaly_types"])} for r in rows]
    flat_cells = [{"cell": c["id"], "runs": c["runs"], "valid": c["valid"], "invalid": c["invalid"],
                   "unknown": c["unknown"],
                   **{f"{lv}_{k}": float((c["durability"].get(lv) or {}).get(k, 0))
                      for lv in LEVELS for k in ("acked", "lost", "lost_rate")},
                   "anomaly_runs": json.dumps(c["anomaly_runs"], sort_keys=True)} for c in cells]
    written = []
    for name, data in (("runs", flat_runs), ("cells", flat_cells)):
        if not data:
            continue
        path = out / f"{name}.parquet"
        spark.createDataFrame(data).coalesce(1).write.mode("overwrite").parquet(str(path))
        written.append(path)
    return written
