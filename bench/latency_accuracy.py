"""How close the kernel backends' latency is to what was asked, and what it
costs: the NFQUEUE delayer (harness/runtimes/net/latency.py) on a netns
fabric of two nodes, a and b, plus the clients' end in the root namespace
(``--backend docker``: two containers, the clients' end on the host).

Made as a run makes it (NetnsHosts, IptablesNetwork, Delayers, a RunState
so every process is leased); an echo and a sink server run in b. For each
case, a probe (in a's namespace for node links, here for client links)
opens a TCP connection (its connect time is one round trip) and times
``--count`` request/response round trips of 64 bytes (TCP_NODELAY); the
added delay is each round trip minus the same link's median without
latency. Then a bulk case: ``--conns`` connections from a send to b's sink
for ``--seconds`` with 20 ms asked both ways, reporting the rate, the
packets the kernel queued (its own counter), drops and the delayer's CPU.

    flock /tmp/kw-heavy.lock .venv/bin/python bench/latency_accuracy.py [--count 300] [--backend docker]

Exit 1 if asked 100 ms one way, the added round trip's p50 is off by more
than 10%. Needs root (namespaces, iptables; the Docker engine for docker,
whose run skips the bulk case).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.rundir.state import RunState  # noqa: E402
from harness.runtimes.net.iptables import CLIENT, IptablesNetwork  # noqa: E402
from harness.runtimes.net.latency import Delayers  # noqa: E402
from harness.runtimes import docker as kwdocker  # noqa: E402
from harness.runtimes.netns import NetnsHosts  # noqa: E402

ECHO, SINK = 7000, 7001


# ---------------------------------------------------------------- in a namespace
def serve() -> None:
    """b's servers: echo on ECHO, discard on SINK; until killed."""
    def handle(conn: socket.socket, echo: bool) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while data := conn.recv(1 << 16):
                if echo:
                    conn.sendall(data)

    def listen(port: int, echo: bool) -> None:
        s = socket.create_server(("0.0.0.0", port), backlog=64)
        while True:
            c, _ = s.accept()
            threading.Thread(target=handle, args=(c, echo), daemon=True).start()

    threading.Thread(target=listen, args=(SINK, False), daemon=True).start()
    listen(ECHO, True)


def probe_rtt(host: str, count: int) -> dict[str, Any]:
    t = time.perf_counter()
    s = socket.create_connection((host, ECHO), timeout=30)
    connect_ms = (time.perf_counter() - t) * 1000
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg, rtts = b"x" * 64, []
    for _ in range(count):
        t = time.perf_counter()
        s.sendall(msg)
        got = 0
        while got < len(msg):
            got += len(s.recv(len(msg) - got))
        rtts.append((time.perf_counter() - t) * 1000)
    s.close()
    return {"connect_ms": connect_ms, "rtts": rtts}


def probe_bulk(host: str, seconds: float, conns: int) -> dict[str, Any]:
    sent = [0] * conns
    end = time.monotonic() + seconds

    def one(i: int) -> None:
        s = socket.create_connection((host, SINK), timeout=30)
        chunk = b"y" * 16384
        while time.monotonic() < end:
            s.sendall(chunk)
            sent[i] += len(chunk)
        s.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return {"bytes": sum(sent), "seconds": seconds}


# ---------------------------------------------------------------- the harness side
def in_ns(hosts: Any, node: str, args: list[str]) -> dict[str, Any]:
    """This script with ``args`` on the node's host (its namespace or container)."""
    rc, out, err = hosts.exec(node, [sys.executable, __file__, *args], 600.0)
    if rc != 0:
        raise RuntimeError(f"probe in {node}: {err.strip()[-300:]}")
    return json.loads(out)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rtt_case(hosts: Any, client_side: bool, count: int) -> dict[str, Any]:
    b = hosts.address("n2")
    if client_side:
        return probe_rtt(b, count)
    return in_ns(hosts, "n1", ["--probe-rtt", b, "--count", str(count)])


def report(name: str, asked: str, r: dict[str, Any], base: float, want: float | None) -> float:
    added = [x - base for x in r["rtts"]]
    p50 = statistics.median(added)
    off = f"  off by {100 * (p50 - want) / want:+.1f}%" if want else ""
    print(f"{name:<28} asked {asked:<16} added rtt p50 {p50:7.2f}  p99 {pct(added, 0.99):7.2f}  "
          f"min {min(added):7.2f}  max {max(added):7.2f}  connect {r['connect_ms']:7.2f} ms{off}")
    return p50


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=300, help="round trips per case")
    ap.add_argument("--seconds", type=float, default=5.0, help="bulk case's length")
    ap.add_argument("--conns", type=int, default=8, help="bulk case's connections")
    ap.add_argument("--backend", choices=("netns", "docker"), default="netns", help="where the two nodes run")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--probe-rtt", metavar="HOST", help=argparse.SUPPRESS)
    ap.add_argument("--probe-bulk", metavar="HOST", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve()
        return 0
    if args.probe_rtt:
        print(json.dumps(probe_rtt(args.probe_rtt, args.count)))
        return 0
    if args.probe_bulk:
        print(json.dumps(probe_bulk(args.probe_bulk, args.seconds, args.conns)))
        return 0
    return run(args)


def run(args: argparse.Namespace) -> int:
    out = Path(tempfile.mkdtemp(prefix="kw-latency-bench-"))
    state = RunState.create(out, "latency-bench", out)
    ok, hosts = True, None
    try:
        if args.backend == "docker":
            hosts = kwdocker.DockerHosts.create(["n1", "n2"], state, out, client=kwdocker.engine())
        else:
            hosts = NetnsHosts.create(["n1", "n2"], state, out)
        addresses = {n: hosts.address(n) for n in ("n1", "n2")}
        net = IptablesNetwork(["n1", "n2"], addresses, hosts.client_address,
                              lambda n, argv, stdin: hosts.exec(n, list(argv), 30.0, stdin=stdin),
                              delayers=Delayers(hosts))
        net.setup()
        hosts.start_helper("n2", [sys.executable, __file__, "--serve"], f"{hosts.node_dir('n2')}/serve.log")
        time.sleep(0.5)
        print(f"{args.backend}: a={addresses['n1']} b={addresses['n2']} clients={hosts.client_address}; "
              f"{args.count} round trips of 64 B per case (ms)")
        base_node = statistics.median(rtt_case(hosts, False, args.count)["rtts"])
        base_client = statistics.median(rtt_case(hosts, True, args.count)["rtts"])
        print(f"{'baseline':<28} node link rtt p50 {base_node:.3f}, client link rtt p50 {base_client:.3f}")
        cases = [
            ("n1->n2", [("n1", "n2")], 100, 0, False, base_node, 100),
            ("n1->n2", [("n1", "n2")], 20, 5, False, base_node, 20),
            ("n1->n2 and n2->n1", [("n1", "n2"), ("n2", "n1")], 100, 0, False, base_node, 200),
            ("client->n2", [(CLIENT, "n2")], 100, 0, True, base_client, 100),
            ("n2->client", [("n2", CLIENT)], 50, 10, True, base_client, 50),
        ]
        for name, links, ms, jitter, client_side, base, want in cases:
            net.set_latency(links, ms, jitter)
            p50 = report(name, f"{ms} ± {jitter} ms", rtt_case(hosts, client_side, args.count), base, want)
            net.heal()
            if name == "n1->n2" and ms == 100 and abs(p50 - want) > 0.1 * want:
                ok = False
        healed = statistics.median(rtt_case(hosts, False, args.count)["rtts"])
        print(f"{'after heal':<28} node link rtt p50 {healed:.3f}")
        if args.backend == "netns":
            ok &= bulk(hosts, net, args)
    finally:
        if hosts is not None:
            hosts.teardown()
        state.remove()
    return 0 if ok else 1


def bulk(hosts: NetnsHosts, net: IptablesNetwork, args: argparse.Namespace) -> bool:
    delayers = net.delayers
    base = in_ns(hosts, "n1", ["--probe-bulk", hosts.address("n2"), "--seconds", str(args.seconds),
                              "--conns", str(args.conns)])
    net.set_latency([("n1", "n2"), ("n2", "n1")], 20, 0)
    pid_b = next(p.pid for p in hosts.helpers
                 if hosts.fabric.ns("n2") in p.args and "harness.netdelay.delayer" in p.args)
    before = {n: delayers.stats(n) for n in ("n1", "n2")}
    cpu0 = cpu_s(pid_b)
    r = in_ns(hosts, "n1", ["--probe-bulk", hosts.address("n2"), "--seconds", str(args.seconds),
                           "--conns", str(args.conns)])
    cpu1 = cpu_s(pid_b)
    after = {n: delayers.stats(n) for n in ("n1", "n2")}
    net.heal()
    mb = r["bytes"] / r["seconds"] / 1e6
    pkts = {n: after[n].total - before[n].total for n in ("n1", "n2")}
    drops = {n: (after[n].dropped - before[n].dropped) + (after[n].user_dropped - before[n].user_dropped)
             for n in ("n1", "n2")}
    print(f"bulk, {args.conns} conns n1->n2, {args.seconds:.0f} s: no latency {base['bytes'] / base['seconds'] / 1e6:.1f} MB/s; "
          f"20 ms both ways {mb:.1f} MB/s, queued {pkts['n2'] / r['seconds']:.0f} packets/s at n2 and "
          f"{pkts['n1'] / r['seconds']:.0f}/s at n1, dropped {drops['n1'] + drops['n2']}, "
          f"n2's delayer CPU {100 * (cpu1 - cpu0) / r['seconds']:.0f}%")
    return drops["n1"] + drops["n2"] == 0


if __name__ == "__main__":
    raise SystemExit(main())
