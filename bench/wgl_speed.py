#!/usr/bin/env python3
"""WGL linearizability checker speed: time per file on the Knossos corpus and
on synthetic cas-register histories (a real register driven by concurrent,
overlapping clients, so every history is linearizable by construction).

    .venv/bin/python bench/wgl_speed.py [--corpus DIR] [--ops 10000] [--clients 10]
                                        [--crash 0.0] [--top 10] [--all]
                                        [--porcupine DIR] [--soak]

Prints one line per file when --all is given (else the slowest --top files),
then totals, the slowest corpus file, and the synthetic history figures
(cas-register, and kafka-log over 4 partitions, each --ops operations). The
time is the checker's (``check``) only; EDN parsing is reported separately.
Target: every corpus file under 1 s. Verdicts are checked against the
corpus directory (good/ -> valid, bad/ -> invalid); a mismatch or "unknown"
makes the exit status 1.

``--porcupine DIR`` also times a checkout of Porcupine's ``test_data``
directory (not shipped here): ``jepsen/etcd_*.log`` (Jepsen etcd cas-register
logs, checked with Porcupine's etcd semantics: a nil read means "no value",
a failed cas ran and saw another value) and ``kv/*.txt`` (kv histories whose
names say ok/bad).

``--soak`` also runs the slow property tests (WGL against a brute-force
linearizability oracle, 5,000 random histories per model) and prints their
outcome and time.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def read_kv_log(path: Path) -> list[Op]:
    """Porcupine's kv logs: EDN maps with separate ``:key`` and ``:value``;
    our kv model takes ``[key, value]``."""
    ops: list[Op] = []
    for d in edn_loads(path.read_text(), str(path)):
        value = [d["key"], d["value"]]
        ops.append(Op(type=d["type"], f=d["f"], value=value, process=d["process"],
                      index=len(ops)))
    return ops


def bench_porcupine(root: Path) -> bool:
    ok = True
    logs = sorted((root / "jepsen").glob("etcd_*.log"))
    if logs:
        rows = []
        for path in logs:
            ops = read_jepsen_etcd_log(path)
            t = time.perf_counter()
            r = check(ops, model="cas-register", initial=None, nil_read="value",
                      failed_cas="observed", time_budget=10.0)
            rows.append((time.perf_counter() - t, path.name, r["valid"]))
        valid = sum(r[2] is True for r in rows)
        unknown = sum(r[2] == "unknown" for r in rows)
        ok &= unknown == 0
        worst = max(rows)
        print(f"Porcupine jepsen etcd logs: {len(rows)} files, total {sum(r[0] for r in rows):.3f} s, "
              f"slowest {worst[1]} {worst[0]:.4f} s; {valid} linearizable, "
              f"{len(rows) - valid - unknown} not, {unknown} unknown")
    for path in sorted((root / "kv").glob("*.txt")):
        ops = read_kv_log(path)
        t = time.perf_counter()
        r = check(ops, model="kv", time_budget=10.0, stop_on_failure=False)
        dt = time.perf_counter() - t
        expected = not path.stem.endswith("bad")
        good = r["valid"] is expected
        ok &= good
        unknown = f", {len(r['unknown_keys'])} keys unknown ({r.get('cause')})" if r["unknown_keys"] else ""
        first = ""
        if r["valid"] is False:
            # the default: stop at the first failing key, as Porcupine does
            t = time.perf_counter()
            r1 = check(ops, model="kv", time_budget=10.0, stop_on_failure=True)
            first = f"; to first failing key: {time.perf_counter() - t:.3f} s valid={r1['valid']}"
        print(f"Porcupine kv {path.name}: {len(ops)} entries, {len(r['keys'])} keys, "
              f"check {dt:.3f} s, valid={r['valid']}{unknown}{first}"
              f"{'' if good else '   <-- WRONG VERDICT'}")
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
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "knossos")
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--crash", type=float, nargs="*", default=[0.0, 0.01])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs per corpus file")
    ap.add_argument("--all", action="store_true", help="print every corpus file")
    ap.add_argument("--porcupine", type=Path, default=None,
                    help="Porcupine's test_data directory (jepsen/ and kv/)")
    ap.add_argument("--soak", action="store_true",
                    help="also run the slow brute-force agreement tests")
    a = ap.parse_args()
    ok = bench_corpus(a.corpus, a.all, a.top, a.repeat)
    print()
    for c in a.crash:
        ok &= bench_synthetic(a.ops, a.clients, c, a.seed)
    for c in a.crash:
        ok &= bench_kafka(a.ops, a.clients, c, a.seed)
    if a.porcupine:
        print()
        ok &= bench_porcupine(a.porcupine)
    if a.soak:
        print()
        ok &= run_soak()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
