"""Added latency on a kernel backend (netns, docker, ssh): NFQUEUE and a delayer.

How a link ``a -> b`` is delayed by ``ms ± jitter``: on the host that sees
its packets (``b``'s INPUT for a node, ``a``'s OUTPUT towards the clients:
the same place :mod:`harness.runtimes.net.iptables` drops them), two rules
in our chain::

    -A kw-in -s ADDR(a) -j MARK --set-mark MARK(ms, jitter)
    -A kw-in -s ADDR(a) -j NFQUEUE --queue-num 7029 --queue-bypass

and one process on that host (:mod:`harness.netdelay.delayer`) bound to
queue 7029 holds each packet for the delay its mark names, FIFO per flow,
then accepts it. The delay travels in the packet, so the rules are the
whole state: a latency change is the same single ``iptables-restore`` as a
partition, atomic with it, and the delayer needs no configuration and no
control channel. Heal = the rules gone; the delayer idles until the run
ends. A node-to-node round trip through two delayed links adds both links'
delays, as on the local backend's per-link proxies.

Why this mechanism (measured on this machine's kernel 6.18 without
loadable modules; ``bench/latency_accuracy.py``):

* ``tc qdisc netem`` does not exist here, nor any qdisc that holds packets
  for a time: the kernel has htb, tbf, ingress/clsact and the fifos only
  (no fq or etf, so no earliest-departure-time delay set by a BPF classifier
  either, and ifb + mirred only redirect). tbf and htb shape a rate; they
  delay a packet only as a function of the traffic before it.
* A TCP relay inside each namespace (the local backend's proxies) cannot
  delay a real Kafka's links one by one: every broker advertises one
  address that every peer dials, and a relay would have to intercept
  (REDIRECT/TPROXY) and re-originate each connection, changing the
  addresses Kafka sees and adding a user-space hop to every byte.
* NFQUEUE holds the real packets in the kernel, so addresses, ports, TCP
  state and the order within a flow are untouched; only the verdict waits.
  The delayer speaks nfnetlink_queue directly from the standard library
  (:mod:`harness.netdelay.nfqueue`): no C library and no compiled
  package, so it runs unchanged in a namespace, in a container using the
  host's ``/usr``, and on an ssh host that has only the project's wheel.
  With the ``NetfilterQueue`` package instead, every ssh host would need
  ``libnetfilter-queue1`` and a compiled wheel of its own.

Limits: ms and jitter are whole milliseconds, each at most 65,535 (a link
slower than a minute is a partition, not a latency); the packet's mark
carries the delay (the delayer resets it to 0), so a host whose own rules
use marks on cluster traffic (ssh hosts) sees those overwritten while a
latency is in force; an accepted packet leaves our chain, so it skips the
host's own filter rules after our jump (none exist on netns and docker
hosts).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from harness.errors import HarnessError
from harness.netdelay.mark import QUEUE, encode_mark

#: where the kernel lists the queues bound in a namespace, one line each
QUEUES_FILE = "/proc/net/netfilter/nfnetlink_queue"
#: how long a delayer has to bind its queue once started
START_TIMEOUT_S = 15.0

Link = tuple[str, str]


def delay_rules(chain: str, match: list[str], ms: float, jitter_ms: float) -> list[list[str]]:
    """The two ``-A`` rules that send matched packets to the delayer."""
    mark = encode_mark(ms, jitter_ms)
    if mark == 0:
        return []
    return [["-A", chain, *match, "-j", "MARK", "--set-mark", f"0x{mark:08x}"],
            ["-A", chain, *match, "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"]]


def delayed_hosts(delays: Mapping[Link, tuple[float, float]], client: str) -> list[str]:
    """The nodes whose hosts hold a rule for these delays (a link into a
    node is delayed there, a link to the clients at its source)."""
    out = {b if b != client else a for (a, b), (ms, j) in delays.items() if ms > 0 or j > 0}
    return sorted(out)


def set_delays(delays: Mapping[Link, tuple[float, float]], links: Iterable[Link], ms: float,
               jitter_ms: float) -> dict[Link, tuple[float, float]]:
    """``delays`` with ``links`` set to ``ms ± jitter_ms`` (0 and 0: removed)."""
    encode_mark(ms, jitter_ms)  # out of range: refused before anything changes
    out = dict(delays)
    for link in links:
        if ms > 0 or jitter_ms > 0:
            out[link] = (float(ms), float(jitter_ms))
        else:
            out.pop(link, None)
    return out


@dataclass(frozen=True)
class QueueStats:
    """One line of ``/proc/net/netfilter/nfnetlink_queue``: the kernel's own
    count of a queue's packets (``queued``: held now; ``dropped``: the queue
    was full; ``user_dropped``: the delayer's socket buffer was; ``total``:
    every packet ever queued)."""

    queue: int
    queued: int
    dropped: int
    user_dropped: int
    total: int


def parse_queues(text: str) -> dict[int, QueueStats]:
    """The queues bound in a namespace, from the kernel's file."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and all(x.isdigit() for x in f[:8]):
            q = int(f[0])
            out[q] = QueueStats(q, int(f[2]), int(f[5]), int(f[6]), int(f[7]))
    return out


def delayer_argv(python: str, queue: int = QUEUE) -> list[str]:
    return [python, "-m", "harness.netdelay.delayer", "--queue", str(queue)]


class Delayers:
    """The delayer of every node host that holds a delayed link, started on
    first use through the backend's ``start_helper`` (leased and registered
    like the node's own daemon, ended with the hosts) and checked, on every
    latency change, to still hold its queue: one that died is started again.
    ``hosts`` is the backend's ``Remote``."""

    def __init__(self, hosts: Any, timeout: float = START_TIMEOUT_S) -> None:
        self.hosts = hosts
        self.timeout = timeout

    def stats(self, node: str) -> QueueStats | None:
        rc, out, _ = self.hosts.exec(node, ["cat", QUEUES_FILE], 10.0)
        return parse_queues(out).get(QUEUE) if rc == 0 else None

    def ensure(self, nodes: Iterable[str]) -> None:
        nodes = list(nodes)
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
            for f in [pool.submit(self._ensure_one, n) for n in nodes]:
                f.result()

    def _ensure_one(self, node: str) -> None:
        if self.stats(node) is not None:
            return
        d = self.hosts.node_dir(node)
        self.hosts.exec(node, ["mkdir", "-p", d], 10.0)
        log = f"{d}/delayer.log"
        self.hosts.start_helper(node, delayer_argv(self.hosts.kraftwerk_argv(node)[0]), log)
        deadline = time.monotonic() + self.timeout
        while self.stats(node) is None:
            if time.monotonic() > deadline:
                _, out, _ = self.hosts.exec(node, ["tail", "-n", "1", log], 10.0)
                raise HarnessError(f"{node}: the packet delayer did not bind queue {QUEUE} in "
                                   f"{self.timeout:.0f}s: {out.strip()[:300] or '(empty log)'}")
            time.sleep(0.05)
