"""Throughput and ack latency of the reference broker and of real Apache
Kafka (4.4, KRaft), side by side in one run, with confluent-kafka.

For each db (``--db reference|kafka|both``, default both) starts a local
cluster (3 brokers + 3 controllers by default), creates a topic
with RF=3 and min.insync.replicas=2, then measures with one librdkafka
producer on loopback:

* messages/s and p50/p99 ack latency, acks=all and acks=1, producing as fast
  as the producer can;
* ack latency at a fixed 1,000 msg/s.

Prints the figures and, with both, the ratios reference/Kafka (msg/s: below 1
means the reference is slower; latency: above 1 means it is slower), and
``--json`` for machines. Never asserted in tests. Kafka runs with the harness's
small heaps (harness/dbs/kafka/db.py), so its figures are for this configuration,
not for a tuned Kafka.

    .venv/bin/python bench/broker_throughput.py [--db both] [--messages 200000] [--size 100]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from reference_impl.server.launcher import LocalCluster  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})], operation_timeout=30)
    for f in fs.values():
        f.result(timeout=60)
    # wait until the leader accepts writes
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    ok: list = []
    p.produce(name, b"warm-up", partition=0, on_delivery=lambda e, m: ok.append(e))
    p.flush(60)
    if not ok or ok[0] is not None:
        raise RuntimeError(f"warm-up produce failed: {ok}")


def settle_isr(bootstrap: str, topic: str, timeout: float = 120.0) -> None:
    """Wait until the partition's ISR holds every replica again (Kafka: the
    followers caught up, seen from outside)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions[0]
        if len(p.isrs) == len(p.replicas):
            return
        time.sleep(0.5)


def settle(c: LocalCluster, tp: str, timeout: float = 120.0) -> None:
    """Wait until every replica's log end offset is the same (followers caught up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leos = {c.control(b.node_id, "GET", "/status")["partitions"].get(tp, {}).get("leo") for b in c.brokers}
        if len(leos) == 1 and None not in leos:
            return
        time.sleep(0.5)


def run_max(bootstrap: str, topic: str, acks: str, n: int, size: int) -> dict:
    p = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": 120000, "enable.idempotence": False,
    })
    value = b"x" * size
    lat: list[float] = []
    errors = [0]

    def make_cb(t0: float):
        def cb(err, msg):
            if err is not None:
                errors[0] += 1
            else:
                lat.append(time.perf_counter() - t0)
        return cb

    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=make_cb(time.perf_counter()))
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(300)
    elapsed = time.perf_counter() - start
    return {
        "acks": acks, "messages": n, "size": size, "seconds": round(elapsed, 3),
        "msgs_per_s": round(len(lat) / elapsed, 1), "errors": errors[0],
        "p50_ms": round(pct(lat, 50) * 1000, 2), "p99_ms": round(pct(lat, 99) * 1000, 2),
    }


def run_fixed(bootstrap: str, topic: str, acks: str, rate: int, seconds: float, size: int) -> dict:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "message.timeout.ms": 60000})
    value = b"y" * size
    lat: list[float] = []
    errors = [0]
    start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        due = start + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            p.poll(min(0.001, due - now))
        t0 = time.perf_counter()

        def cb(err, msg, t0=t0):
            if err is not None:
                errors[0] += 1
            else:
                lat.append(time.perf_counter() - t0)

        p.produce(topic, value, partition=0, on_delivery=cb)
        p.poll(0)
    p.flush(120)
    return {
        "acks": acks, "rate": rate, "messages": n, "errors": errors[0],
        "p50_ms": round(pct(lat, 50) * 1000, 2), "p99_ms": round(pct(lat, 99) * 1000, 2),
        "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else None,
    }


def measure(bootstrap: str, a: argparse.Namespace, settle_fn) -> dict:
    create_topic(bootstrap, "bench")
    results: dict = {}
    # warm-up (a JVM compiles its hot paths during the first seconds of load;
    # not reported), then let the followers catch up
    run_max(bootstrap, "bench", "all", max(10_000, a.messages // 5), a.size)
    settle_fn()
    # fixed-rate phases first: after a max-rate acks=1 phase the followers
    # are still catching up and would inflate every later latency
    results["fixed acks=all"] = run_fixed(bootstrap, "bench", "all", 1000, a.rate_seconds, a.size)
    results["fixed acks=1"] = run_fixed(bootstrap, "bench", "1", 1000, a.rate_seconds, a.size)
    results["acks=all"] = run_max(bootstrap, "bench", "all", a.messages, a.size)
    settle_fn()
    results["acks=1"] = run_max(bootstrap, "bench", "1", a.messages, a.size)
    return results


def bench_reference(a: argparse.Namespace) -> dict:
    d = a.dir or tempfile.mkdtemp(prefix="kw-bench-")
    c = LocalCluster.plan(d, 3, 3, a.base_port, combined=a.combined)
    try:
        c.up(90)
        results = measure(c.bootstrap, a, lambda: settle(c, "bench-0"))
        results["node_errors"] = {n.node_id: c.control(n.node_id, "GET", "/status")["errors"] for n in c.nodes}
    finally:
        c.down(40)
        if a.dir is None:
            shutil.rmtree(d, ignore_errors=True)
    return results


def bench_kafka(a: argparse.Namespace) -> dict:
    from harness.config import build_config
    from harness.dbs.kafka.db import preflight
    from harness.handcluster import kafka as handcluster

    cfg = build_config(None, {"db": "kafka", "combined": a.combined, "seed": 1, "kafka_version": a.kafka_version})
    preflight(cfg)
    d = tempfile.mkdtemp(prefix="kw-bench-kafka-")
    try:
        st = handcluster.up(cfg, d, 180)
        results = measure(st["bootstrap"], a, lambda: settle_isr(st["bootstrap"], "bench"))
        results["version"] = st["version"]
    finally:
        if handcluster.load(d) is not None:
            handcluster.down(d, 40)
        shutil.rmtree(d, ignore_errors=True)
    return results


def print_one(name: str, r: dict) -> None:
    for k in ("acks=all", "acks=1"):
        x = r[k]
        print(f"{name:9s} {k:8s} max rate: {x['msgs_per_s']:>10,.0f} msg/s  p50 {x['p50_ms']} ms  p99 {x['p99_ms']} ms"
              f"  ({x['messages']} msgs in {x['seconds']} s, errors {x['errors']})")
    for k in ("fixed acks=all", "fixed acks=1"):
        x = r[k]
        print(f"{name:9s} {k:14s} at 1,000 msg/s: p50 {x['p50_ms']} ms  p99 {x['p99_ms']} ms  (errors {x['errors']})")


def ratios(ref: dict, kafka: dict) -> dict:
    out = {}
    for k in ("acks=all", "acks=1"):
        out[f"{k} msg/s"] = round(ref[k]["msgs_per_s"] / kafka[k]["msgs_per_s"], 3)
        for q in ("p50_ms", "p99_ms"):
            out[f"{k} {q}"] = round(ref[k][q] / kafka[k][q], 2) if kafka[k][q] else None
    for k in ("fixed acks=all", "fixed acks=1"):
        for q in ("p50_ms", "p99_ms"):
            out[f"{k} {q}"] = round(ref[k][q] / kafka[k][q], 2) if kafka[k][q] else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=["reference", "kafka", "both"], default="both")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rate-seconds", type=float, default=10.0)
    ap.add_argument("--base-port", type=int, default=19300)
    ap.add_argument("--combined", action="store_true", help="3 combined broker+controller nodes")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results: dict = {"cluster": "3 combined nodes" if a.combined else "3 brokers + 3 controllers"}
    if a.db in ("reference", "both"):
        results["reference"] = bench_reference(a)
    if a.db in ("kafka", "both"):
        results["kafka"] = bench_kafka(a)
    if a.db == "both":
        results["ratio reference/kafka"] = ratios(results["reference"], results["kafka"])
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"cluster: {results['cluster']}, RF=3, min.insync.replicas=2, {a.size}-byte values, loopback")
    for name in ("reference", "kafka"):
        if name in results:
            print_one(name if name == "reference" else f"kafka {results['kafka']['version']}", results[name])
    if "reference" in results:
        print(f"reference core errors logged per node: {results['reference']['node_errors']}")
    if a.db == "both":
        print("ratios reference/kafka (msg/s: <1 = reference slower; latency: >1 = reference slower):")
        for k, v in results["ratio reference/kafka"].items():
            print(f"  {k:28s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
