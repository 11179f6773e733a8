"""Consume-transform-produce (``--workload ctp``) side by side: the
reference implementation (at least once) and Kafka 4.4 (at least once, and
exactly once with ``--ctp-txn``), without faults and under kills. One row
per run: rounds ok/fail/info, inputs processed per second of workload,
duplicate-processing and lost-processing counts, verdict, wall seconds.
``--pytest`` instead runs the slow tests that assert the Kafka outcomes
(tests/kafka/test_kafka_ctp.py).

    .venv/bin/python bench/ctp.py [--out /tmp/kraftwerk-ctp] [--only N] [--pytest]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 15
KILLS = ["--nemesis", "kill", "--nemesis-interval", "5"]
RUNS = [
    ("reference, at least once", []),
    ("reference, at least once, kills", KILLS),
    ("kafka, at least once", ["--db", "kafka", "--combined"]),
    ("kafka, at least once, kills", ["--db", "kafka", "--combined", *KILLS]),
    ("kafka, exactly once", ["--db", "kafka", "--combined", "--ctp-txn"]),
    ("kafka, exactly once, kills", ["--db", "kafka", "--combined", "--ctp-txn", *KILLS]),
]


def row(name: str, flags: list[str], out: str, seed: str) -> str:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--workload", "ctp",
                        "--time-limit", str(LIMIT), "--out", out, "--seed", seed, "--json", "--no-progress", *flags],
                       capture_output=True, text=True, cwd=ROOT)
    try:
        r = json.loads(p.stdout)
    except ValueError:
        return f"{name:<36}error: {(p.stderr.strip().splitlines() or ['?'])[-1][:120]}"
    pr = r["checkers"].get("processing") or {}
    n = pr.get("rounds_by_type", {})
    counts = pr.get("counts", {})
    return (f"{name:<36}{n.get('ok', 0):>6}{n.get('fail', 0):>6}{n.get('info', 0):>6}"
            f"{pr.get('inputs_processed', 0) / LIMIT:>10.1f}{counts.get('duplicate-processing', 0):>6}"
            f"{counts.get('lost-processing', 0):>6}  {str(r.get('valid')):<8}{time.monotonic() - t0:>5.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/kraftwerk-ctp")
    ap.add_argument("--seed", default="7")
    ap.add_argument("--only", type=int, help="run only row N (0-based)")
    ap.add_argument("--pytest", action="store_true")
    args = ap.parse_args()
    if args.pytest:
        return subprocess.call([sys.executable, "-m", "pytest", "-m", "slow", "-q", "tests/kafka/test_kafka_ctp.py"],
                               cwd=ROOT)
    print(f"{'run':<36}{'ok':>6}{'fail':>6}{'info':>6}{'input/s':>10}{'dup':>6}{'lost':>6}  {'valid':<8}{'s':>5}")
    for i, (name, flags) in enumerate(RUNS):
        if args.only is None or args.only == i:
            print(row(name, flags, args.out, args.seed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
