"""Every KRaft-era Kafka release, 3.3 .. 4.4, under one faithful campaign:
start it, serve the queue workload, survive 60 s of partitions and kills on
the netns backend (acks=all, RF 3, min ISR 2), one release after another.
A run is as expected when it is valid, or invalid only with findings the
release's known bugs explain (``harness.dbs.kafka.releases.BUGS``: e.g.
``stale-raft-leader`` before 3.7). One row per release: the verdict, whether
it was expected, acks=all acknowledged/lost, the anomaly types, seconds.

Each run takes the machine-wide lock on its own (``--lock``), so other heavy
jobs can run between releases; ``--pytest`` runs the slow test that asserts
the same for every release (tests/kafka/test_kafka_releases_campaign.py).

    sudo .venv/bin/python bench/kafka_releases.py [--releases 3.6.2,3.7.2] [--seed 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.dbs.kafka.releases import MATRIX, explained  # noqa: E402

#: the faithful campaign every release must survive
FLAGS = ["--db", "kafka", "--backend", "netns", "--nemesis", "partition,kill", "--nemesis-interval", "10",
         "--time-limit", "60", "--acks", "all", "--rf", "3", "--min-isr", "2"]


def run_release(version: str, seed: int, out: Path, lock: str) -> dict:
    """One run of ``version`` under the lock; its results (or the error)."""
    argv = [sys.executable, "-c", "from harness.cli import main; main()", "run", *FLAGS,
            "--kafka-version", version, "--seed", str(seed), "--out", str(out), "--name", f"kafka-{version}",
            "--json", "--no-progress"]
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=900)
        took = time.monotonic() - t0
    try:
        res = json.loads(p.stdout)
    except ValueError:
        return {"version": version, "error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1],
                "seconds": took}
    return {**res, "version": version, "exit": p.returncode, "seconds": took}


def judged(res: dict) -> list[str]:
    """The anomaly types that count against a run (not the queue checker's allowed ones)."""
    allowed = set(((res.get("checkers") or {}).get("queue") or {}).get("allowed_anomaly_types") or [])
    return [t for t in res.get("anomaly_types") or [] if t not in allowed]


def verdict(res: dict) -> tuple[bool, str]:
    """(as expected, why): valid, or invalid only with what the release's known bugs explain."""
    if "error" in res:
        return False, "error: " + res["error"][:100]
    if res.get("valid") is True:
        return True, "valid"
    left, bugs = explained(res["version"], judged(res), FLAGS)
    if res.get("valid") is False and not left:
        return True, "invalid: " + ", ".join(bugs)
    return False, "unexplained: " + ", ".join(left or ["unknown verdict"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", default=",".join(MATRIX))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="/tmp/kraftwerk-kafka-releases")
    ap.add_argument("--lock", default="/tmp/kw-heavy.lock")
    ap.add_argument("--pytest", action="store_true")
    args = ap.parse_args()
    if args.pytest:
        return subprocess.call([sys.executable, "-m", "pytest", "-m", "slow", "-q",
                                "tests/kafka/test_kafka_releases_campaign.py"], cwd=ROOT)
    print(f"{'release':<9}{'valid':<9}{'expected':<10}{'acks=all acked/lost':<21}{'s':>5}  anomaly types / why")
    bad = 0
    for version in args.releases.split(","):
        res = run_release(version.strip(), args.seed, Path(args.out), args.lock)
        ok, why = verdict(res)
        bad += not ok
        d = (res.get("durability") or {}).get("acks=all") or {}
        acked = f"{d.get('acked')}/{d.get('lost')}"
        types = ",".join(res.get("anomaly_types") or []) or "-"
        print(f"{version:<9}{str(res.get('valid')):<9}{str(ok):<10}{acked:<21}{res['seconds']:>5.0f}  "
              f"{types} ({why}) {res.get('run_dir', '')}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
