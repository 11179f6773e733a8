"""The campaign matrix against real Kafka 4.4 (KRaft) on the netns backend:
a faithful random campaign, acks=1 vs acks=all under the leader-kill story,
and the unclean-election story with unclean.leader.election.enable on and
off, through ``kraftwerk run --db kafka``. One row per run (verdict, acked
and lost per acks mode, anomaly types); ``--pytest`` instead runs the slow
tests that assert the expected outcomes (tests/kafka/test_kafka_campaigns.py).

    sudo .venv/bin/python bench/kafka_matrix.py [--out /tmp/kraftwerk-kafka-matrix] [--pytest]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kwcli import kraftwerk_json, slow_tests, table_args  # noqa: E402

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
    args = table_args(__doc__, "/tmp/kraftwerk-kafka-matrix", "5").parse_args()
    if args.pytest:
        return slow_tests("tests/kafka/test_kafka_campaigns.py")
    print(f"{'flags':<84}{'expect':<34}{'valid':<8}{'acks=all acked/lost':<21}{'acks=1 acked/lost':<19}{'s':>5}")
    for flags, expect in MATRIX:
        r, error, took = kraftwerk_json(["run", "--db", "kafka", "--backend", "netns", "--out", args.out,
                                         "--seed", args.seed, "--json", "--no-progress", *flags])
        if r is None:
            print(f"{' '.join(flags):<84}{expect:<34}error: {error[:120]}")
            continue
        d = r.get("durability", {})
        row = lambda m: f"{d.get(m, {}).get('acked')}/{d.get(m, {}).get('lost')}"  # noqa: E731
        print(f"{' '.join(flags):<84}{expect:<34}{str(r.get('valid')):<8}{row('acks=all'):<21}{row('acks=1'):<19}"
              f"{took:>5.0f}  {','.join(r.get('anomaly_types') or [])}  {r.get('run_dir')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
