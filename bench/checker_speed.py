"""How fast the queue checker is: a valid 1,000,000-operation history over 100
partitions, checked inline and on Spark (local), wall times printed.

Targets (2-core machine): inline <= 60 s; Spark within 1.5x of inline with the
per-partition work on executors. The Spark figure is measured on a warm
session (start-up, reported separately, is paid once per process).

    .venv/bin/python bench/checker_speed.py [--ops N] [--partitions P] [--no-spark]

If bench/wgl_speed.py exists (the linearizability benchmark) it runs last.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkers.check import check_history  # noqa: E402
from checkers.queue.synth import valid_history  # noqa: E402


def _verdict(r: dict) -> tuple:
    q = r["checkers"]["queue"]
    return (r["valid"], tuple(r["anomaly_types"]), tuple(sorted(q["counts"].items())),
            r["durability"]["acks=all"]["acked"], r["durability"]["acks=all"]["lost"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--processes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--spark-master", default=None)
    args = ap.parse_args()

    t = time.perf_counter()
    ops = valid_history(args.ops, args.partitions, args.processes, seed=args.seed)
    print(f"generated {len(ops):,} ops over {args.partitions} partitions in {time.perf_counter() - t:.1f} s",
          flush=True)

    gc.collect()
    t = time.perf_counter()
    r_inline = check_history(ops, engine="inline", time_budget=3600)
    t_inline = time.perf_counter() - t
    s = r_inline["checkers"]["queue"]["seconds"]
    print(f"inline: {t_inline:.2f} s  valid={r_inline['valid']}  "
          f"(project {s['project']} s, per-key {s['per_key']} s, cross-key {s['cross_key']} s; "
          f"graph {r_inline['checkers']['queue']['graph']})", flush=True)

    if not args.no_spark:
        from checkers.pipeline import get_spark, run_keys, stop_spark

        t = time.perf_counter()
        spark = get_spark(args.spark_master)
        run_keys({"warm-up": []}, engine="spark", spark_master=args.spark_master)  # start Python workers
        t_start = time.perf_counter() - t
        print(f"spark: session start + worker warm-up {t_start:.1f} s "
              f"(master {spark.sparkContext.master}, parallelism {spark.sparkContext.defaultParallelism})",
              flush=True)
        gc.collect()
        t = time.perf_counter()
        r_spark = check_history(ops, engine="spark", spark_master=args.spark_master, time_budget=3600)
        t_spark = time.perf_counter() - t
        s = r_spark["checkers"]["queue"]["seconds"]
        print(f"spark:  {t_spark:.2f} s  valid={r_spark['valid']}  "
              f"(project {s['project']} s, per-key {s['per_key']} s, cross-key {s['cross_key']} s)",
              flush=True)
        from checkers.queue.project import project

        pids = {r["pid"] for r in run_keys(project(ops[:20000]).keys, engine="spark",
                                           spark_master=args.spark_master)}
        print(f"spark/inline = {t_spark / t_inline:.2f}x; per-key work ran in executor processes "
              f"{sorted(pids)} (driver pid {os.getpid()}); "
              f"verdicts identical: {_verdict(r_inline) == _verdict(r_spark)}", flush=True)
        stop_spark()

    wgl = ROOT / "bench" / "wgl_speed.py"
    if wgl.exists():
        print(f"--- {wgl.relative_to(ROOT)} ---", flush=True)
        rc = subprocess.call([sys.executable, str(wgl)], cwd=ROOT)
        if rc:
            print(f"wgl_speed.py exited {rc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
