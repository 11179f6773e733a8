"""Host librdkafka's built-in mock cluster in this process and print its
bootstrap servers: a Kafka implementation nobody in this project wrote,
which bench/harness_overhead.py uses to measure the harness alone (notes/kafka-wire.md).

    python -m harness.dbs.mock_cluster --brokers 3
    # prints: 127.0.0.1:PORT,127.0.0.1:PORT,127.0.0.1:PORT   then serves until SIGTERM or SIGINT

The mock cluster lives as long as the client object that created it, so this
process just holds that object and waits.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from confluent_kafka import Producer


def start(brokers: int = 3) -> tuple[Producer, str]:
    holder = Producer({"test.mock.num.brokers": brokers, "bootstrap.servers": "", "log_level": 0})
    md = holder.list_topics(timeout=10)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in sorted(md.brokers.values(), key=lambda b: b.id))
    return holder, bootstrap


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=3)
    args = ap.parse_args(argv)
    holder, bootstrap = start(args.brokers)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(bootstrap, flush=True)
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        holder.poll(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
