"""The campaign matrix against the reference broker: every scripted scenario
with the historical variant on and off, and acks=1 vs acks=all under leader
kills, through ``kraftwerk run``. Prints one row per run (verdict, acked and
lost per acks mode); ``--pytest`` instead runs the slow integration tests that
assert the expected outcomes.

    .venv/bin/python bench/campaign_matrix.py [--out /tmp/kraftwerk-matrix] [--pytest]
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
    ("unclean-loss", ["--variant", "unclean_election=on", "--variant", "kip966=off"], "lost > 0"),
    ("unclean-loss", ["--variant", "kip966=off"], "valid"),
    ("last-replica-standing", ["--variant", "kip966=off"], "lost > 0"),
    ("last-replica-standing", [], "valid"),
    ("acks1-leader-kill", ["--acks", "mixed"], "acks=1 lost > 0, acks=all lost 0"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/kraftwerk-matrix")
    ap.add_argument("--seed", default="3")
    ap.add_argument("--pytest", action="store_true")
    args = ap.parse_args()
    if args.pytest:
        return subprocess.call([sys.executable, "-m", "pytest", "-m", "slow", "-q",
                                "tests/harness/test_integration_reference.py"], cwd=ROOT)
    print(f"{'scenario':<24}{'flags':<44}{'expect':<34}{'valid':<8}{'acks=all acked/lost':<22}{'acks=1 acked/lost':<20}{'s':>5}")
    for scenario, flags, expect in MATRIX:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--scenario", scenario,
                            "--seed", args.seed, "--out", args.out, "--json", *flags],
                           capture_output=True, text=True, cwd=ROOT)
        try:
            res = json.loads(r.stdout)
        except json.JSONDecodeError:
            print(f"{scenario:<24}{' '.join(flags):<44}{expect:<34}error: {r.stderr.strip()[-120:]}")
            continue
        d = res.get("durability", {})
        a, o = d.get("acks=all", {}), d.get("acks=1", {})
        print(f"{scenario:<24}{' '.join(flags):<44}{expect:<34}{str(res['valid']):<8}"
              f"{a.get('acked', 0):>6}/{a.get('lost', 0):<15}{o.get('acked', 0):>6}/{o.get('lost', 0):<13}"
              f"{time.monotonic() - t0:>5.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
