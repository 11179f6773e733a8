"""Transactions on real Kafka 4.4 (``kraftwerk run --db kafka --workload txn``):
transactional throughput without faults (open loop at a rate clients cannot
reach), then the verdicts of the transactional runs: read_committed and
read_uncommitted with aborts, and the campaign of partitions, kills and pauses
on netns. One row per run: transactions ok/fail/info, committed transactions
and committed sends per second of workload, verdict, anomaly types.
``--pytest`` instead runs the slow tests that assert the outcomes
(tests/kafka/test_kafka_txn.py).

    sudo .venv/bin/python bench/kafka_txn.py [--out /tmp/kraftwerk-kafka-txn] [--pytest]
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kwcli import kraftwerk_json, print_rows, slow_tests, table_args  # noqa: E402

RUNS = [
    ("throughput, read_committed", ["--combined", "--rate", "2000", "--concurrency", "8", "--time-limit", "20"]),
    ("aborts 0.2, read_committed", ["--combined", "--abort-probability", "0.2", "--time-limit", "15"]),
    ("aborts 0.2, read_uncommitted", ["--combined", "--abort-probability", "0.2", "--time-limit", "15",
                                      "--isolation-level", "read_uncommitted"]),
    ("campaign: netns partition,kill,pause", ["--backend", "netns", "--abort-probability", "0.2", "--time-limit",
                                              "60", "--nemesis", "partition,kill,pause", "--nemesis-interval", "8"]),
]


def row(name: str, flags: list[str], out: str, seed: str) -> str:
    r, error, took = kraftwerk_json(["run", "--db", "kafka", "--workload", "txn", "--out", out, "--seed", seed,
                                     "--json", "--no-progress", *flags])
    if r is None:
        return f"{name:<40}error: {error[:120]}"
    ops = [json.loads(line) for line in open(Path(r["run_dir"]) / "history.jsonl")]
    txns = [o for o in ops if o["f"] == "txn" and o["type"] != "invoke"]
    n = collections.Counter(o["type"] for o in txns)
    limit = float(flags[flags.index("--time-limit") + 1])
    sends = sum(1 for o in txns if o["type"] == "ok" for m in o["value"] if m[0] == "send")
    return (f"{name:<40}{n['ok']:>6}{n['fail']:>6}{n['info']:>6}{n['ok'] / limit:>10.1f}{sends / limit:>10.1f}"
            f"  {str(r.get('valid')):<8}{took:>5.0f}  {','.join(r.get('anomaly_types') or [])}")


def main() -> int:
    ap = table_args(__doc__, "/tmp/kraftwerk-kafka-txn", "7")
    ap.add_argument("--only", type=int, help="run only row N (0-based)")
    args = ap.parse_args()
    if args.pytest:
        return slow_tests("tests/kafka/test_kafka_txn.py")
    return print_rows(f"{'run':<40}{'ok':>6}{'fail':>6}{'info':>6}{'txn/s':>10}{'send/s':>10}  {'valid':<8}{'s':>5}  anomalies",
                      RUNS, lambda name, flags: row(name, flags, args.out, args.seed), args.only)


if __name__ == "__main__":
    sys.exit(main())
