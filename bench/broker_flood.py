"""Hostile load on a live 3-node reference cluster from the unprivileged user
``nobody``, while a real confluent-kafka producer keeps writing: prints each
node's peak RSS and how fast the producer's messages were acknowledged.

Phases, each bounded in count and time, on loopback only, every attacker a
process of its own run as nobody (setpriv) from loopback addresses of its own
(127.0.0.2 and up, ``--sources`` of them: distinct peers to the nodes):

* ``fuzz``: ``--frames`` Kafka frames to every broker, in bursts of valid
  requests closed by one hostile frame (bench/wire_fuzz.py's mutations:
  flipped bytes, cut frames, lying sizes, unknown APIs, corrupt batches), by
  ``--fuzzers`` processes;
* ``flood``: ``--connections`` sockets at ``--rate`` a second to the leader of
  the producer's partition (tests/server/hostile.py): silent, the bare peer
  magic, half a hello, half a request, half a size, idle valid requests, held
  ``--hold`` seconds;
* ``frames``: ``--big-frames`` connections each announcing a
  socket.request.max.bytes request and sending ``--big-fill`` MiB of it, to
  the same leader (a security review's 8 such took a node from 53 to 873 MB).

Throughout, a confluent-kafka producer on 127.0.0.1 sends one message every
100 ms (acks=all, replication factor 3) and every node's RSS is read every
100 ms. Exit 1 if a node died, a message was not acknowledged, an
acknowledgement took over 1 s, or a node passed 200 MB.

    flock /tmp/kw-heavy.lock .venv/bin/python bench/broker_flood.py
    flock /tmp/kw-heavy.lock .venv/bin/python bench/broker_flood.py --frames 100000 --connections 5000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka.protocol.metadata import ApiVersionsRequest  # noqa: E402
from wire_fuzz import handled_frames, mutate, seeds  # noqa: E402

from reference_impl.server.launcher import LocalCluster  # noqa: E402
from reference_impl.server.procs import alive as pid_alive  # noqa: E402
from reference_impl.server.procs import proc_status_kib  # noqa: E402
from reference_impl.server.rpc import MAGIC  # noqa: E402

HOSTILE = ROOT / "tests" / "server" / "hostile.py"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
MIB = 1024 * 1024
RSS_BOUND_KIB = 200 * 1024
TOPIC = "flood"


def as_nobody(argv: list[str]) -> subprocess.Popen:
    """``argv`` as the unprivileged user (already one if we are not root)."""
    full = NOBODY + argv if os.geteuid() == 0 else argv
    return subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")


def collect(procs: list[subprocess.Popen], timeout: float) -> list[dict]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"attacker failed: {stderr.strip()[-500:]}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


# -- the fuzz child (runs as nobody) ----------------------------------------------


def fuzz_child(spec: dict) -> dict:
    """Send ``frames`` frames in bursts (valid requests, then one hostile
    frame) over connections from ``sources`` to ``ports``, each burst after
    the answers to the last one came back (or the node closed the
    connection), so the frames are handled, not left in a socket buffer."""
    rng = random.Random(spec["seed"])
    base = seeds(rng)
    sent = closed = 0
    sock: socket.socket | None = None
    expected = got = 0
    buf = b""
    while sent < spec["frames"]:
        if sock is None:
            sock, expected, got, buf = socket.socket(), 0, 0, b""
            try:
                sock.bind((rng.choice(spec["sources"]), 0))
                sock.settimeout(2.0)
                sock.connect(("127.0.0.1", rng.choice(spec["ports"])))
            except OSError:
                sock.close()
                sock, closed = None, closed + 1
                continue
        burst = [struct.pack(">i", len(f)) + f for f in (rng.choice(base) for _ in range(spec["burst"] - 1))]
        hostile = mutate(rng, rng.choice(base)) if rng.random() < 0.95 else rng.randbytes(rng.randint(1, 64))
        try:
            sock.sendall(b"".join(burst) + hostile)
            sent += spec["burst"]
            expected += spec["burst"] - 1
            while got < expected:  # the valid requests' answers
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise ConnectionResetError
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                    buf = buf[4 + int.from_bytes(buf[:4], "big"):]
                    got += 1
        except OSError:  # closed by the node: the hostile frame did its work
            sock.close()
            sock, closed = None, closed + 1
            continue
        if rng.random() < 0.2:
            sock.close()
            sock = None
    if sock is not None:
        sock.close()
    return {"sent": sent, "closed_by_server": closed}


# -- the observer: the producer and the RSS sampler ---------------------------------


class Observer:
    """A producer sending every 100 ms and every node's RSS every 100 ms,
    both kept per phase."""

    def __init__(self, c: LocalCluster) -> None:
        self.c = c
        self.phase = "baseline"
        self.latencies: dict[str, list[float]] = {}
        self.failed: dict[str, int] = {}
        self.sent: dict[str, int] = {}
        self.rss: dict[str, dict[int, int]] = {}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._sample, daemon=True)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.c.bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0,
                      "message.timeout.ms": 30000})
        i = 0
        while not self.stop.is_set():
            phase, t0 = self.phase, time.monotonic()

            def done(err, msg, phase=phase, t0=t0):
                if err is None:
                    self.latencies.setdefault(phase, []).append(time.monotonic() - t0)
                else:
                    self.failed[phase] = self.failed.get(phase, 0) + 1

            p.produce(TOPIC, b"m%d" % i, partition=0, on_delivery=done)
            self.sent[phase] = self.sent.get(phase, 0) + 1
            i += 1
            end = t0 + 0.1
            while (left := end - time.monotonic()) > 0:
                p.poll(left)
        p.flush(40)

    def _sample(self) -> None:
        while not self.stop.wait(0.1):
            peaks = self.rss.setdefault(self.phase, {})
            for n in self.c.nodes:
                kib = proc_status_kib(n.pid)
                peaks[n.node_id] = max(peaks.get(n.node_id, 0), kib)


def counters(c: LocalCluster) -> dict[str, int]:
    total: dict[str, int] = {}
    for n in c.nodes:
        try:
            for k, v in c.control(n.node_id, "GET", "/status")["counters"].items():
                if not k.startswith("api") and not k[0].isupper():
                    total[k] = total.get(k, 0) + v
        except Exception:
            continue
    return total


def leader_port(c: LocalCluster) -> int:
    for n in c.nodes:
        st = c.control(n.node_id, "GET", "/status")
        if f"{TOPIC}-0" in st.get("leader_of", []):
            return n.port
    return c.nodes[0].port


# -- phases -------------------------------------------------------------------------


def run_fuzz(a: argparse.Namespace, c: LocalCluster, sources: list[str]) -> str:
    per = max(1, a.frames // a.fuzzers)
    procs = [as_nobody([sys.executable, __file__, "--fuzz-child", json.dumps(
        {"ports": [n.port for n in c.brokers], "sources": sources, "frames": per, "burst": 10, "seed": a.seed + i})])
        for i in range(a.fuzzers)]
    r = collect(procs, a.phase_timeout)
    return f"frames sent {sum(x['sent'] for x in r)}, connections the nodes closed {sum(x['closed_by_server'] for x in r)}"


def _api_versions() -> bytes:
    req = ApiVersionsRequest[0]()
    req.with_header(correlation_id=1, client_id="flood")
    return bytes(req.encode(header=True, framed=True))


def run_flood(a: argparse.Namespace, port: int, sources: list[str]) -> str:
    half = struct.pack(">i", 100) + b"\0" * 50
    kinds = [b"", MAGIC, MAGIC + half, half, struct.pack(">i", 100)[:2], _api_versions()]
    per = a.connections // len(kinds)
    procs = [as_nobody([sys.executable, str(HOSTILE), json.dumps(
        {"port": port, "sources": sources, "count": per, "send": k.hex(), "rate": a.rate / len(kinds),
         "watch": a.hold})]) for k in kinds]
    r = collect(procs, a.phase_timeout)
    return (f"connections opened {sum(x['connected'] for x in r)} to port {port}, refused or evicted at once "
            f"{sum(x['refused'] for x in r)}, held {sum(x['held'] for x in r)}, closed by the node while held "
            f"{sum(len(x['closed_at']) for x in r)}")


def run_frames(a: argparse.Namespace, port: int, sources: list[str]) -> str:
    head = struct.pack(">i", 100 * MIB)  # socket.request.max.bytes' default
    procs = [as_nobody([sys.executable, str(HOSTILE), json.dumps(
        {"port": port, "sources": [sources[i % len(sources)]], "count": 1, "send": head.hex(),
         "pad": a.big_fill * MIB, "watch": a.hold})]) for i in range(a.big_frames)]
    r = collect(procs, a.phase_timeout)
    return (f"{a.big_frames} connections sent {a.big_fill} MiB each of a 100 MiB request; "
            f"closed by the node {sum(len(x['closed_at']) + x['refused'] for x in r)}")


def report(obs: Observer, phase: str, what: str, before: dict[str, int], after: dict[str, int]) -> bool:
    lat = sorted(obs.latencies.get(phase, []))
    failed = obs.failed.get(phase, 0)
    slow = sum(x > 1.0 for x in lat)
    rss = obs.rss.get(phase, {})
    delta = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    p = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else (lambda q: float("nan"))
    print(f"[{phase}] {what}")
    print(f"  producer: sent {obs.sent.get(phase, 0)}, acked {len(lat)}, failed {failed}; ack latency ms "
          f"p50 {p(0.5):.0f} p99 {p(0.99):.0f} max {p(1.0):.0f}; over 1 s: {slow}")
    print(f"  peak RSS MB per node: {', '.join(f'{k}: {v / 1024:.0f}' for k, v in sorted(rss.items()))}")
    print(f"  node counters: {json.dumps(delta, sort_keys=True)}", flush=True)
    return failed == 0 and slow == 0 and all(v < RSS_BOUND_KIB for v in rss.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--fuzzers", type=int, default=4)
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=1000.0, help="flood connections a second")
    ap.add_argument("--hold", type=float, default=15.0, help="seconds the attackers hold what they opened")
    ap.add_argument("--big-frames", type=int, default=8)
    ap.add_argument("--big-fill", type=int, default=30, help="MiB each big frame sends")
    ap.add_argument("--sources", type=int, default=4, help="attacker loopback addresses 127.0.0.2..")
    ap.add_argument("--phase-timeout", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fuzz-child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.fuzz_child:
        print(json.dumps(fuzz_child(json.loads(a.fuzz_child))), flush=True)
        return 0
    sources = [f"127.0.0.{2 + i}" for i in range(a.sources)]
    d = tempfile.mkdtemp(prefix="kw-flood-")
    os.chmod(d, 0o755)
    c = LocalCluster.plan(d, 3, 3, 0, combined=True)
    ok = True
    try:
        c.up(90)
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        topics = [NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"}), NewTopic("fuzz", 1, 3)]
        for f in admin.create_topics(topics).values():  # "fuzz": what bench/wire_fuzz.py's requests name
            f.result(60)
        time.sleep(2)
        port = leader_port(c)
        obs = Observer(c)
        obs.start()
        phases = [("baseline", lambda: (time.sleep(5), "nothing hostile")[1]),
                  ("fuzz", lambda: run_fuzz(a, c, sources)),
                  ("flood", lambda: run_flood(a, port, sources)),
                  ("frames", lambda: run_frames(a, port, sources)),
                  ("after", lambda: (time.sleep(5), "nothing hostile")[1])]
        results = []
        for name, run in phases:
            before, handled0 = counters(c), handled_frames(c)
            obs.phase = name
            t0 = time.monotonic()
            what = run()
            what += f"; frames the nodes handled {handled_frames(c) - handled0} ({time.monotonic() - t0:.0f} s)"
            results.append((name, what, before, counters(c)))
            obs.phase = f"{name}-drain"  # acknowledgements of the phase's last messages land here
            time.sleep(1.5)
        obs.finish()
        for name, what, before, after in results:
            ok = report(obs, name, what, before, after) and ok
        dead = [n.node_id for n in c.nodes if not pid_alive(n.pid, n.start)]
        hwm = {n.node_id: proc_status_kib(n.pid, "VmHWM") // 1024 for n in c.nodes}
        drained = sum(len(v) for k, v in obs.latencies.items() if k.endswith("-drain"))
        slow_drain = sum(x > 1.0 for k, v in obs.latencies.items() if k.endswith("-drain") for x in v)
        print(f"acks landing between phases: {drained} (over 1 s: {slow_drain}); "
              f"failed: {sum(v for k, v in obs.failed.items() if k.endswith('-drain'))}")
        print(f"nodes dead: {dead or 'none'}; peak RSS over the whole run (VmHWM) MB: {hwm}")
        ok = ok and not dead and slow_drain == 0
    finally:
        c.down(40)
        shutil.rmtree(d, ignore_errors=True)
    print("verdict:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
