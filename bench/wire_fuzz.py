"""Fuzz a running reference cluster with malformed Kafka frames.

Starts a local cluster, creates a topic, then for ``--duration`` seconds (or
until the nodes have handled ``--frames`` frames) sends mutated frames over fresh and
reused connections: flipped bytes, cut frames, lying length prefixes
(negative, huge, short), unknown API keys and versions, produce requests with
corrupt record batches; ``--burst`` frames go back to back before anything is
read. Alongside, the frame layer is attacked: slow partial frames (a size,
then a byte a second), oversized frames, and connection floods past
max.connections. Every few seconds it checks that every node process is alive
and still answers ApiVersions; at the end a real producer and consumer must
still work. Prints the frames sent and the frames the nodes handled (their
own counters) and the verdict; exit 1 if any node crashed or stopped
answering.

    .venv/bin/python bench/wire_fuzz.py --duration 300
    .venv/bin/python bench/wire_fuzz.py --frames 1000000 --burst 20 --duration 3600
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest  # noqa: E402
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest  # noqa: E402
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest  # noqa: E402
from kafka.record import MemoryRecordsBuilder  # noqa: E402

from reference_impl.server.launcher import LocalCluster  # noqa: E402
from reference_impl.server.procs import alive  # noqa: E402


def batch(rng: random.Random) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for _ in range(rng.randint(1, 5)):
        b.append(timestamp=None, key=None, value=rng.randbytes(rng.randint(0, 50)), headers=[])
    b.close()
    return bytes(b.buffer())


def seeds(rng: random.Random) -> list[bytes]:
    P = ProduceRequest[9]
    F = FetchRequest[12]
    L = ListOffsetsRequest[7]
    reqs = [
        ApiVersionsRequest[3](client_software_name="fuzz", client_software_version="1"),
        ApiVersionsRequest[0](),
        MetadataRequest[12](topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        MetadataRequest[1](topics=[MetadataRequest[1].MetadataRequestTopic(name="fuzz")]),
        P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="fuzz", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=batch(rng))])]),
        F(replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1 << 16, isolation_level=0, session_id=0, session_epoch=-1,
          topics=[F.FetchTopic(topic="fuzz", partitions=[F.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                  fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 16)])],
          forgotten_topics_data=[], rack_id=""),
        L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name="fuzz", partitions=[
            L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]),
        InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1000, producer_id=-1, producer_epoch=-1),
    ]
    out = []
    for r in reqs:
        r.with_header(correlation_id=rng.randint(0, 1 << 30), client_id="fuzz")
        out.append(bytes(r.encode(header=True)))
    return out


def mutate(rng: random.Random, body: bytes) -> bytes:
    """One framed, probably malformed request."""
    b = bytearray(body)
    kind = rng.random()
    if kind < 0.08:  # unknown api key / version
        struct.pack_into(">hh", b, 0, rng.choice([rng.randint(-10, 100), 999, -1]), rng.randint(-5, 30))
    elif kind < 0.2:  # corrupt a record batch somewhere after the header
        if len(b) > 70:
            i = rng.randint(len(b) - 40, len(b) - 1)
            b[i] ^= 0xFF
    else:
        for _ in range(rng.randint(1, 8)):
            if not b:
                break
            i = rng.randrange(len(b))
            op = rng.random()
            if op < 0.5:
                b[i] ^= rng.randint(1, 255)
            elif op < 0.65:
                del b[i:]
            elif op < 0.8:
                b[i:i] = rng.randbytes(rng.randint(1, 16))
            else:
                b[i : i + 4] = struct.pack(">i", rng.choice([-1, -(2**31), 2**31 - 1, 0x7FFF, 1 << 24, 0]))
    size = len(b)
    r = rng.random()
    if r < 0.05:
        size = rng.choice([-1, -(2**31), 0, 3, 2**31 - 1, 200 * 1024 * 1024])
    elif r < 0.1:
        size = max(0, size + rng.randint(-10, 10))
    return struct.pack(">i", size) + bytes(b)


def api_versions_ok(port: int) -> bool:
    req = ApiVersionsRequest[0]()
    req.with_header(correlation_id=1, client_id="probe")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            s.sendall(req.encode(header=True, framed=True))
            head = s.recv(4)
            return len(head) == 4 and struct.unpack(">i", head)[0] > 0
    except OSError:
        return False


class FrameLayer(threading.Thread):
    """Slow partial frames, oversized frames and connection floods, until stopped."""

    def __init__(self, ports: list[int], rng: random.Random, flood: int) -> None:
        super().__init__(daemon=True)
        self.ports, self.rng, self.flood = ports, rng, flood
        self.stop = threading.Event()
        self.counts = {"slow": 0, "oversized": 0, "flood_sockets": 0}

    def run(self) -> None:
        slow: list[socket.socket] = []
        while not self.stop.wait(1.0):
            for s in list(slow):  # a byte a second of a frame that never completes
                try:
                    s.send(b"\0")
                except OSError:
                    slow.remove(s)
                    s.close()
            if len(slow) < 20:
                s = self._open()
                if s is not None:
                    s.send(struct.pack(">i", self.rng.randint(100, 1 << 20)))
                    slow.append(s)
                    self.counts["slow"] += 1
            s = self._open()
            if s is not None:  # oversized: past socket.request.max.bytes
                try:
                    s.send(struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 64)
                except OSError:
                    pass
                s.close()
                self.counts["oversized"] += 1
            if self.rng.random() < 0.1:  # a flood past max.connections, then let go
                flood = [x for x in (self._open() for _ in range(self.flood)) if x is not None]
                self.counts["flood_sockets"] += len(flood)
                time.sleep(0.5)
                for x in flood:
                    x.close()
        for s in slow:
            s.close()

    def _open(self) -> socket.socket | None:
        try:
            return socket.create_connection(("127.0.0.1", self.rng.choice(self.ports)), timeout=2)
        except OSError:
            return None


def handled_frames(c: LocalCluster) -> int:
    """Frames the nodes themselves counted: answered requests of every API, bad
    frames, unsupported versions."""
    total = 0
    for n in c.nodes:
        try:
            cnt = c.control(n.node_id, "GET", "/status")["counters"]
        except Exception:
            continue
        total += sum(v for k, v in cnt.items() if k.startswith("api") or k in ("bad_frames", "unsupported_version"))
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--frames", type=int, default=0,
                    help="stop once the nodes have handled this many frames (checked every 5 s; 0: no limit)")
    ap.add_argument("--burst", type=int, default=1, help="frames sent back to back before reading")
    ap.add_argument("--valid-lead", action="store_true",
                    help="a burst is valid requests ending in one hostile frame (the nodes handle every frame "
                         "up to it, so far more frames reach them per connection)")
    ap.add_argument("--flood", type=int, default=1100, help="sockets per connection flood")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--base-port", type=int, default=19400)
    ap.add_argument("--separate", action="store_true", help="3 brokers + 3 controllers instead of 3 combined nodes")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    d = a.dir or tempfile.mkdtemp(prefix="kw-fuzz-")
    c = LocalCluster.plan(d, 3, 3, a.base_port, combined=not a.separate)
    frames = closed_by_server = handled = 0
    layer: FrameLayer | None = None
    start = time.monotonic()
    crashed: list[int] = []
    try:
        c.up(90)
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": c.bootstrap})  # keep the handle alive until the futures resolve
        for f in admin.create_topics([NewTopic("fuzz", 1, 3)]).values():
            f.result(60)
        ports = [n.port for n in c.brokers]
        base = seeds(rng)
        layer = FrameLayer(ports, random.Random(a.seed + 1), a.flood)
        layer.start()
        start = time.monotonic()
        next_check = start + 5
        sock: socket.socket | None = None
        while time.monotonic() - start < a.duration and not (a.frames and handled >= a.frames):
            if sock is None or rng.random() < 0.2:
                if sock is not None:
                    sock.close()
                sock = socket.create_connection(("127.0.0.1", rng.choice(ports)), timeout=2)
                sock.settimeout(0.05)
            try:
                def hostile() -> bytes:
                    return mutate(rng, rng.choice(base)) if rng.random() < 0.95 else rng.randbytes(rng.randint(1, 64))

                lead = [struct.pack(">i", len(f)) + f for f in (rng.choice(base) for _ in range(a.burst - 1))] \
                    if a.valid_lead else [hostile() for _ in range(a.burst - 1)]
                sock.sendall(b"".join(lead) + hostile())
                frames += a.burst
                try:
                    if sock.recv(65536) == b"":
                        closed_by_server += 1
                        sock.close()
                        sock = None
                except socket.timeout:
                    pass
            except OSError:
                closed_by_server += 1
                sock.close()
                sock = None
            if time.monotonic() > next_check:
                next_check = time.monotonic() + 5
                for n in c.nodes:
                    if not alive(n.pid) and n.node_id not in crashed:
                        crashed.append(n.node_id)
                for p in ports:
                    if not api_versions_ok(p):
                        print(f"broker on port {p} did not answer ApiVersions", flush=True)
                        crashed.append(p)
                handled = handled_frames(c)
                print(f"{time.monotonic() - start:6.0f}s frames sent={frames} handled={handled} "
                      f"closed_by_server={closed_by_server}", flush=True)
        if sock is not None:
            sock.close()
        layer.stop.set()
        layer.join(10)
        handled = handled_frames(c)
        # a real client still works afterwards
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        res: list = []
        for i in range(100):
            p.produce("fuzz", b"after-%d" % i, partition=0, on_delivery=lambda e, m: res.append(e))
        p.flush(60)
        ok_after = len(res) == 100 and all(e is None for e in res)
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g", "enable.auto.commit": False})
        cons.assign([TopicPartition("fuzz", 0, 0)])
        seen = 0
        t = time.monotonic()
        while time.monotonic() - t < 20:
            for msg in cons.consume(1000, 1):
                if not msg.error() and msg.value().startswith(b"after-"):
                    seen += 1
            if seen >= 100:
                break
        cons.close()
        errors = {n.node_id: c.control(n.node_id, "GET", "/status")["errors"] for n in c.nodes}
        counters = {n.node_id: c.control(n.node_id, "GET", "/status")["counters"].get("bad_frames", 0) for n in c.nodes}
    finally:
        c.down(40)
        if a.dir is None:
            shutil.rmtree(d, ignore_errors=True)
    elapsed = time.monotonic() - start
    print(f"frames sent: {frames} in {elapsed:.0f}s (seed {a.seed}); frames the nodes handled: {handled}; "
          f"connections closed by the server: {closed_by_server}")
    if layer is not None:
        print(f"frame layer: slow partial frames {layer.counts['slow']}, oversized {layer.counts['oversized']}, "
              f"flood sockets {layer.counts['flood_sockets']}")
    print(f"bad frames counted by nodes: {counters}; core errors logged: {errors}")
    print(f"nodes crashed or unresponsive: {crashed or 'none'}; produce+consume afterwards: "
          f"{'ok' if ok_after and seen >= 100 else f'FAILED (acked {sum(e is None for e in res)}/100, read {seen})'}")
    return 0 if not crashed and ok_after and seen >= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
