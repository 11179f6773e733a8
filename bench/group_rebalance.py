"""Consumer groups on the reference broker and on real Kafka, side by side:
how long a confluent-kafka (librdkafka, classic protocol) group takes to
rebalance, and how many synchronous offset commits a member gets through.

* **first join**: a consumer subscribes to a 6-partition topic; time until it
  holds every partition (FindCoordinator, JoinGroup, SyncGroup).
* **join**: a second member subscribes; time until the two hold disjoint
  shares covering every partition (the first learns of the rebalance from a
  heartbeat, ``heartbeat.interval.ms`` = 100).
* **leave**: the second member closes (LeaveGroup); time until the first
  holds every partition again.
* **commit**: one member commits the offsets of its 6 partitions with
  ``commit(asynchronous=False)`` in a loop for ``--seconds``: commits/s and
  latency percentiles (each commit is an acks=all append to
  ``__consumer_offsets``).

Both clusters: 3 brokers and 3 controllers on this machine, the group
coordinator settings of db kafka (no initial rebalance delay, one offsets
partition, replication factor 3).

    .venv/bin/python bench/group_rebalance.py [--db reference|kafka|both] [--rounds 5] [--seconds 10]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness.config.timings import reference_settings  # noqa: E402

TOPIC = "bench-groups"
PARTITIONS = 6
#: the timings and group-coordinator settings every db runs with
REFERENCE_CONFIG = reference_settings(brokers=3)


def prepare(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(600):
        p.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
    p.flush(60)


def member(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 100,
                     "log_level": 0})


def parts(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def wait(consumers: list[Consumer], done, timeout: float = 60.0) -> float:
    """Seconds until ``done()``, polling every consumer meanwhile."""
    t0 = time.monotonic()
    while not done():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the group did not settle")
        for c in consumers:
            c.poll(0.005)
    return time.monotonic() - t0


def rebalances(bootstrap: str, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"first join": [], "join": [], "leave": []}
    everything = set(range(PARTITIONS))
    for r in range(rounds):
        a = member(bootstrap, f"bench-{r}")
        a.subscribe([TOPIC])
        out["first join"].append(wait([a], lambda: parts(a) == everything))
        b = member(bootstrap, f"bench-{r}")
        b.subscribe([TOPIC])
        out["join"].append(wait([a, b], lambda: bool(parts(a)) and bool(parts(b))
                                and parts(a) | parts(b) == everything and not parts(a) & parts(b)))
        t0 = time.monotonic()
        b.close()
        out["leave"].append(time.monotonic() - t0 + wait([a], lambda: parts(a) == everything))
        a.close()
    return out


def commits(bootstrap: str, seconds: float) -> list[float]:
    c = member(bootstrap, "bench-commit")
    c.subscribe([TOPIC])
    wait([c], lambda: parts(c) == set(range(PARTITIONS)))
    lat: list[float] = []
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n += 1
        offsets = [TopicPartition(TOPIC, p, n) for p in range(PARTITIONS)]
        t0 = time.monotonic()
        c.commit(offsets=offsets, asynchronous=False)
        lat.append(time.monotonic() - t0)
    got = {tp.partition: tp.offset for tp in c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 10)}
    c.close()
    assert got == {p: n for p in range(PARTITIONS)}, f"committed offsets read back wrong: {got}"
    return lat


def measure(bootstrap: str, a: argparse.Namespace) -> dict:
    prepare(bootstrap)
    res: dict = rebalances(bootstrap, a.rounds)
    res["commit"] = commits(bootstrap, a.seconds)
    return res


def bench_reference(a: argparse.Namespace) -> dict:
    from reference_impl.server.launcher import LocalCluster

    d = tempfile.mkdtemp(prefix="kw-bench-groups-")
    c = LocalCluster.plan(d, 3, 3, 0, config=REFERENCE_CONFIG)
    try:
        c.up(90)
        return measure(c.bootstrap, a)
    finally:
        c.down(40)
        shutil.rmtree(d, ignore_errors=True)


def bench_kafka(a: argparse.Namespace) -> dict:
    from harness.config import build_config
    from harness.dbs.kafka.db import preflight
    from harness.handcluster import kafka as handcluster

    cfg = build_config(None, {"db": "kafka", "seed": 1, "kafka_version": a.kafka_version})
    preflight(cfg)
    d = tempfile.mkdtemp(prefix="kw-bench-groups-kafka-")
    try:
        st = handcluster.up(cfg, d, 180)
        return measure(st["bootstrap"], a)
    finally:
        if handcluster.load(d) is not None:
            handcluster.down(d, 40)
        shutil.rmtree(d, ignore_errors=True)


def ms(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(1000 * s[min(len(s) - 1, int(q * len(s)))], 1)


def report(results: dict[str, dict]) -> None:
    names = list(results)
    print(f"{'':24}" + "".join(f"{n:>36}" for n in names))
    for k in ("first join", "join", "leave"):
        cells = [f"median {ms(r[k], 0.5):>7} ms, max {ms(r[k], 1.0):>7} ms" for r in results.values()]
        print(f"rebalance: {k:<13}" + "".join(f"{c:>36}" for c in cells))
    cells = []
    for r in results.values():
        lat = r["commit"]
        cells.append(f"{len(lat) / sum(lat):>8.1f} commits/s")
    print(f"{'commit (sync, 6 parts)':<24}" + "".join(f"{c:>36}" for c in cells))
    cells = [f"p50 {ms(r['commit'], 0.5):>6} ms, p99 {ms(r['commit'], 0.99):>6} ms" for r in results.values()]
    print(f"{'commit latency':<24}" + "".join(f"{c:>36}" for c in cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=["reference", "kafka", "both"], default="both")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    results: dict[str, dict] = {}
    if a.db in ("reference", "both"):
        results["reference"] = bench_reference(a)
    if a.db in ("kafka", "both"):
        results["kafka"] = bench_kafka(a)
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
