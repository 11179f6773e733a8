"""The campaign matrix against real Kafka 4.4 (KRaft) on the netns backend:
a faithful random campaign, acks=1 vs acks=all under the leader-kill story,
and the unclean-election story with unclean.leader.election.enable on and
off, through ``kraftwerk run --db kafka``. One row per run (verdict, acked
and lost per acks mode, anomaly types); ``--pytest`` instead runs the slow
tests that assert the expected outcomes (tests/kafka/test_kafka_campaigns.py).

    sudo .venv/bin/python bench/kafka_matrix.py [--out /tmp/kraftwerk-kafka-matrix] [--pytest]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MATRIX = [
    (["--nemesis", "partition,kill,pause,clock", "--nemesis-interval", "5", "--time-limit", "60"], "valid"),
    (["--scenario", "acks1-leader-kill", "--acks", "mixed"], "acks=1 lost > 0, acks=all lost 0"),
    (["--scenario", "unclean-loss", "--variant", "unclean_election=on", "--variant", "kip966=off"], "lost > 0"),
    (["--scenario", "unclean-loss", "--variant", "kip966=off"], "valid"),
    (["--scenario", "unclean-loss"], "valid"),
    (["--nemesis", "lose-unfsynced", "--nemesis-interval", "5", "--time-limit", "25"], "lost > 0"),
    (["--nemesis", "lose-unfsynced", "--nemesis-interval", "5", "--time-limit", "25",
      "--kafka-config", "log.flush.interval.messages=1"], "valid"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/kraftwerk-kafka-matrix")
    ap.add_argument("--seed", default="5")
    ap.add_argument("--pytest", action="store_true")
    args = ap.parse_args()
    if args.pytest:
        return subprocess.call([sys.executable, "-m", "pytest", "-m", "slow", "-q",
                                "tests/kafka/test_kafka_campaigns.py"], cwd=ROOT)
    print(f"{'flags':<84}{'expect':<34}{'valid':<8}{'acks=all acked/lost':<21}{'acks=1 acked/lost':<19}{'s':>5}")
    for flags, expect in MATRIX:
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--db", "kafka",
                            "--backend", "netns", "--out", args.out, "--seed", args.seed, "--json", "--no-progress",
                            *flags], capture_output=True, text=True, cwd=ROOT)
        try:
            r = json.loads(p.stdout)
        except ValueError:
            print(f"{' '.join(flags):<84}{expect:<34}error: {(p.stderr.strip().splitlines() or ['?'])[-1][:120]}")
            continue
        d = r.get("durability", {})
        row = lambda m: f"{d.get(m, {}).get('acked')}/{d.get(m, {}).get('lost')}"  # noqa: E731
        print(f"{' '.join(flags):<84}{expect:<34}{str(r.get('valid')):<8}{row('acks=all'):<21}{row('acks=1'):<19}"
              f"{time.monotonic() - t0:>5.0f}  {','.join(r.get('anomaly_types') or [])}  {r.get('run_dir')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
