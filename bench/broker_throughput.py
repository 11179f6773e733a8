"""Throughput and ack latency of the reference broker and of real Apache
Kafka (4.4, KRaft), side by side in one run, with confluent-kafka.

For each db (``--db reference|kafka|both``; with both, the reference and
then Kafka, one after the other) the bench starts a local cluster (3 brokers
+ 3 controllers, or ``--combined``), creates one topic (RF 3,
min.insync.replicas 2, ``--partitions`` 3: a leader on every broker) and runs:

1. a warm-up, ``--warmup-seconds`` at full speed and acks=all from every
   producer (a JVM compiles its hot paths under load: tens of seconds, not
   tens of thousands of messages); not reported;
2. fixed rates (``--phases fixed``), after a warm-up of their own
   (:func:`warm_fixed`: single-message sends at the highest rate, acks=all,
   in 5 s windows for at least a minute and until the p50 stops falling, as a JVM's single-message
   request path is still cold after the full-speed warm-up's batches; the
   windows' p50s are printed, not reported): at each of ``--rates`` msg/s,
   acks=all then acks=1: the bench's producer and the plain producer (the
   self-check), ``--rate-seconds`` each in :data:`SLICES` alternating
   slices so both meet the same machine, then the unbounded producer for
   ``--rate-seconds``; then the one-at-a-time probe at acks=all and acks=1;
3. full speed (``--phases full``): ``--messages`` split over
   ``--producers`` processes, each its own librdkafka instance (no GIL
   shared), acks=all then acks=1, the pair ``--repeats`` times; msg/s, p50
   and p99 printed as the rounds' medians.

Before every phase the followers have caught up (every partition's ISR
holds all its replicas and the high watermarks add up to every message
acknowledged so far: an ISR alone says nothing of how far behind a member
is) and the db has settled: the page cache's dirty pages are written out
(os.sync(): otherwise the kernel writes a full-speed phase's gigabytes 30 s
later, in the middle of another phase) and its processes together use
under :data:`IDLE_CORES_PER_NODE` cores per node over a second (or
:data:`SETTLE_TIMEOUT` passed; the longest wait and the busiest idle are
printed). ``--phases fixed`` runs the warm-up and the fixed rates alone.

Kafka runs as its users run it (``--kafka-profile users``, the default):
the JVM options of Kafka's own start scripts (1 GiB heaps, G1, the
optimising compiler) and Kafka's defaults for the threads and timeouts that
db kafka shortens for tests; ``--kafka-profile harness`` runs it as runs do
(384 MiB heaps, serial GC, client compiler only, 2 network and 2 I/O
threads, 3 s replica lag). Every server.properties value that still differs
from Kafka's defaults is printed with its reason, and so are the JVM
options and every producer's settings.

The fixed-rate producers. The bench's producer and the plain one share
their client settings: ``linger.ms`` 0 (every message is sent at once), at
most 5 requests in flight per connection and Nagle's algorithm off, as
Kafka's Java producer connects (its default in-flight bound; its
``org.apache.kafka.common.network.Selector`` sets TCP_NODELAY, Kafka
4.4.0's ``kafka-clients-4.4.0.jar`` read with javap; librdkafka's
``socket.nagle.disable`` is false by default).
They differ in how they measure: the bench's takes librdkafka's own
latency (``msg.latency()``) and paces each send against a fixed schedule;
the plain producer is what anyone would write, a wall-clock stamp before
produce() and another in a callback of its own. Both wait in poll(), which
runs each delivery callback as its ack arrives (:func:`serve_until`). The
self-check compares their p50s: within 2x, the bench's measurement is not
the figure's cause. Beside the plain producer's wall-clock p50 it prints
librdkafka's own measure of the same acks. On 2026-12-07, on Kafka at
1,000 msg/s acks=all, the plain producer's two clocks agreed within 0.03
ms in every run that printed both, so the two producers differ, if at
all, in what their messages met, not in how they are timed. In five bench
runs the plain producer's p50 was the higher (1.4x to 3.4x), each time the
pair made in the same order on a cluster in the same state. Eight fresh
pairs on each of two warmed clusters (the two made in alternating order,
each first sending 30 unmeasured messages over the three partitions, the
machine loaded by other work) then went both ways: plain/bench 0.55, 1.17, 1.29, 2.62, 1.00,
0.71, 1.05, 1.37 with Kafka's 3 network threads, and 0.76, 0.95, 0.77,
0.95, 1.48, 1.22, 1.51, 0.78 with 1 (so it is not which network thread a
connection lands on either): 8 of 16 higher, 7 lower, 1 outside 2x. The gap
belongs to the pair of producer instances, not to either producer's code;
so since then each side of the self-check is :data:`PAIRS` instances in
turn, each pair made fresh together and connected to every leader before
its first measured send (:func:`run_pair`, :func:`connected`).
The same pairs showed Kafka's p50 falling from 51-64 ms to about 1 ms
over the first two minutes after the full-speed warm-up, hence the fixed rates'
own warm-up. :data:`SLICES` went from 4 to 12 (0.5 s slices at
``--rate-seconds`` 6) after the first three of those five runs.
The unbounded producer is the plain one with
librdkafka's default of 1,000,000 requests in flight, printed beside them
because it is what the former self-check ran and what a user gets. The
one-at-a-time probe (1 in flight, each send after the previous ack) prints
how many single-message requests one connection is served a second.

Why the unbounded producer backs up for seconds at 1,000 msg/s acks=all on
Kafka (found 2026-12-06 on the shared 2-core machine; a plain producer
against ``kraftwerk cluster up`` had measured 1.1-2.5 ms at about 900 msg/s
by hand). Kafka serves one request per connection at a time
(``kafka.network.Processor`` mutes a channel when a request is received,
``Selector.mute`` with ``REQUEST_RECEIVED``, and unmutes it on
``RESPONSE_SENT``: Kafka 4.4.0's ``kafka_2.13-4.4.0.jar``, read with
javap); an acks=all produce is answered only when both followers have
fetched it and fetched again (the second fetch moves the high watermark);
with ``linger.ms`` 0 and no bound on requests in flight librdkafka sends
every message as its own request. So one connection carries at most the
one-at-a-time rate of single-message requests, and whenever the brokers
stall for longer than the gap between sends (a 6-JVM cluster on 2 shared
cores) the queue grows and drains only at the difference between that
rate and the sending rate. Capped at 5 in flight, the messages that wait
go together in the next request and the queue cannot grow.

Measured that day, load average 4 to 17 from other work, 3 brokers + 3
controllers, users profile. Not Kafka still busy after the warm-up: its 6
JVMs were idle (0.1-0.15 cores together) within 2 s of the followers
catching up. But a JVM not warmed up: one at a time, acks=all, 78
requests/s (p50 9.03 ms) on a fresh cluster, 380/s right after a 20 s
warm-up, 641/s 30 s later and 1,331-1,684/s in later runs (p50 0.53-0.67
ms). At 1,000 msg/s, 0.6 to 0.75 of that rate, the unbounded producer's
p50 ran from 0.66 ms to 5,091 ms from one 6 s phase to the next on the
same warm cluster, with the bounded producers at 0.61-61 ms: the figure
is the machine's stalls in those seconds. Two stalls the bench now keeps
out of its phases: the kernel writing out a full-speed phase's 1.5-2 GB
of dirty pages 30 s later (seen in /proc/meminfo during a run), and the
bench's and the plain producer meeting different machines one after the
other (a run's self-check at 1,000 msg/s acks=all: bench 28.27 ms, its
sends late by up to 48.51 ms, then plain 10.0 ms). Measured and not the
cause: the topic's partition count (spreading messages over the three
leaders, ``sticky.partitioning.linger.ms`` 0, still backed up, p50
3,264 ms); a process or GIL shared with the producer (each runs alone in
the bench's process and is served inside poll()). Nagle's algorithm
(librdkafka's default) did not decide it either way: with it on, acks=all
at 1,000 msg/s p50 61.48 ms then 0.61 ms in two passes, with it off
0.95 ms then 0.94 ms; the fixed-rate producers turn it off because the
Java producer does. The hand measurement most likely ran in a quieter
minute (not re-run here).

Earlier versions also timed each ack at the next send (a producer that
sleeps between sends runs its callbacks only at the next poll(): on the
reference both producers printed exactly 1/rate, 10.02 ms at 100 msg/s).

Where it stands: see docs/architecture.md (Performance) for the figures
of the last full run.

    .venv/bin/python bench/broker_throughput.py [--db both] [--messages 1000000] [--producers 3] [--repeats 3]
    .venv/bin/python bench/broker_throughput.py --db kafka --phases fixed   # the fixed rates alone

Exit 0 with figures, 2 on bad flags, 4 when a cluster, a producer or the
catch-up fails (one line). Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import shutil
import signal
import statistics
import sys
import tempfile
import time
from array import array
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import confluent_kafka  # noqa: E402
from confluent_kafka import KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402

from harness.config import build_config  # noqa: E402
from harness.config.timings import reference_settings  # noqa: E402
from harness.dbs.kafka.db import harness_jvm, preflight  # noqa: E402
from harness.errors import EXIT_HARNESS, HarnessError, KraftwerkError, UsageError  # noqa: E402
from harness.handcluster import kafka as handcluster  # noqa: E402
from reference_impl.server.launcher import ClusterError, LocalCluster  # noqa: E402

TOPIC = "bench"

#: every node as Kafka's ``bin/kafka-server-start.sh`` starts it: its heap
#: (``KAFKA_HEAP_OPTS``) and ``bin/kafka-run-class.sh``'s
#: ``KAFKA_JVM_PERFORMANCE_OPTS``; 6 JVMs of 1 GiB fit this 24 GiB machine
KAFKA_JVM_PERFORMANCE = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                         "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]

#: Kafka 4.4's defaults for every setting db kafka writes that it does not
#: take from the cluster's layout (``harness.dbs.kafka.props``)
KAFKA_DEFAULTS = {
    "min.insync.replicas": "1", "default.replication.factor": "1", "num.partitions": "1",
    "unclean.leader.election.enable": "false",
    "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "50",
    "share.coordinator.state.topic.replication.factor": "3", "share.coordinator.state.topic.min.isr": "2",
    "replica.lag.time.max.ms": "30000", "broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000",
    "replica.fetch.backoff.ms": "1000", "replica.socket.timeout.ms": "30000",
    "controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000",
    "group.initial.rebalance.delay.ms": "3000", "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "num.network.threads": "3", "num.io.threads": "8", "num.replica.fetchers": "1", "background.threads": "10",
    "auto.create.topics.enable": "true",
    # null in Kafka, which then flushes on log.flush.scheduler.interval.ms's schedule: never
    "log.flush.interval.messages": "9223372036854775807", "log.flush.interval.ms": "9223372036854775807",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
}

#: what the users profile writes back: the threads and timeouts db kafka
#: changes for tests, each at Kafka's default
USERS_OVERRIDES = ("num.network.threads", "num.io.threads", "background.threads", "replica.lag.time.max.ms",
                   "broker.session.timeout.ms", "broker.heartbeat.interval.ms", "replica.fetch.backoff.ms",
                   "replica.socket.timeout.ms")

#: why a setting may still differ from Kafka's default
WHY = {
    "min.insync.replicas": "the cluster's shape (the topic sets RF 3, min ISR 2 itself)",
    "default.replication.factor": "the cluster's shape",
    "num.partitions": "the cluster's shape (the topic sets its partitions itself)",
    "transaction.state.log.num.partitions": "unused here (no transactions)",
    "group.initial.rebalance.delay.ms": "unused here (no consumer groups)",
    "offsets.topic.num.partitions": "unused here (no consumer groups)",
    "auto.create.topics.enable": "unused here (the topic is created)",
    "num.network.threads": "db kafka's: sized for many JVMs on 2 shared cores",
    "num.io.threads": "db kafka's: sized for many JVMs on 2 shared cores",
    "background.threads": "db kafka's: sized for many JVMs on 2 shared cores",
}

#: the fixed-rate producers (the bench's and the plain one of the
#: self-check): no lingering, and as Kafka's Java producer connects: at most
#: 5 requests in flight, Nagle's algorithm off (its ``Selector`` sets
#: TCP_NODELAY on every connection; librdkafka leaves Nagle on by default)
FIXED_PRODUCER = {"linger.ms": 0, "max.in.flight.requests.per.connection": 5, "socket.nagle.disable": True}

#: the db's processes count as idle below this many cores each, averaged
#: over :data:`SETTLE_WINDOW` seconds (Kafka's 6 JVMs idle at 0.02-0.05
#: each here; a JVM still compiling or a follower still fetching is above)
IDLE_CORES_PER_NODE = 0.05
SETTLE_WINDOW = 1.0
SETTLE_TIMEOUT = 20.0

#: alternating slices of the bench's and the plain producer (:func:`run_pair`):
#: short ones, so both meet the same seconds of a cluster whose acks=all
#: latency moves from one second to the next (4 until 2026-12-07)
SLICES = 12
#: producer instances each side of the self-check is made of, in turn (:func:`run_pair`)
PAIRS = 3

#: the fixed-rate warm-up (:func:`warm_fixed`): windows of this many
#: seconds at the highest fixed rate, acks=all, at least
#: :data:`FIXED_WARMUP_MIN` of them (a JVM's p50 falls in steps, with
#: plateaus of 15 s between them: 88, 49, 52, 46 ms, then 3 ms a minute
#: later, in one run), then until the p50 has stopped falling (two windows
#: in a row not under :data:`STEADY` of the lowest before them) or
#: :data:`FIXED_WARMUP_WINDOWS` have run
FIXED_WARMUP_WINDOW_S = 5.0
FIXED_WARMUP_MIN = 12
FIXED_WARMUP_WINDOWS = 36
STEADY = 0.75

CLK_TCK = os.sysconf("SC_CLK_TCK")


def pct(xs: Any, p: float) -> float:
    """The p-th percentile (nearest rank) of ``xs``, sorted."""
    if not len(xs):
        return float("nan")
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def summary(lat: Any) -> dict:
    """p50, p99 and mean of ack latencies in seconds, in ms."""
    s = sorted(lat)
    return {"p50_ms": round(pct(s, 50) * 1000, 2), "p99_ms": round(pct(s, 99) * 1000, 2),
            "mean_ms": round(sum(s) / len(s) * 1000, 2) if s else None}


# ---------------------------------------------------------------- producers
@dataclass(frozen=True)
class Job:
    """One producer process's share of a full-speed phase: ``count``
    messages, or as many as fit in ``seconds`` (a warm-up)."""

    bootstrap: str
    topic: str
    acks: str
    count: int
    seconds: float
    size: int


def producer_process(job: Job, barrier: Any, out: Any) -> None:
    """Produce ``job`` as fast as librdkafka takes it; put (acked, errors,
    start, end, latencies) on ``out``. Latency is librdkafka's own, from
    produce() to the acknowledgement, whenever Python serves the callback."""
    lat = array("d")
    errors = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            lat.append(msg.latency())
        else:
            errors[0] += 1

    p = Producer({"bootstrap.servers": job.bootstrap, "acks": job.acks, "on_delivery": delivered})
    p.list_topics(job.topic, timeout=30)
    value = b"x" * job.size
    barrier.wait(120)
    start = time.monotonic()
    deadline = start + job.seconds if job.seconds else math.inf
    sent = 0
    while sent < job.count:
        if sent % 1000 == 0:
            p.poll(0)
            if time.monotonic() >= deadline:
                break
        try:
            p.produce(job.topic, value)
            sent += 1
        except BufferError:
            p.poll(0.001)
    left = p.flush(300)
    out.put((len(lat), errors[0] + left, start, time.monotonic(), lat.tobytes()))


def run_full_speed(bootstrap: str, acks: str, count: int, seconds: float, a: argparse.Namespace) -> dict:
    """``count`` messages (or ``seconds`` of them) from ``a.producers``
    processes started together; msg/s over the wall time from the first
    start to the last acknowledgement."""
    ctx = mp.get_context("spawn")  # no librdkafka threads forked from this process
    barrier, out = ctx.Barrier(a.producers), ctx.Queue()
    shares = [count // a.producers + (1 if i < count % a.producers else 0) for i in range(a.producers)]
    procs = [ctx.Process(target=producer_process, args=(Job(bootstrap, TOPIC, acks, n, seconds, a.size), barrier, out),
                         daemon=True) for n in shares]
    for pr in procs:
        pr.start()
    try:
        done = collect(procs, out, 600.0)
    finally:
        for pr in procs:
            pr.join(10)
            if pr.is_alive():
                pr.kill()
    lat = array("d")
    for r in done:
        lat.frombytes(r[4])
    acked, errors = sum(r[0] for r in done), sum(r[1] for r in done)
    wall = max(r[3] for r in done) - min(r[2] for r in done)
    return {"acks": acks, "messages": acked, "errors": errors, "producers": a.producers, "size": a.size,
            "seconds": round(wall, 3), "msgs_per_s": round(acked / wall, 1), **summary(lat)}


def collect(procs: list, out: Any, timeout: float) -> list[tuple]:
    """One result per producer process, or a HarnessError when one dies
    first or the phase outlasts ``timeout``."""
    done: list[tuple] = []
    deadline = time.monotonic() + timeout
    while len(done) < len(procs):
        try:
            done.append(out.get(timeout=1.0))
        except queue.Empty:
            dead = [pr for pr in procs if pr.exitcode not in (None, 0)]
            if dead:
                raise HarnessError(f"a producer process exited with {dead[0].exitcode}") from None
            if time.monotonic() > deadline:
                raise HarnessError(f"producers did not finish in {timeout:.0f}s") from None
    return done


def serve_until(p: Producer, due: float) -> None:
    """Wait until ``due`` inside poll(), which runs each delivery callback
    as its ack arrives. Waiting in time.sleep() instead leaves every ack
    to the poll() after the next send, and the latency measured is the gap
    between sends whatever the broker does (1/rate: 10 ms at 100 msg/s)."""
    while (left := due - time.monotonic()) > 0:
        p.poll(left)


def _unmeasured(err: Any, msg: Any) -> None:
    """The delivery report of a message no figure counts."""


def connected(conf: dict[str, Any], partitions: int, value: bytes) -> Producer:
    """A producer that has sent one message to each partition and had it
    acknowledged, so it holds a connection to every leader before the first
    measured send (librdkafka connects to a broker when it first needs it);
    those messages' reports are not counted (a message's own callback
    stands in for the producer's)."""
    p = Producer(conf)
    p.list_topics(TOPIC, timeout=30)
    for i in range(partitions):
        p.produce(TOPIC, value, partition=i, on_delivery=_unmeasured)
    if p.flush(60):
        raise HarnessError("a fixed-rate producer's first messages were not acknowledged in 60 s")
    return p


class FixedSender:
    """What both fixed-rate producers hold: their client settings and the
    producer instance now sending (:meth:`renew`)."""

    value: bytes  #: each message's value, set by the sender before this class's __init__

    def __init__(self, conf: dict[str, Any], a: argparse.Namespace) -> None:
        self.conf, self.partitions = conf, a.partitions
        self.renew()

    def renew(self) -> None:
        """A fresh producer instance (:func:`run_pair` says why), the old one gone."""
        self.p = connected(self.conf, self.partitions, self.value)


class BenchSender(FixedSender):
    """The bench's fixed-rate producer: message i of a slice is due at
    start + i/rate (a late send never shifts the later ones), it waits in
    poll() until then; latency is librdkafka's own, produce() to ack."""

    def __init__(self, bootstrap: str, acks: str, a: argparse.Namespace) -> None:
        self.lat, self.late, self.errors, self.value = array("d"), array("d"), 0, b"y" * a.size
        super().__init__({"bootstrap.servers": bootstrap, "acks": acks, **FIXED_PRODUCER,
                          "on_delivery": self.delivered}, a)

    def delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.lat.append(msg.latency())
        else:
            self.errors += 1

    def send_for(self, rate: int, seconds: float) -> None:
        start = time.monotonic()
        for i in range(int(rate * seconds)):
            due = start + i / rate
            serve_until(self.p, due)
            self.late.append(time.monotonic() - due)
            self.p.produce(TOPIC, self.value)
            self.p.poll(0)
        self.errors += self.p.flush(120)

    def result(self, acks: str, rate: int) -> dict:
        """The figures; the producer is done with and goes now (it holds
        this object through its delivery callback: a cycle that keeps its
        connections open until the cyclic collector happens to run, seen
        as disconnect lines when a cluster stops)."""
        del self.p
        return {"acks": acks, "rate": rate, "messages": len(self.lat), "errors": self.errors,
                "sent_late_p99_ms": round(pct(sorted(self.late), 99) * 1000, 2), **summary(self.lat)}


class PlainSender(FixedSender):
    """The self-check: what anyone would write to time acks at a fixed rate
    (wait in poll() between sends, time each ack by the wall clock in its
    own callback), with the bench's client settings (``bounded``) or
    librdkafka's defaults but ``linger.ms`` 0 (unbounded requests in
    flight: each message its own request, see the module's docstring)."""

    def __init__(self, bootstrap: str, acks: str, a: argparse.Namespace, bounded: bool = True) -> None:
        self.lat: list[float] = []
        #: librdkafka's own latency of the same acks (``msg.latency()``, as
        #: the bench's producer reads it): what the wall clock adds beyond
        #: it is this process's own wait to run the callback
        self.own = array("d")
        self.errors, self.value = 0, b"z" * a.size
        super().__init__({"bootstrap.servers": bootstrap, "acks": acks,
                          **(FIXED_PRODUCER if bounded else {"linger.ms": 0})}, a)

    def send_for(self, rate: int, seconds: float) -> None:
        t_next = time.monotonic()
        for _ in range(int(rate * seconds)):
            serve_until(self.p, t_next)
            t0 = time.monotonic()

            def delivered(err: Any, msg: Any, t0: float = t0) -> None:
                if err is None:
                    self.lat.append(time.monotonic() - t0)
                    self.own.append(msg.latency())
                else:
                    self.errors += 1

            self.p.produce(TOPIC, self.value, on_delivery=delivered)
            self.p.poll(0)
            t_next += 1.0 / rate
        self.errors += self.p.flush(120)

    def result(self, acks: str, rate: int) -> dict:
        return {"acks": acks, "rate": rate, "messages": len(self.lat), "errors": self.errors, **summary(self.lat),
                "librdkafka_p50_ms": summary(self.own)["p50_ms"]}


def warm_fixed(bootstrap: str, a: argparse.Namespace) -> dict:
    """Warm the db up on the fixed rates' own load: single-message requests
    at the highest rate, acks=all, in windows of
    :data:`FIXED_WARMUP_WINDOW_S`, until the p50 has stopped falling. The
    full-speed warm-up's large batches leave a JVM's single-message request
    path cold: on 2026-12-07, after a 30 s full-speed warm-up, Kafka's
    acks=all p50 at 1,000 msg/s fell from 51-64 ms to about 1 ms over the
    next eight fixed-rate pairs (about two minutes), where the reference's has
    no compiler to wait for. A cluster its users run has long been warm, so
    the fixed rates are measured only after this. Not a figure: the
    windows' p50s are printed to show where it stopped."""
    rate = max(a.rates)
    s = BenchSender(bootstrap, "all", a)
    p50s: list[float] = []
    acked = 0

    def steady() -> bool:
        return len(p50s) >= FIXED_WARMUP_MIN and all(p50s[i] >= STEADY * min(p50s[:i]) for i in (-1, -2))

    while len(p50s) < FIXED_WARMUP_WINDOWS and not steady():
        s.lat = array("d")
        s.send_for(rate, FIXED_WARMUP_WINDOW_S)
        p50s.append(summary(s.lat)["p50_ms"])
        acked += len(s.lat)
    s.result("all", rate)  # the producer goes
    return {"rate": rate, "window_s": FIXED_WARMUP_WINDOW_S, "p50_ms": p50s, "messages": acked, "steady": steady()}


def run_pair(bootstrap: str, acks: str, rate: int, a: argparse.Namespace) -> dict[str, dict]:
    """The bench's producer and the plain one, ``a.rate_seconds`` each, in
    :data:`SLICES` alternating slices (each drained before the next starts),
    so both see the same machine: a shared 2-core host changes from one
    6-second phase to the next. Each side is :data:`PAIRS` producer
    instances in turn, made fresh together (in alternating order) every
    ``SLICES // PAIRS`` slices: the p50s of two producers made one after
    the other differed by up to 2.6x either way from one pair to the next
    on one cluster (the module's docstring), so one pair's gap says which
    two instances met what, not which producer measures."""
    bench, plain = BenchSender(bootstrap, acks, a), PlainSender(bootstrap, acks, a)
    per = SLICES // PAIRS
    for i in range(SLICES):
        if i and i % per == 0:
            for sender in ((bench, plain) if (i // per) % 2 == 0 else (plain, bench)):
                sender.renew()
        for sender in ((bench, plain) if i % 2 == 0 else (plain, bench)):
            sender.send_for(rate, a.rate_seconds / SLICES)
    return {f"fixed acks={acks} @{rate}": bench.result(acks, rate), f"plain acks={acks} @{rate}": plain.result(acks, rate)}


def run_unbounded(bootstrap: str, acks: str, rate: int, a: argparse.Namespace) -> dict[str, dict]:
    sender = PlainSender(bootstrap, acks, a, bounded=False)
    sender.send_for(rate, a.rate_seconds)
    return {f"unbounded acks={acks} @{rate}": sender.result(acks, rate)}


def run_one_at_a_time(bootstrap: str, acks: str, a: argparse.Namespace) -> dict[str, dict]:
    """How many single-message requests one connection gets served a
    second: send, wait for the ack, send the next, for ``a.rate_seconds``.
    Kafka serves one request per connection at a time, so a producer that
    sends each message as its own request faster than this backs up there
    (the reference reads the next request while one waits for followers)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                  "max.in.flight.requests.per.connection": 1})
    p.list_topics(TOPIC, timeout=30)
    lat = array("d")
    acked: list[Any] = []
    value = b"w" * a.size
    start = time.monotonic()
    while (t0 := time.monotonic()) - start < a.rate_seconds:
        acked.clear()
        p.produce(TOPIC, value, on_delivery=lambda err, msg: acked.append(err))
        while not acked:
            p.poll(0.05)
        if acked[0] is not None:
            raise HarnessError(f"a one-at-a-time message failed: {acked[0]}")
        lat.append(time.monotonic() - t0)
    wall = time.monotonic() - start
    return {f"one-at-a-time acks={acks}": {"acks": acks, "messages": len(lat),
                                           "requests_per_s": round(len(lat) / wall, 1), **summary(lat)}}


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU the processes have used (/proc/<pid>/stat)."""
    total = 0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def settle(pids: list[int]) -> tuple[float, float]:
    """Write the dirty page cache out, then wait until the db's processes
    are idle (:data:`IDLE_CORES_PER_NODE` each over :data:`SETTLE_WINDOW`)
    or :data:`SETTLE_TIMEOUT` passed: returns the seconds waited and the
    cores they used in the last window. Neither db fsyncs its appends, so
    a full-speed phase leaves gigabytes of dirty pages that the kernel
    writes out 30 s later (``vm.dirty_expire_centisecs`` 3000), in the
    middle of a later phase; os.sync() writes them now, between phases."""
    t0 = time.monotonic()
    os.sync()
    while True:
        c0 = cpu_seconds(pids)
        time.sleep(SETTLE_WINDOW)
        cores = (cpu_seconds(pids) - c0) / SETTLE_WINDOW
        if cores < IDLE_CORES_PER_NODE * len(pids) or time.monotonic() - t0 > SETTLE_TIMEOUT:
            return round(time.monotonic() - t0, 1), round(cores, 2)


# ---------------------------------------------------------------- the topic
def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})],
                             operation_timeout=30)
    for f in fs.values():
        f.result(timeout=60)


def wait_caught_up(bootstrap: str, acked: int, timeout: float = 180.0) -> float:
    """Until every partition's ISR holds all its replicas and the high
    watermarks add up to ``acked``: every follower then holds every
    acknowledged message. Returns the seconds it took."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 5})  # no info lines at its end
    t0 = time.monotonic()
    while True:
        parts = admin.list_topics(topic=TOPIC, timeout=10).topics[TOPIC].partitions
        full = bool(parts) and all(len(p.isrs) == len(p.replicas) for p in parts.values())
        futs = admin.list_offsets({TopicPartition(TOPIC, i): OffsetSpec.latest() for i in parts}, request_timeout=10)
        hw = sum(f.result().offset for f in futs.values())
        if full and hw >= acked:
            return round(time.monotonic() - t0, 2)
        if time.monotonic() - t0 > timeout:
            raise HarnessError(f"followers not caught up after {timeout:.0f}s: ISR complete {full}, "
                               f"high watermarks {hw} of {acked} acknowledged")
        time.sleep(0.2)


Phase = tuple[str, Callable[[], dict[str, dict]]]


def fixed_phases(bootstrap: str, a: argparse.Namespace) -> list[Phase]:
    """At each rate and acks: the bench's producer beside the plain one with
    the same client settings (the self-check), then the plain producer with
    librdkafka's unbounded requests in flight; then one request at a time,
    the single-message rate one connection is served at."""
    phases: list[Phase] = []
    for rate in a.rates:
        for acks in ("all", "1"):
            phases += [(f"fixed and plain acks={acks} @{rate}", partial(run_pair, bootstrap, acks, rate, a)),
                       (f"unbounded acks={acks} @{rate}", partial(run_unbounded, bootstrap, acks, rate, a))]
    for acks in ("all", "1"):
        phases.append((f"one-at-a-time acks={acks}", partial(run_one_at_a_time, bootstrap, acks, a)))
    return phases


def full_round(bootstrap: str, acks: str, a: argparse.Namespace) -> dict[str, dict]:
    return {f"acks={acks}": run_full_speed(bootstrap, acks, a.messages, 0, a)}


def measure(bootstrap: str, pids: list[int], a: argparse.Namespace) -> dict:
    """The phases, in order, on one cluster (the module's docstring); every
    phase starts with the followers caught up and the db settled (its
    processes, ``pids``, idle)."""
    create_topic(bootstrap, a.partitions)
    out: dict = {"caught_up_s": {}, "settled": {}}
    rounds: dict[str, list[dict]] = {"acks=all": [], "acks=1": []}
    warm = run_full_speed(bootstrap, "all", 10**12, a.warmup_seconds, a)
    out["warm-up"] = {k: warm[k] for k in ("messages", "seconds", "msgs_per_s", "errors")}
    acked = warm["messages"]
    if "fixed" in a.phases:
        out["caught_up_s"]["fixed-rate warm-up"] = wait_caught_up(bootstrap, acked)
        out["settled"]["fixed-rate warm-up"] = settle(pids)
        out["fixed warm-up"] = warm_fixed(bootstrap, a)
        acked += out["fixed warm-up"]["messages"]
    phases = fixed_phases(bootstrap, a) if "fixed" in a.phases else []
    for i in range(a.repeats if "full" in a.phases else 0):
        phases += [(f"acks={acks} #{i + 1}", partial(full_round, bootstrap, acks, a)) for acks in ("all", "1")]
    for name, run in phases:
        out["caught_up_s"][name] = wait_caught_up(bootstrap, acked)
        out["settled"][name] = settle(pids)
        for key, r in run().items():
            acked += r["messages"]
            if key in rounds:
                rounds[key].append(r)
            else:
                out[key] = r
    out.update({k: medians(rs) for k, rs in rounds.items() if rs})
    return out


def medians(rounds: list[dict]) -> dict:
    """One full-speed phase's figures as the medians of its rounds, with
    every round's msg/s beside them."""
    med = {q: statistics.median(r[q] for r in rounds) for q in ("msgs_per_s", "p50_ms", "p99_ms", "seconds")}
    return {**rounds[0], **med, "messages": sum(r["messages"] for r in rounds) // len(rounds),
            "errors": sum(r["errors"] for r in rounds), "each_msgs_per_s": [r["msgs_per_s"] for r in rounds]}


# ---------------------------------------------------------------- the dbs
def bench_reference(a: argparse.Namespace) -> dict:
    config = reference_settings(3) if a.kafka_profile == "harness" else {}
    d = tempfile.mkdtemp(prefix="kw-bench-ref-")
    c = LocalCluster.plan(d, 3, 3, 0, combined=a.combined, config=config)
    try:
        c.up(90)
        results = measure(c.bootstrap, [n.pid for n in c.nodes if n.pid is not None], a)
        results["node_errors"] = {n.node_id: c.control(n.node_id, "GET", "/status")["errors"] for n in c.nodes}
        results["settings"] = config or "its defaults (Kafka's timeouts)"
    finally:
        c.down(40)
        shutil.rmtree(d, ignore_errors=True)
    return results


def kafka_jvm(profile: str, heap: str) -> Callable[[tuple[str, ...]], list[str]]:
    if profile == "harness":
        return harness_jvm
    return lambda roles: [f"-Xmx{heap}", f"-Xms{heap}", *KAFKA_JVM_PERFORMANCE]


def kafka_differences(node_dir: str) -> dict[str, str]:
    """The settings of a broker's server.properties that differ from Kafka's
    defaults: key -> 'value (default D): why'."""
    written = dict(line.split("=", 1) for line in open(os.path.join(node_dir, "server.properties")).read().splitlines()
                   if "=" in line)
    return {k: f"{v} (default {KAFKA_DEFAULTS[k]}): {WHY.get(k, 'db kafka: for runs of tens of seconds')}"
            for k, v in written.items() if k in KAFKA_DEFAULTS and v != KAFKA_DEFAULTS[k]}


def bench_kafka(a: argparse.Namespace) -> dict:
    overrides = [f"{k}={KAFKA_DEFAULTS[k]}" for k in USERS_OVERRIDES] if a.kafka_profile == "users" else []
    cfg = build_config(None, {"db": "kafka", "combined": a.combined, "seed": 1, "kafka_version": a.kafka_version,
                              "kafka_config": overrides})
    preflight(cfg)
    jvm = kafka_jvm(a.kafka_profile, a.kafka_heap)
    d = tempfile.mkdtemp(prefix="kw-bench-kafka-")
    try:
        st = handcluster.up(cfg, d, 180, jvm_options=jvm)
        results = measure(st["bootstrap"], [p["pid"] for p in st["processes"]], a)
        broker = next(n["name"] for n in st["nodes"] if "broker" in n["roles"])
        results.update(version=st["version"], profile=a.kafka_profile, jvm=jvm(("broker",)),
                       differences=kafka_differences(os.path.join(d, "nodes", broker)))
    finally:
        if handcluster.load(d) is not None:
            handcluster.down(d, 40)
        shutil.rmtree(d, ignore_errors=True)
    return results


# ---------------------------------------------------------------- output
KINDS = ("fixed", "plain", "unbounded")


def fixed_names(a: argparse.Namespace) -> list[str]:
    """The fixed-rate phases' names, in the order they run."""
    if "fixed" not in a.phases:
        return []
    return [f"{kind} acks={acks} @{rate}" for rate in a.rates for acks in ("all", "1") for kind in KINDS]


def full_names(a: argparse.Namespace) -> list[str]:
    return ["acks=all", "acks=1"] if "full" in a.phases else []


def ratios(ref: dict, kafka: dict, a: argparse.Namespace) -> dict:
    """reference/Kafka: msg/s (below 1: the reference is slower) and
    latency (above 1: the reference is slower), the bench's producers."""
    out = {}
    for k in full_names(a):
        out[f"{k} msg/s"] = round(ref[k]["msgs_per_s"] / kafka[k]["msgs_per_s"], 3)
    for k in [*full_names(a), *(n for n in fixed_names(a) if n.startswith("fixed"))]:
        for q in ("p50_ms", "p99_ms"):
            out[f"{k} {q[:3]}"] = round(ref[k][q] / kafka[k][q], 3) if kafka[k][q] else None
    return out


def self_check(r: dict, a: argparse.Namespace) -> dict:
    """The bench's fixed-rate p50 against the plain producer's (same client
    settings, its own pacing and timing), same db, same rate, the one right
    after the other: within 2x either way or not."""
    out = {}
    for rate in a.rates if "fixed" in a.phases else []:
        for acks in ("all", "1"):
            plain = r[f"plain acks={acks} @{rate}"]
            b, p = r[f"fixed acks={acks} @{rate}"]["p50_ms"], plain["p50_ms"]
            out[f"acks={acks} @{rate}"] = {"bench_p50_ms": b, "plain_p50_ms": p,
                                           "plain_librdkafka_p50_ms": plain.get("librdkafka_p50_ms"),
                                           "within_2x": bool(p and b and 0.5 <= b / p <= 2)}
    return out


def print_db(name: str, r: dict, a: argparse.Namespace) -> None:
    w = r["warm-up"]
    waits = r["settled"].values()
    print(f"{name}: warm-up {w['messages']:,} msgs in {w['seconds']} s ({w['msgs_per_s']:,.0f} msg/s); "
          f"before each phase: longest catch-up wait {max(r['caught_up_s'].values(), default=0)} s, longest "
          f"settle {max((s for s, _ in waits), default=0)} s, busiest idle {max((c for _, c in waits), default=0)} "
          f"cores (all nodes)")
    if "fixed warm-up" in r:
        fw = r["fixed warm-up"]
        print(f"  fixed-rate warm-up at {fw['rate']:,} msg/s acks=all, p50 of each {fw['window_s']:g} s window: "
              f"{', '.join(f'{x:g}' for x in fw['p50_ms'])} ms "
              f"({'stopped falling' if fw['steady'] else 'still falling at the cap'}; not a figure)")
    for k in full_names(a):
        x = r[k]
        print(f"  full speed {k:8s} {x['msgs_per_s']:>10,.0f} msg/s  p50 {x['p50_ms']} ms  p99 {x['p99_ms']} ms"
              f"  (medians of {len(x['each_msgs_per_s'])} rounds of {x['messages']:,} msgs, {x['producers']} "
              f"producers; each round's msg/s {x['each_msgs_per_s']}; errors {x['errors']})")
    for k in fixed_names(a):
        x = r[k]
        late = f", sends late p99 {x['sent_late_p99_ms']} ms" if "sent_late_p99_ms" in x else ""
        print(f"  {k.split(' @')[0]:20s} at {x['rate']:,} msg/s: p50 {x['p50_ms']} ms  p99 {x['p99_ms']} ms  "
              f"mean {x['mean_ms']} ms  ({x['messages']:,} msgs, errors {x['errors']}{late})")
    for acks in ("all", "1") if "fixed" in a.phases else ():
        x = r[f"one-at-a-time acks={acks}"]
        load = ", ".join(f"{rate:,} msg/s {rate / x['requests_per_s']:.2f}" for rate in a.rates)
        print(f"  one at a time acks={acks}: {x['requests_per_s']:,} requests/s on one connection, p50 {x['p50_ms']} "
              f"ms, mean {x['mean_ms']} ms; the unbounded producer's share of it: {load} (near 1 or above, "
              f"its single-message requests queue)")
    for k, c in r["self_check"].items():
        print(f"  self-check {k} msg/s: bench p50 {c['bench_p50_ms']} ms, plain producer p50 {c['plain_p50_ms']} ms "
              f"(by librdkafka's clock, as the bench reads it: {c.get('plain_librdkafka_p50_ms')} ms): "
              f"{'within' if c['within_2x'] else 'NOT within'} 2x")


def print_settings(results: dict, a: argparse.Namespace) -> None:
    print(f"cluster: {results['cluster']} on loopback; topic RF 3, min.insync.replicas 2, {a.partitions} partitions; "
          f"{a.size}-byte values; machine: {os.cpu_count()} cores shared with other work, "
          f"load average {results['load'][0]} at start, {results['load'][1]} at end")
    print("fsync: neither db fsyncs appended records (Kafka's default log.flush.interval.* never; the reference's "
          "log_flush_interval_messages 0); both fsync their metadata files (epochs, checkpoints) as Kafka does")
    print(f"producers (librdkafka {confluent_kafka.libversion()[0]}): full speed {a.producers} processes, librdkafka's "
          f"defaults (linger.ms 5, batch.size 1000000, max.in.flight 1000000, no idempotence); fixed rate 1 "
          f"producer, linger.ms 0, max.in.flight 5 and socket.nagle.disable true (as the Java producer connects), the "
          f"bench's and the plain one alike; unbounded: librdkafka's defaults but linger.ms 0 (max.in.flight 1000000); one at a time: "
          f"linger.ms 0, max.in.flight 1, each send after the previous ack")
    if "kafka" in results:
        k = results["kafka"]
        print(f"kafka {k['version']}, profile {k['profile']}: JVM {' '.join(k['jvm'])}")
        print("  server.properties differing from Kafka's defaults:")
        for key, v in k["differences"].items():
            print(f"    {key}={v}")
    if "reference" in results:
        print(f"reference: one Python process per node, settings {results['reference']['settings']}; "
              f"core errors logged per node: {results['reference']['node_errors']}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=["reference", "kafka", "both"], default="both")
    ap.add_argument("--kafka-version", default="4.4.0")
    ap.add_argument("--kafka-profile", choices=["users", "harness"], default="users",
                    help="Kafka as its users start it (default), or as the harness's runs do")
    ap.add_argument("--kafka-heap", default="1G", help="users profile: each JVM's -Xmx/-Xms (Kafka's default 1G)")
    ap.add_argument("--messages", type=int, default=1_000_000, help="per full-speed phase")
    ap.add_argument("--producers", type=int, default=3, help="producer processes at full speed")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--warmup-seconds", type=float, default=30.0)
    ap.add_argument("--rates", default="100,1000", help="fixed rates in msg/s, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="rounds of each full-speed phase (medians printed)")
    ap.add_argument("--rate-seconds", type=float, default=10.0)
    ap.add_argument("--combined", action="store_true", help="3 combined broker+controller nodes")
    ap.add_argument("--phases", default="fixed,full",
                    help="after the warm-up: fixed (the fixed rates), full (full speed) or both, comma-separated")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        a.rates = [int(r) for r in a.rates.split(",")]
    except ValueError:
        raise UsageError(f"--rates must be integers separated by commas, not {a.rates!r}") from None
    if min(a.rates) < 1:
        raise UsageError("--rates must be at least 1 msg/s each")
    a.phases = a.phases.split(",")
    if not a.phases or not set(a.phases) <= {"fixed", "full"}:
        raise UsageError(f"--phases takes fixed, full or both, comma-separated, not {','.join(a.phases)!r}")
    for name in ("messages", "producers", "partitions", "size", "repeats"):
        if getattr(a, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if a.messages < a.producers or a.warmup_seconds <= 0 or a.rate_seconds <= 0:
        raise UsageError("--messages must be at least --producers, and the durations positive")
    return a


def terminated(signum: int, frame: Any) -> None:
    """SIGTERM (a timeout, a kill by pid) ends the bench as a harness error:
    the clusters' own sessions would outlive it otherwise, so the raise
    lets each ``finally`` take its cluster down."""
    raise HarnessError(f"terminated by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, terminated)
    try:
        a = parse_args(argv)
        results: dict = {"cluster": "3 combined nodes" if a.combined else "3 brokers + 3 controllers"}
        load0 = os.getloadavg()[0]
        for db, run in (("reference", bench_reference), ("kafka", bench_kafka)):
            if a.db in (db, "both"):
                results[db] = run(a)
                results[db]["self_check"] = self_check(results[db], a)
        results["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    except (KraftwerkError, ClusterError, KafkaException) as e:
        print(f"broker_throughput: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return getattr(e, "exit_code", EXIT_HARNESS)
    if a.db == "both":
        results["ratio reference/kafka"] = ratios(results["reference"], results["kafka"], a)
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    print_settings(results, a)
    for db in ("reference", "kafka"):
        if db in results:
            print_db(db if db == "reference" else f"kafka {results['kafka']['version']}", results[db], a)
    if a.db == "both":
        print(f"ratios reference/kafka (msg/s: <1 = reference slower; latency: >1 = reference slower), "
              f"Kafka profile {a.kafka_profile}:")
        for k, v in results["ratio reference/kafka"].items():
            print(f"  {k:22s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
