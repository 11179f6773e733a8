#!/usr/bin/env python3
"""WGL linearizability checker speed: time per file on the Knossos corpus and
on synthetic cas-register histories (a real register driven by concurrent,
overlapping clients, so every history is linearizable by construction).

    .venv/bin/python bench/wgl_speed.py [--corpus DIR] [--ops 10000] [--clients 10]
                                        [--crash 0.0] [--top 10] [--all] [--soak]
                                        [--porcupine-version v1.3.1 | --no-porcupine]

Prints one line per file when --all is given (else the slowest --top files),
then totals, the slowest corpus file, and the synthetic history figures
(cas-register, and kafka-log over 4 partitions, each --ops operations). The
time is the checker's (``check``) only; EDN parsing is reported separately.
Target: every corpus file under 1 s. Verdicts are checked against the
corpus directory (good/ -> valid, bad/ -> invalid); a mismatch or "unknown"
makes the exit status 1.

Porcupine side by side (unless ``--no-porcupine``): the bench fetches
Porcupine's module at ``--porcupine-version`` with ``go mod download -json``
(Go module proxy) into a temporary module cache, copies it to a temporary
directory and runs Porcupine's own kv tests there (``go test -run Kv -v
-short``: ``-short`` skips its two unpartitioned 10-client tests, which take
minutes), with one more Go test written into that copy that times Porcupine's
own kv parse and check (``parseKvLog``, then ``CheckEvents`` with
``kvModel``, as its kv tests call them) ``--kv-repeat`` times per log;
everything goes with the temporary directory at the end. For each of
``test_data/kv/*.txt`` it prints kraftwerk's median time (EDN parse
included, the key read from its own field) to the verdict (stopping at the
first failing key, as Porcupine stops at the first failing partition), next
to Porcupine's median (its log parse included) and the ratio of the two;
then kraftwerk's time to every key decided, and the go test's own time for
the log (one run, two decimals, compilation warm-up included).
``test_data/jepsen/etcd_*.log`` (Jepsen etcd cas-register logs, checked with
Porcupine's etcd semantics: a nil read means "no value", a failed cas ran and
saw another value) are timed on our side only.

``--soak`` also runs the slow property tests (WGL against a brute-force
linearizability oracle, 5,000 random histories per model) and prints their
outcome and time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference_impl import accel  # noqa: E402,F401  (installs the compiled checkers, as `kraftwerk` does)
from checkers.history.edn import loads as edn_loads  # noqa: E402
from checkers.history.edn import read_edn  # noqa: E402
from checkers.history.op import Op  # noqa: E402
from checkers.linearizable import check  # noqa: E402
from checkers.linearizable.synth import kafka_history, register_history  # noqa: E402

MODELS = {
    "cas-register": {"model": "cas-register", "initial": 0},
    "multi-register": {"model": "multi-register", "initial": {"x": 0, "y": 0}},
    "mutex": {"model": "mutex"},
}


def bench_corpus(corpus: Path, show_all: bool, top: int, repeat: int) -> bool:
    files = sorted(corpus.glob("*/*/*.edn"))
    if not files:
        print(f"no .edn files under {corpus}", file=sys.stderr)
        return False
    rows = []
    parse_total = 0.0
    ok = True
    for path in files:
        model, verdict = path.parts[-3], path.parts[-2]
        t = time.perf_counter()
        ops = read_edn(path)
        parse_total += time.perf_counter() - t
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            r = check(ops, time_budget=10.0, **MODELS[model])
            best = min(best, time.perf_counter() - t)
        expected = verdict == "good"
        good = r["valid"] is expected
        ok &= good
        steps = r["stats"]["steps"]
        rows.append((best, "/".join(path.parts[-3:]), len(ops), steps, r["valid"], good))
    print(f"Knossos corpus: {len(files)} files under {corpus}")
    print(f"{'check s':>9} {'entries':>7} {'steps':>8}  valid   file")
    listing = rows if show_all else sorted(rows, reverse=True)[:top]
    for best, name, n, steps, valid, good in listing:
        mark = "" if good else "   <-- WRONG VERDICT"
        print(f"{best:9.4f} {n:7d} {steps:8d}  {str(valid):6}  {name}{mark}")
    times = [r[0] for r in rows]
    slowest = max(rows)
    print(f"total check time {sum(times):.3f} s, median {statistics.median(times) * 1000:.2f} ms, "
          f"EDN parse total {parse_total:.3f} s")
    print(f"slowest file: {slowest[1]} {slowest[0]:.4f} s ({slowest[2]} entries)")
    print(f"files over 1 s: {sum(t > 1.0 for t in times)}; "
          f"verdicts {'all correct' if ok else 'WRONG'}")
    return ok


def bench_synthetic(n_ops: int, clients: int, crash: float, seed: int) -> bool:
    t = time.perf_counter()
    ops = register_history(n_ops, clients=clients, seed=seed, crash_p=crash)
    gen = time.perf_counter() - t
    t = time.perf_counter()
    r = check(ops, model="cas-register", initial=0, time_budget=60.0)
    dt = time.perf_counter() - t
    k = r["keys"].get("all", {})
    s = r["stats"]
    print(f"synthetic cas-register: {n_ops} ops, {clients} clients, crash p={crash}, seed {seed}: "
          f"{len(ops)} history entries, {k.get('op_count')} ops searched "
          f"(generated in {gen:.2f} s)")
    print(f"  check {dt:.3f} s  valid={r['valid']}  steps={s['steps']} "
          f"backtracks={s['backtracks']} cache={s['cache_size']}")
    return r["valid"] is True


_ETCD_LINE = re.compile(
    r"^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(invoke|ok|fail|info)\s+:(read|write|cas)\s+(.*)$")


def read_jepsen_etcd_log(path: Path) -> list[Op]:
    """Jepsen's textual etcd log: ``<process> :<type> :<f> <value>`` lines.
    A read that failed with ``:timed-out`` is indeterminate (``info``)."""
    ops: list[Op] = []
    for line in path.read_text().splitlines():
        m = _ETCD_LINE.match(line)
        if not m:
            continue
        proc, typ, f, raw = m.groups()
        raw = raw.strip()
        value = edn_loads(raw)[0] if raw != ":timed-out" else None
        if typ == "fail" and f == "read":
            typ = "info"
        ops.append(Op(type=typ, f=f, value=value, process=int(proc), index=len(ops)))
    return ops


PORCUPINE = "github.com/anishathalye/porcupine"
#: Porcupine's kv test names -> the log each checks
_KV_TESTS = re.compile(r"^\s*--- (PASS|FAIL|SKIP): TestKv(NoPartition)?(\d+)Clients?(Ok|Bad) \(([\d.]+)s\)")


def fetch_porcupine(version: str, tmp: Path) -> Path:
    """Porcupine's module at ``version`` through the Go module proxy, into a
    module cache under ``tmp``; returns a writable copy of it."""
    env = _go_env(tmp)
    p = subprocess.run(["go", "mod", "download", "-json", f"{PORCUPINE}@{version}"], cwd=tmp, env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"go mod download {PORCUPINE}@{version}: {(p.stderr or p.stdout).strip()[:300]}")
    src = Path(json.loads(p.stdout)["Dir"])
    dst = tmp / "porcupine"
    shutil.copytree(src, dst)
    for d in [dst, *dst.rglob("*")]:
        d.chmod(d.stat().st_mode | 0o200)
    return dst


def _go_env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "GOMODCACHE": str(tmp / "modcache"), "GOCACHE": str(tmp / "gocache"),
            "GOFLAGS": "-modcacherw", "GOTOOLCHAIN": "local"}


#: Go test written into the temporary copy of Porcupine: its own kv parse
#: (``parseKvLog``) and check (``CheckEvents`` with ``kvModel``), as its kv
#: tests call them, timed ``N`` times per log; median and fastest printed
_TIMING_TEST = """package porcupine

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

func TestKraftwerkTiming(t *testing.T) {
	logs, _ := filepath.Glob("test_data/kv/*.txt")
	for _, path := range logs {
		var ds []float64
		for i := 0; i < %d; i++ {
			t0 := time.Now()
			CheckEvents(kvModel, parseKvLog(path))
			ds = append(ds, time.Since(t0).Seconds())
		}
		sort.Float64s(ds)
		fmt.Printf("KRAFTWERK-TIMING %%s %%.6f %%.6f\\n", filepath.Base(path), ds[len(ds)/2], ds[0])
	}
}
"""
_TIMING_LINE = re.compile(r"^KRAFTWERK-TIMING (\S+)\.txt ([\d.]+) ([\d.]+)$")


@dataclass
class PorcupineTimes:
    """Porcupine's figures per kv log: its go test's own time for the test
    (two decimals, one run, compile warm-up included) and the median and
    fastest of ``repeat`` runs of its parse and check."""

    tests: dict[str, tuple[str, float]]
    median: dict[str, float]
    fastest: dict[str, float]


def porcupine_kv_times(module: Path, tmp: Path, repeat: int) -> PorcupineTimes:
    """Porcupine's own kv tests, timed by ``go test`` (log name and
    ``-nopartition`` -> (PASS/FAIL/SKIP, seconds)), and its parse + check
    timed ``repeat`` times per log by :data:`_TIMING_TEST`."""
    (module / "kraftwerk_timing_test.go").write_text(_TIMING_TEST % repeat)
    p = subprocess.run(["go", "test", "-run", "Kv|KraftwerkTiming", "-v", "-short", "."], cwd=module,
                       env=_go_env(tmp), capture_output=True, text=True, timeout=1800)
    out = PorcupineTimes({}, {}, {})
    for line in p.stdout.splitlines():
        m = _KV_TESTS.match(line)
        if m:
            status, nopart, clients, verdict, secs = m.groups()
            name = f"c{int(clients):02d}-{verdict.lower()}" + ("-nopartition" if nopart else "")
            out.tests[name] = (status, float(secs))
        m = _TIMING_LINE.match(line)
        if m:
            out.median[m.group(1)], out.fastest[m.group(1)] = float(m.group(2)), float(m.group(3))
    if not out.tests:
        raise RuntimeError(f"go test printed no kv results: {(p.stderr or p.stdout).strip()[-300:]}")
    return out


def check_kv_file(path: Path, stop_on_failure: bool, budget: float) -> tuple[float, float, dict]:
    """Parse (keys in their own field) and check one kv log; wall and CPU
    seconds (CPU too: on a shared machine wall time says more about the
    neighbours than about the checker)."""
    t, c = time.perf_counter(), time.process_time()
    ops = read_edn(path)
    r = check(ops, model="kv", time_budget=budget, stop_on_failure=stop_on_failure)
    return time.perf_counter() - t, time.process_time() - c, r


def bench_porcupine_kv(module: Path, version: str, times: PorcupineTimes, budget: float,
                       repeat: int) -> bool:
    ok = True
    print(f"Porcupine {version} kv logs: kraftwerk (EDN parse + check) vs Porcupine (its log parse + "
          f"check), to the verdict, median of {repeat} runs each, one after the other in this run")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; kraftwerk: wall s / CPU s; "
          f"Porcupine checks its keys in parallel goroutines)")
    print(f"{'log':12} {'entries':>7} {'keys':>4} {'to verdict s':>17} {'valid':>6} {'porcupine s':>11} "
          f"{'ratio':>6} {'fastest k/p s':>17} {'every key s':>13} {'decided':>7} {'go test s':>9} {'':>4}")
    for path in sorted((module / "test_data" / "kv").glob("*.txt")):
        expected = not path.stem.endswith("bad")
        runs = [check_kv_file(path, True, budget) for _ in range(repeat)]
        t1 = statistics.median(r[0] for r in runs)
        c1 = statistics.median(r[1] for r in runs)
        k_fast = min(r[0] for r in runs)
        r1 = runs[-1][2]
        t2, c2, r2 = check_kv_file(path, False, budget)
        decided = sum(1 for k in r2["keys"].values() if k["valid"] != "unknown")
        good = (all(r[2]["valid"] is expected for r in runs) and r2["valid"] is expected
                and decided == len(r2["keys"]))
        ok &= good
        status, secs = times.tests.get(path.stem, ("-", float("nan")))
        pm = times.median.get(path.stem, float("nan"))
        p_fast = times.fastest.get(path.stem, float("nan"))
        print(f"{path.stem:12} {r2['stats']['history']['ops']:7d} {len(r2['keys']):4d} {t1:8.5f}/{c1:8.5f} "
              f"{str(r1['valid']):>6} {pm:11.5f} {t1 / pm if pm > 0 else float('nan'):5.2f}x "
              f"{k_fast:8.5f}/{p_fast:8.5f} {t2:6.3f}/{c2:6.3f} "
              f"{decided:3d}/{len(r2['keys']):<3d} {secs:9.2f} {status:>4}"
              f"{'' if good else '   <-- WRONG VERDICT OR UNDECIDED KEY'}")
    for name, (status, secs) in sorted(times.tests.items()):
        if name.endswith("-nopartition"):
            print(f"  (Porcupine without partitioning, {name[:-12]}: {status} {secs:.2f} s)")
    return ok


def bench_porcupine_etcd(root: Path) -> bool:
    logs = sorted((root / "jepsen").glob("etcd_*.log"))
    if not logs:
        return True
    rows = []
    for path in logs:
        t = time.perf_counter()
        ops = read_jepsen_etcd_log(path)
        r = check(ops, model="cas-register", initial=None, nil_read="value",
                  failed_cas="observed", time_budget=10.0)
        rows.append((time.perf_counter() - t, path.name, r["valid"]))
    valid = sum(r[2] is True for r in rows)
    unknown = sum(r[2] == "unknown" for r in rows)
    worst = max(rows)
    print(f"Porcupine jepsen etcd logs: {len(rows)} files, total {sum(r[0] for r in rows):.3f} s "
          f"(parse included), slowest {worst[1]} {worst[0]:.4f} s; {valid} linearizable, "
          f"{len(rows) - valid - unknown} not, {unknown} unknown")
    return unknown == 0


def bench_porcupine(version: str, budget: float, repeat: int) -> bool:
    with tempfile.TemporaryDirectory(prefix="kraftwerk-porcupine-") as d:
        tmp = Path(d)
        try:
            module = fetch_porcupine(version, tmp)
            times = porcupine_kv_times(module, tmp, repeat)
        except (OSError, RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
            print(f"Porcupine: not available ({e})", file=sys.stderr)
            return False
        ok = bench_porcupine_kv(module, version, times, budget, repeat)
        ok &= bench_porcupine_etcd(module / "test_data")
        return ok


def bench_kafka(n_ops: int, clients: int, crash: float, seed: int) -> bool:
    ops = kafka_history(n_ops, clients=clients, partitions=4, seed=seed, crash_p=crash)
    t = time.perf_counter()
    r = check(ops, model="kafka-log", time_budget=60.0)
    dt = time.perf_counter() - t
    print(f"synthetic kafka-log: {n_ops} ops, {clients} clients, 4 partitions, crash p={crash}: "
          f"check {dt:.3f} s  valid={r['valid']}  steps={r['stats']['steps']}")
    return r["valid"] is True


def run_soak() -> bool:
    root = Path(__file__).resolve().parents[1]
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p", "no:cacheprovider",
         "tests/checkers/test_linearizable_checker.py"],
        cwd=root, capture_output=True, text=True)
    last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"soak (brute-force agreement, -m slow): {last} [{time.perf_counter() - t:.1f} s]")
    return proc.returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = Path(os.environ.get("KRAFTWERK_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    ap.add_argument("--corpus", type=Path, default=shared / "data" / "knossos",
                    help="the Knossos corpus (default: $KRAFTWERK_SHARED/data/knossos, else ../shared beside the checkout)")
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--crash", type=float, nargs="*", default=[0.0, 0.01])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs per corpus file")
    ap.add_argument("--all", action="store_true", help="print every corpus file")
    ap.add_argument("--porcupine-version", default="v1.3.1",
                    help="Porcupine module version fetched through the Go module proxy")
    ap.add_argument("--no-porcupine", action="store_true", help="skip the comparison with Porcupine")
    ap.add_argument("--kv-budget", type=float, default=60.0,
                    help="time budget per kv log, seconds")
    ap.add_argument("--kv-repeat", type=int, default=15,
                    help="runs per kv log on each side (the median is compared)")
    ap.add_argument("--soak", action="store_true",
                    help="also run the slow brute-force agreement tests")
    a = ap.parse_args()
    print(f"checkers: {accel.status()} (reference_impl.accel: EDN reader, WGL search, look-ahead, prepare)")
    ok = bench_corpus(a.corpus, a.all, a.top, a.repeat)
    print()
    for c in a.crash:
        ok &= bench_synthetic(a.ops, a.clients, c, a.seed)
    for c in a.crash:
        ok &= bench_kafka(a.ops, a.clients, c, a.seed)
    if not a.no_porcupine:
        print()
        ok &= bench_porcupine(a.porcupine_version, a.kv_budget, a.kv_repeat)
    if a.soak:
        print()
        ok &= run_soak()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
