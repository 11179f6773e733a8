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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kwcli import kraftwerk_json, print_rows, slow_tests, table_args  # noqa: E402

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
    r, error, took = kraftwerk_json(["run", "--workload", "ctp", "--time-limit", str(LIMIT), "--out", out,
                                     "--seed", seed, "--json", "--no-progress", *flags])
    if r is None:
        return f"{name:<36}error: {error[:120]}"
    pr = r["checkers"].get("processing") or {}
    n = pr.get("rounds_by_type", {})
    counts = pr.get("counts", {})
    return (f"{name:<36}{n.get('ok', 0):>6}{n.get('fail', 0):>6}{n.get('info', 0):>6}"
            f"{pr.get('inputs_processed', 0) / LIMIT:>10.1f}{counts.get('duplicate-processing', 0):>6}"
            f"{counts.get('lost-processing', 0):>6}  {str(r.get('valid')):<8}{took:>5.0f}")


def main() -> int:
    ap = table_args(__doc__, "/tmp/kraftwerk-ctp", "7")
    ap.add_argument("--only", type=int, help="run only row N (0-based)")
    args = ap.parse_args()
    if args.pytest:
        return slow_tests("tests/kafka/test_kafka_ctp.py")
    return print_rows(f"{'run':<36}{'ok':>6}{'fail':>6}{'info':>6}{'input/s':>10}{'dup':>6}{'lost':>6}  {'valid':<8}{'s':>5}",
                      RUNS, lambda name, flags: row(name, flags, args.out, args.seed), args.only)


if __name__ == "__main__":
    sys.exit(main())
