"""The campaign matrix against the reference broker: every scripted scenario
with the historical variant on and off, and acks=1 vs acks=all under leader
kills, through ``kraftwerk run``. Prints one row per run (verdict, acked and
lost per acks mode); ``--pytest`` instead runs the slow integration tests that
assert the expected outcomes.

    .venv/bin/python bench/campaign_matrix.py [--out /tmp/kraftwerk-matrix] [--pytest]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kwcli import kraftwerk_json, slow_tests, table_args  # noqa: E402

MATRIX = [
    ("unclean-loss", ["--variant", "unclean_election=on", "--variant", "kip966=off"], "lost > 0"),
    ("unclean-loss", ["--variant", "kip966=off"], "valid"),
    ("last-replica-standing", ["--variant", "kip966=off"], "lost > 0"),
    ("last-replica-standing", [], "valid"),
    ("acks1-leader-kill", ["--acks", "mixed"], "acks=1 lost > 0, acks=all lost 0"),
]


def main() -> int:
    args = table_args(__doc__, "/tmp/kraftwerk-matrix", "3").parse_args()
    if args.pytest:
        return slow_tests("tests/harness/test_integration_reference.py")
    print(f"{'scenario':<24}{'flags':<44}{'expect':<34}{'valid':<8}{'acks=all acked/lost':<22}{'acks=1 acked/lost':<20}{'s':>5}")
    for scenario, flags, expect in MATRIX:
        res, error, took = kraftwerk_json(["run", "--scenario", scenario, "--seed", args.seed, "--out", args.out,
                                           "--json", *flags])
        if res is None:
            print(f"{scenario:<24}{' '.join(flags):<44}{expect:<34}error: {error[:120]}")
            continue
        d = res.get("durability", {})
        a, o = d.get("acks=all", {}), d.get("acks=1", {})
        print(f"{scenario:<24}{' '.join(flags):<44}{expect:<34}{str(res['valid']):<8}"
              f"{a.get('acked', 0):>6}/{a.get('lost', 0):<15}{o.get('acked', 0):>6}/{o.get('lost', 0):<13}"
              f"{took:>5.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
