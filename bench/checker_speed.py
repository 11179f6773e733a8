"""How fast the queue checker is: a valid 1,000,000-operation history over 100
partitions, checked inline and on Spark (local), wall times printed.

Targets (2-core machine): inline <= 60 s; Spark within 1.5x of inline with the
per-partition work on executors. The Spark figure is measured on a warm
session (start-up, reported separately, is paid once per process).

    .venv/bin/python bench/checker_speed.py [--ops N] [--partitions P] [--no-spark]

Big histories, end to end (``--big 1000000,10000000``): each size is
generated into a JSONL file (deleted afterwards), then ``kraftwerk check``
runs on it as a child process, inline, on local[*] and on a standalone
cluster (a master and a worker started from the installed PySpark), next to
a parse-only baseline of the same file in the same run (orjson over every
line). Prints wall time, CPU time (user + system: on a shared machine the
fairer figure) and peak memory: the checking process's own peak
(VmHWM), and on Spark also the largest of its child processes (the JVM).
Targets: inline 1M within 2x the parse-only wall time and under 250 MiB
(with one core as with two: ``taskset -c 0`` shows the one-process
figure); the driver under 2 GiB at 10M.

    .venv/bin/python bench/checker_speed.py --big 1000000,10000000 [--no-spark] [--no-standalone]
        [--standalone-max OPS] [--dir DIR]

If bench/wgl_speed.py exists (the linearizability benchmark) it runs last.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkers.check import check_history  # noqa: E402
from checkers.queue.synth import valid_history  # noqa: E402
from checkers.spark_standalone import StandaloneCluster  # noqa: E402
from reference_impl.server.procs import proc_status_kib  # noqa: E402


def _verdict(r: dict) -> tuple:
    q = r["checkers"]["queue"]
    return (r["valid"], tuple(r["anomaly_types"]), tuple(sorted(q["counts"].items())),
            r["durability"]["acks=all"]["acked"], r["durability"]["acks=all"]["lost"])


KRAFTWERK = [sys.executable, "-c", "from harness.cli import main; main()"]
PARSE_ONLY = ("import orjson, sys\n"
              "with open(sys.argv[1], 'rb') as f:\n"
              "    for line in f:\n"
              "        orjson.loads(line)\n")


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def measured(argv: list[str], out: Path) -> tuple[int, float, float, float]:
    """Run ``argv`` (stdout to ``out``): exit code, wall seconds, the
    process's own peak RSS in MiB (wait4's maxrss when it has no child, else
    its VmHWM polled every 0.2 s; its exit every 10 ms), and the largest peak RSS (VmHWM, polled)
    among the processes it started (the JVM on Spark; 0 if none). The CPU
    seconds the process and its waited-for children used (user + system,
    from wait4) are left in ``LAST_CPU``: on a shared machine they say more
    than the wall time."""
    global LAST_CPU
    env = {**os.environ, "KRAFTWERK_DEBUG": ""}
    t0 = time.perf_counter()
    with open(out, "wb") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    hwm = 0
    below: dict[int, int] = {}
    next_sample = t0
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        # the peaks every 0.2 s (a scan of /proc), the exit every 10 ms: the
        # wall time is the child's to within 10 ms, where it was 0.2 s
        if time.perf_counter() >= next_sample:
            hwm = max(hwm, proc_status_kib(p.pid, "VmHWM"))
            for c in _descendants(p.pid):
                below[c] = max(below.get(c, 0), proc_status_kib(c, "VmHWM"))
            next_sample = time.perf_counter() + 0.2
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace").strip() if p.stderr else ""
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 1, 3):
        print(f"  exit {rc}: {err[-300:]}", flush=True)
    own = ru.ru_maxrss if not below else hwm
    LAST_CPU = ru.ru_utime + ru.ru_stime
    return rc, wall, own / 1024, max(below.values(), default=0) / 1024


LAST_CPU = 0.0


def _digest(path: Path) -> tuple:
    r = json.loads(path.read_text())
    return (r["valid"], tuple(r["anomaly_types"]), tuple(sorted(r["checkers"]["queue"]["counts"].items())),
            json.dumps(r["durability"], sort_keys=True))


def big(sizes: list[int], partitions: int, processes: int, spark: bool, standalone: bool,
        standalone_max: int, where: str | None) -> int:
    """The end-to-end figures for each size (see the module doc)."""
    from checkers.history.jsonl import encode_line
    from checkers.queue.synth import iter_valid_history

    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-bench-big-", dir=where))
    cluster = None
    try:
        for n in sizes:
            hist = tmp / f"history-{n}.jsonl"
            t = time.perf_counter()
            with open(hist, "w") as f:
                for op in iter_valid_history(n, partitions, processes, seed=1):
                    f.write(encode_line(op))
            print(f"== {n:,} ops over {partitions} partitions: {hist.stat().st_size / 1e6:.0f} MB, "
                  f"generated in {time.perf_counter() - t:.0f} s", flush=True)
            rc, wall, own, _ = measured([sys.executable, "-c", PARSE_ONLY, str(hist)], tmp / "parse.out")
            parse, parse_cpu = wall, LAST_CPU
            print(f"  parse-only (orjson, every line): {wall:.2f} s wall, {parse_cpu:.2f} s CPU, "
                  f"peak {own:.0f} MiB", flush=True)
            runs = [("inline", [])]
            if spark:
                runs.append(("spark local[*]", ["--engine", "spark"]))
            if spark and standalone and n <= standalone_max:
                if cluster is None:
                    cluster = StandaloneCluster(workers=1, cores=2, memory="4g")
                    cluster.start()
                runs.append((f"spark standalone (1 worker, 2 cores, {cluster.url})", ["--spark-master", cluster.url]))
            digests = {}
            for name, extra in runs:
                out = tmp / "check.json"
                rc, wall, own, largest = measured(KRAFTWERK + ["check", str(hist), "--json", "--time-budget", "7200",
                                                               *extra], out)
                line = (f"  kraftwerk check, {name}: exit {rc}, {wall:.2f} s wall "
                        f"({wall / parse:.1f}x parse-only), {LAST_CPU:.2f} s CPU "
                        f"({LAST_CPU / max(parse_cpu, 1e-9):.1f}x parse-only's), "
                        f"kraftwerk process peak {own:.0f} MiB")
                if extra:
                    line += f", largest process it started (the JVM) peak {largest:.0f} MiB"
                if rc in (0, 1, 3):
                    digests[name] = _digest(out)
                    r = json.loads(out.read_text())
                    s = r["checkers"]["queue"]["seconds"]
                    start = f"Spark session start {s['spark_start']} s, " if extra else ""
                    line += (f"; valid={r['valid']} ({start}per-key {s['per_key']} s, cross-key {s['cross_key']} s; "
                             f"{r['stats']['check_seconds']} s of it after the scan)")
                print(line, flush=True)
            if spark and standalone and n > standalone_max:
                print(f"  spark standalone: not run at this size (--standalone-max {standalone_max:,})", flush=True)
            print(f"  verdicts identical across engines: {len(set(digests.values())) <= 1} ({', '.join(digests)})",
                  flush=True)
            hist.unlink()
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", default=None, metavar="SIZES",
                    help="end-to-end kraftwerk check of generated JSONL files of these sizes (comma-separated)")
    ap.add_argument("--no-standalone", action="store_true")
    ap.add_argument("--standalone-max", type=int, default=10**12,
                    help="skip the standalone cluster above this many ops")
    ap.add_argument("--dir", default=None, help="where the generated histories go (default: the temp dir)")
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--processes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--spark-master", default=None)
    args = ap.parse_args()
    if args.big:
        try:
            sizes = [int(x) for x in args.big.split(",")]
        except ValueError:
            ap.error(f"--big {args.big!r}: expected sizes like 1000000,10000000")
        return big(sizes, args.partitions, args.processes, not args.no_spark, not args.no_standalone,
                   args.standalone_max, args.dir)

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
