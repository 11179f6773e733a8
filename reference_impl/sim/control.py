"""The simulator's implementation of the cluster contract (``nemesis.control``
states it; a ``typing.Protocol`` is structural, so the simulator imports of
it only the clients' pseudo-node :data:`CLIENT`): node control, the network,
clocks and what the glass box observes, all in virtual time.

Nodes are named as on every runtime: brokers ``n<id>``, controllers
``c<id - 100>``; the pseudo-node ``"client"`` in a link stands for every
simulated client endpoint. A kill takes the node's process (its page cache
survives), a power loss its un-fsynced writes too, a terminate runs the
node's controlled shutdown; a clock strobe flips the offset on virtual-time
events until it ends or is reset.
"""

from __future__ import annotations

from typing import Any, Callable, Final, Iterable

from nemesis.control import CLIENT
from reference_impl.core.messages import TopicPartition
from reference_impl.core.storage import CLEAN_SHUTDOWN, CleanShutdown

from .clients import Admin
from .host import DOWN, PAUSED
from .network import LinkProfile
from .simulation import CONTROLLER_BASE, Simulation, node_name

#: a controlled shutdown that has not halted by then ends with a kill, as the
#: real server's grace period (reference_impl/server/runtime.py) ends it
SHUTDOWN_GRACE_MS: Final = 30_000

#: what a cut does (``--net-cut``): packets dropped, TCP retransmits; or TCP reset
NET_CUT_MODES: Final = ("drop", "reject")

#: what the simulator can make (the contract's Capability values)
CAPABILITIES: Final = frozenset({
    "kill", "terminate", "pause", "power-loss", "clock", "clock-strobe", "partition", "partition-clients",
    "latency", "loss", "reassign", "unregister",
})


def node_id(name: str) -> int:
    if name[:1] == "c":
        return CONTROLLER_BASE + int(name[1:])
    if name[:1] == "n":
        return int(name[1:])
    raise ValueError(f"not a simulated node: {name!r}")


class SimNodes:
    """The contract's NodeControl over the simulation's hosts."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self._admin: Admin | None = None
        #: nodes sent a SIGTERM that have not gone down since, and how the
        #: latest SIGTERM of each node that did ended (clean or not)
        self._stopping: set[str] = set()
        self._clean: dict[str, bool] = {}

    def reassign(self, key: str, replicas: list[str]) -> None:
        """AlterPartitionReassignments (KIP-455) from a simulated admin
        client: the reference controller moves the partition (new replicas
        catch up and join the ISR, then the others leave). The request is
        sent and the call returns, as the fault's start does not wait for
        the move on any runtime."""
        if self._admin is None:
            self._admin = Admin(self.sim, "reassign-admin")
        topic, _, part = key.rpartition("-")
        self._admin.reassign(TopicPartition(topic, int(part)), tuple(node_id(r) for r in replicas))

    def unregister(self, node: str) -> None:
        """UnregisterBroker (KIP-631) from the simulated admin client; sent,
        not awaited, as :meth:`reassign`."""
        if self._admin is None:
            self._admin = Admin(self.sim, "reassign-admin")
        self._admin.unregister(node_id(node))

    def node_names(self) -> list[str]:
        return [node_name(n) for n in self.sim.node_ids]

    def brokers(self) -> list[str]:
        return [node_name(n) for n in self.sim.broker_ids]

    def controllers(self) -> list[str]:
        return [node_name(n) for n in self.sim.controller_ids]

    def start(self, node: str) -> None:
        self._settle(node)  # before the start deletes the clean-shutdown marker
        self.sim.restart(node_id(node))

    def kill(self, node: str) -> None:
        self.sim.kill(node_id(node))

    def terminate(self, node: str) -> None:
        nid = node_id(node)
        host = self.sim.hosts[nid]
        if host.state == DOWN:
            return
        self.sim.resume(nid)
        incarnation = host.incarnation
        self._stopping.add(node)
        self._clean.pop(node, None)
        self.sim.shutdown(nid)
        self.sim.loop.after(SHUTDOWN_GRACE_MS, self._grace_over, nid, incarnation)

    def _settle(self, node: str) -> None:
        """A stopping node that is down ended its shutdown cleanly if its
        disk holds the clean-shutdown marker (written just before the Halt;
        the grace's kill comes before it). Read before any restart, as the
        restarted broker deletes the marker once it has read it."""
        if node in self._stopping and self.sim.hosts[node_id(node)].state == DOWN:
            self._stopping.discard(node)
            marker = self.sim.hosts[node_id(node)].disk.files_cache.get(CLEAN_SHUTDOWN)
            self._clean[node] = isinstance(marker, CleanShutdown)

    def last_shutdown_clean(self, node: str) -> bool | None:
        """The contract's ShutdownOutcomes: how the node's latest SIGTERM ended."""
        self._settle(node)
        return self._clean.get(node)

    def _grace_over(self, nid: int, incarnation: int) -> None:
        if self.sim.hosts[nid].incarnation == incarnation:
            self.sim.kill(nid)

    def pause(self, node: str) -> None:
        self.sim.pause(node_id(node))

    def resume(self, node: str) -> None:
        self.sim.resume(node_id(node))

    def power_loss(self, node: str) -> None:
        self.sim.power_loss(node_id(node))

    def dead_nodes(self) -> list[str]:
        return [node_name(n) for n, h in self.sim.hosts.items() if h.state == DOWN]

    def paused_nodes(self) -> list[str]:
        return [node_name(n) for n, h in self.sim.hosts.items() if h.state == PAUSED]


class SimNetwork:
    """The contract's Network over the simulated network's grudge and link
    profiles. Added latency and loss sit on top of the default profile."""

    def __init__(self, sim: Simulation, client_names: Callable[[], list[str]], mode: str = "drop") -> None:
        if mode not in NET_CUT_MODES:
            raise ValueError(f"unknown net cut mode {mode!r} (known: {', '.join(NET_CUT_MODES)})")
        self.sim = sim
        self.client_names = client_names
        self.extra_ms: dict[tuple[Any, Any], float] = {}
        self.loss: dict[tuple[Any, Any], float] = {}
        sim.net.reject = mode == "reject"

    def _endpoints(self, name: str) -> list[Any]:
        return list(self.client_names()) if name == CLIENT else [node_id(name)]

    def _pairs(self, links: Iterable[tuple[str, str]]) -> list[tuple[Any, Any]]:
        return [(a, b) for src, dst in links for a in self._endpoints(src) for b in self._endpoints(dst)]

    def cut(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Exactly these links are cut from now on; what a healed link held
        arrives at its next retransmission (``network.Network.set_cut``)."""
        self.sim.net.set_cut(self._pairs(pairs))

    def set_latency(self, links: Iterable[tuple[str, str]], ms: float, jitter_ms: float) -> None:
        for p in self._pairs(links):
            self.extra_ms[p] = ms
            self._profile(p, jitter_ms)

    def set_loss(self, links: Iterable[tuple[str, str]], probability: float) -> None:
        for p in self._pairs(links):
            self.loss[p] = probability
            self._profile(p, 0.0)

    def _profile(self, p: tuple[Any, Any], jitter_ms: float) -> None:
        base, net = self.sim.net.default, self.sim.net
        ms, loss = self.extra_ms.get(p, 0), self.loss.get(p, 0.0)
        if not ms and not loss:
            net.links.pop(p, None)
            return
        net.links[p] = LinkProfile(base.min_ms + int(ms), base.jitter_ms + jitter_ms, loss)


class SimClock:
    """The contract's Clock over each host's clock offset."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.strobes: dict[int, int] = {}  # node -> token of its running strobe

    def set_offset(self, node: str, ms: int) -> None:
        self.sim.set_clock(node_id(node), ms)

    def reset(self, node: str) -> None:
        nid = node_id(node)
        self.strobes[nid] = self.strobes.get(nid, 0) + 1
        self.sim.set_clock(nid, 0)

    def strobe(self, node: str, delta_ms: int, period_ms: int, duration_ms: int) -> None:
        nid = node_id(node)
        token = self.strobes[nid] = self.strobes.get(nid, 0) + 1
        self._flip(nid, token, delta_ms, period_ms, self.sim.now + duration_ms, True)

    def _flip(self, nid: int, token: int, delta: int, period: int, end: int, on: bool) -> None:
        if self.strobes.get(nid) != token:
            return
        if self.sim.now >= end:
            self.sim.set_clock(nid, 0)
            return
        self.sim.set_clock(nid, delta if on else 0)
        self.sim.loop.after(period, self._flip, nid, token, delta, period, end, not on)


class SimObserver:
    """The contract's Observer over the glass box: what the nodes' traces
    said about leaders, the controller and partition metadata."""

    def __init__(self, sim: Simulation, keys: list[str]) -> None:
        self.sim = sim
        self._keys = keys

    def keys(self) -> list[str]:
        return list(self._keys)

    def leader_of(self, key: str) -> str | None:
        """The leader as Metadata names it: the committed partition record,
        as the brokers serve it. A paused or killed leader stays named
        until the controller moves the leadership (fences it when its
        session expires), as Kafka's Metadata names it and as the real
        runtimes' observers read it (``harness.dbs.parts.MetadataObserver``),
        so a state-named target resolves to the same node on both."""
        meta = self.sim.partition_meta.get(key)
        n = meta.get("leader", -1) if meta is not None else -1
        return node_name(n) if n in self.sim.hosts else None

    def active_controller(self) -> str | None:
        n = self.sim.active_controller()
        return node_name(n) if n in self.sim.hosts else None

    def _meta(self, key: str, field: str) -> list[str]:
        meta = self.sim.partition_meta.get(key) or {}
        return [node_name(int(n)) for n in meta.get(field) or ()]

    def replicas_of(self, key: str) -> list[str]:
        """The replicas as Metadata lists them: during a reassignment
        (KIP-455) the target and the replicas leaving, as the real
        runtimes read them from a broker."""
        return self._meta(key, "replicas")

    def isr_of(self, key: str) -> list[str]:
        return self._meta(key, "isr")

    def own_isrs(self, node: str) -> dict[str, list[str]]:
        """The ISRs in the broker's own metadata image, once that image holds
        the running incarnation's registration (a Kafka broker answers no
        request before it caught up to its ``RegisterBrokerRecord``); ``{}``
        while it is down, paused or behind its registration."""
        nid = node_id(node)
        host = self.sim.hosts.get(nid)
        if host is None or host.node is None or host.state in (DOWN, PAUSED):
            return {}
        broker = getattr(host.node, "broker", None)
        if broker is None or broker.broker_epoch < 0:
            return {}
        img = broker.image
        mine = img.brokers.get(nid)
        if mine is None or mine.broker_epoch != broker.broker_epoch:
            return {}
        return {str(tp): [node_name(int(r)) for r in p.isr] for tp, p in img.partitions.items()}

    def broker_epoch(self, node: str) -> int | None:
        nid = node_id(node)
        host = self.sim.hosts.get(nid)
        if host is None or host.state == DOWN or host.node is None:
            return None
        broker = getattr(host.node, "broker", None)
        epoch = broker.broker_epoch if broker is not None else -1
        return epoch if epoch >= 0 else None


class SimCluster:
    """One simulation as the contract's Cluster."""

    runtime = "sim"
    capabilities = CAPABILITIES

    def __init__(self, sim: Simulation, keys: list[str], client_names: Callable[[], list[str]],
                 net_cut: str = "drop") -> None:
        self.sim = sim
        self.nodes = SimNodes(sim)
        self.net = SimNetwork(sim, client_names, net_cut)
        self.clock = SimClock(sim)
        self.observer = SimObserver(sim, keys)

    def after(self, delay_ms: int, fn: Callable[[], None]) -> None:
        self.sim.loop.after(delay_ms, fn)

    def step_after(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Ahead of the millisecond's other events, whenever set (the contract says why)."""
        self.sim.loop.first(self.sim.loop.now + max(0, int(delay_ms)), fn)
