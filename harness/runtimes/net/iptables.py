"""Partitions and packet loss as iptables rules on each node's host.

A grudge is a set of directed links ``(a, b)``: packets from a to b are
dropped (Jepsen's ``net/drop!``). Each rule lives on the host that can see
the packet: a link into node b is matched in b's ``kw-in`` chain by its
source address; a link from node a to the clients (``"client"``, whose
address is where the harness's connections come from) in a's ``kw-out``
chain by destination. So every link, node to node and client to node, is cut
the same way, by the kernel, and a one-way grudge stalls TCP both ways as it
would on a real network (the ACKs cannot come back).

Two chains of our own, ``kw-in`` (jumped to from INPUT) and ``kw-out`` (from
OUTPUT), hold every rule: one ``iptables-restore --noflush`` per host
replaces them whole, so applying a grudge is one command per host and a heal
is the empty grudge. Nothing else on the host is touched (on a VM the
operator's own rules stay), and teardown removes the jumps and the chains.

Options:

* ``mode="reject"``: TCP to a cut link is refused with a TCP reset (the
  peer sees ECONNRESET/ECONNREFUSED within milliseconds instead of timing
  out); other protocols are still dropped.
* loss: ``-m statistic --mode random --probability p`` drops that share of
  the link's packets.
* ``exempt_ports``: traffic between the clients' address and these ports of
  a node is never cut (the harness's own control path: the broker's control
  endpoint, sshd), so a client partition cuts the Kafka clients only.

* latency: packets of a delayed link are marked with their delay and
  queued (``-j NFQUEUE``) to a delayer process on that host, which holds
  them FIFO per flow (:mod:`harness.runtimes.net.latency`: how and why);
  the delayers are started on first use by the ``delayers`` the backend
  hands over (without them, latency is refused).
"""

from __future__ import annotations

import ipaddress
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from harness.runtimes.net.latency import delay_rules, delayed_hosts, set_delays

from nemesis.control import CLIENT, Link

CHAIN_IN = "kw-in"
CHAIN_OUT = "kw-out"
MODES = ("drop", "reject")
#: exec(node, argv, stdin) -> (exit status, stdout, stderr) on the node's host
ExecFn = Callable[[str, Sequence[str], "str | None"], tuple[int, str, str]]


@dataclass(frozen=True)
class LinkFaults:
    """What the network should look like: a grudge, per-link loss and delay."""

    cut: frozenset[Link] = frozenset()
    loss: Mapping[Link, float] = field(default_factory=dict)
    delay: Mapping[Link, tuple[float, float]] = field(default_factory=dict)  # link -> (ms, jitter ms)


def _drop(match: list[str], mode: str) -> list[list[str]]:
    if mode == "reject":
        return [match + ["-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"], match + ["-j", "DROP"]]
    return [match + ["-j", "DROP"]]


def node_rules(node: str, faults: LinkFaults, addresses: Mapping[str, str], client_address: str,
               mode: str = "drop", exempt_ports: Sequence[int] = ()) -> list[list[str]]:
    """The ``-A`` rules of one node's chains, in order: pure, so a grudge's
    rules are tested by equality."""
    def addr(n: str) -> str:
        return client_address if n == CLIENT else addresses[n]

    rules: list[list[str]] = []
    if any(CLIENT in link for link in faults.cut | set(faults.loss) | set(faults.delay)):
        for port in exempt_ports:
            rules.append(["-A", CHAIN_IN, "-s", client_address, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT"])
            rules.append(["-A", CHAIN_OUT, "-d", client_address, "-p", "tcp", "--sport", str(port), "-j", "ACCEPT"])
    for a, b in sorted(faults.cut):
        if b == node:
            rules += _drop(["-A", CHAIN_IN, "-s", addr(a)], mode)
        elif a == node and b == CLIENT:
            rules += _drop(["-A", CHAIN_OUT, "-d", client_address], mode)
    for (a, b), p in sorted(faults.loss.items()):
        if p <= 0 or (a, b) in faults.cut:
            continue
        stat = ["-m", "statistic", "--mode", "random", "--probability", f"{min(p, 1.0):.4f}", "-j", "DROP"]
        if b == node:
            rules.append(["-A", CHAIN_IN, "-s", addr(a), *stat])
        elif a == node and b == CLIENT:
            rules.append(["-A", CHAIN_OUT, "-d", client_address, *stat])
    for (a, b), (ms, jitter) in sorted(faults.delay.items()):
        if (a, b) in faults.cut:
            continue
        if b == node:
            rules += delay_rules(CHAIN_IN, ["-s", addr(a)], ms, jitter)
        elif a == node and b == CLIENT:
            rules += delay_rules(CHAIN_OUT, ["-d", client_address], ms, jitter)
    return rules


def restore_text(rules: Iterable[list[str]]) -> str:
    """Input for ``iptables-restore --noflush``: our two chains, replaced whole."""
    lines = ["*filter", f":{CHAIN_IN} - [0:0]", f":{CHAIN_OUT} - [0:0]"]
    lines += [" ".join(r) for r in rules]
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def check_links(pairs: Iterable[Link], nodes: Iterable[str]) -> frozenset[Link]:
    known = set(nodes) | {CLIENT}
    out = set()
    for a, b in pairs:
        if a not in known or b not in known or a == b:
            raise ValueError(f"link {a}->{b}: not a link between two of {sorted(known)}")
        if a == CLIENT and b == CLIENT:
            raise ValueError("client->client is not a link")
        out.add((a, b))
    return frozenset(out)


class IptablesNetwork:
    """The ``Network`` of the cluster contract on hosts with a kernel of their own."""

    def __init__(self, nodes: Sequence[str], addresses: Mapping[str, str], client_address: str,
                 exec_fn: ExecFn, mode: str = "drop", exempt_ports: Sequence[int] = (),
                 delayers: Any = None) -> None:
        if mode not in MODES:
            raise ValueError(f"cut mode {mode!r} (known: {', '.join(MODES)})")
        for a in [*addresses.values(), client_address]:
            ipaddress.ip_address(a)  # rules take addresses only: nothing to quote
        self.nodes = list(nodes)
        self.addresses = dict(addresses)
        self.client_address = client_address
        self.exec_fn = exec_fn
        self.mode = mode
        self.exempt_ports = tuple(exempt_ports)
        #: starts the packet delayers on demand (``latency.Delayers``); None: no latency here
        self.delayers = delayers
        self.faults = LinkFaults()
        self._applied: dict[str, str] = {}

    def _run(self, node: str, argv: list[str], stdin: str | None = None) -> None:
        rc, out, err = self.exec_fn(node, argv, stdin)
        if rc != 0:
            msg = (err or out).strip().splitlines()
            raise RuntimeError(f"{node}: {' '.join(argv[:4])}: {msg[-1] if msg else f'exit {rc}'}")

    def _each(self, fn: Callable[[str], None]) -> None:
        """``fn`` on every host at once (a round trip each on ssh), errors raised."""
        with ThreadPoolExecutor(max_workers=min(16, len(self.nodes) or 1)) as pool:
            for f in [pool.submit(fn, n) for n in self.nodes]:
                f.result()

    def setup(self) -> None:
        """Create our chains and jump to them first from INPUT and OUTPUT."""
        def one(n: str) -> None:
            self._run(n, ["iptables-restore", "-w", "--noflush"], restore_text([]))
            for hook, chain in (("INPUT", CHAIN_IN), ("OUTPUT", CHAIN_OUT)):
                rc, _, _ = self.exec_fn(n, ["iptables", "-w", "-C", hook, "-j", chain], None)
                if rc != 0:
                    self._run(n, ["iptables", "-w", "-I", hook, "1", "-j", chain])
            self._applied[n] = restore_text([])
        self._each(one)

    def _apply(self, faults: LinkFaults) -> None:
        self.faults = faults

        def one(n: str) -> None:
            text = restore_text(node_rules(n, faults, self.addresses, self.client_address, self.mode, self.exempt_ports))
            if self._applied.get(n) != text:
                self._run(n, ["iptables-restore", "-w", "--noflush"], text)
                self._applied[n] = text
        self._each(one)

    # ------------------------------------------------------------ the contract
    def cut(self, pairs: Iterable[Link]) -> None:
        self._apply(LinkFaults(check_links(pairs, self.nodes), self.faults.loss, self.faults.delay))

    def set_loss(self, links: Iterable[Link], probability: float) -> None:
        loss = dict(self.faults.loss)
        for link in check_links(links, self.nodes):
            if probability > 0:
                loss[link] = probability
            else:
                loss.pop(link, None)
        self._apply(LinkFaults(self.faults.cut, loss, self.faults.delay))

    def set_latency(self, links: Iterable[Link], ms: float, jitter_ms: float) -> None:
        """Delay each of ``links`` by ``ms ± jitter_ms`` (0, 0: no delay):
        the delayers of the hosts that need one first, then the rules."""
        delay = set_delays(self.faults.delay, check_links(links, self.nodes), ms, jitter_ms)
        hosts = delayed_hosts(delay, CLIENT)
        if hosts:
            if self.delayers is None:
                raise NotImplementedError("added latency needs the backend's packet delayers; none were given")
            self.delayers.ensure(hosts)
        self._apply(LinkFaults(self.faults.cut, self.faults.loss, delay))

    def heal(self) -> None:
        self._apply(LinkFaults())

    def teardown(self) -> None:
        """Remove our jumps and chains (hosts that outlive the run: ssh)."""
        def one(n: str) -> None:
            for hook, chain in (("INPUT", CHAIN_IN), ("OUTPUT", CHAIN_OUT)):
                while self.exec_fn(n, ["iptables", "-w", "-D", hook, "-j", chain], None)[0] == 0:
                    pass
            for chain in (CHAIN_IN, CHAIN_OUT):
                self.exec_fn(n, ["iptables", "-w", "-F", chain], None)
                self.exec_fn(n, ["iptables", "-w", "-X", chain], None)
        self._each(one)
        self._applied.clear()
