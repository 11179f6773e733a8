"""The faults. Each has ``start()`` (apply, return what was done) and ``stop()``
(heal everything of its kind; idempotent, so the final heal can always run).

History names (``op_name``): leader-kill and controller-kill are kills with a
different target choice, so they are recorded as ``start-kill``/``stop-kill``
with ``fault`` and ``target`` in the value, keeping the documented fault set.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from .partition import SHAPES, make_cut


def pick_nodes(nodes: list[str], spec: str, rng: random.Random) -> list[str]:
    """Jepsen's node specs: one, minority, majority, all."""
    ns = list(nodes)
    rng.shuffle(ns)
    n = len(ns)
    k = {"one": 1, "minority": max(1, (n - 1) // 2), "majority": n // 2 + 1, "all": n}[spec]
    return sorted(ns[:k])


class Fault:
    op_name = ""

    def __init__(self, cluster: Any, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng

    def start(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def stop(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


class Partition(Fault):
    """Cut links in one of Jepsen's shapes (nemesis.partition) via the proxies."""

    op_name = "partition"

    def start(self) -> dict[str, Any]:
        shape = self.rng.choice(SHAPES)
        cut, desc = make_cut(shape, self.cluster.node_names(), self.rng)
        self.cluster.proxy.call(cmd="cut", pairs=sorted(cut))
        return {"shape": shape, **desc, "cut": sorted([list(p) for p in cut])}

    def stop(self) -> dict[str, Any]:
        self.cluster.proxy.call(cmd="cut", pairs=[])
        return {"healed": True}


class Latency(Fault):
    """Added delay on every node-to-node link."""

    op_name = "latency"

    def start(self) -> dict[str, Any]:
        ms = self.rng.choice([20, 50, 100, 250])
        self.cluster.proxy.call(cmd="delay", ms=ms, jitter=ms / 2, links=self.cluster.node_link_names())
        return {"ms": ms, "jitter": ms / 2}

    def stop(self) -> dict[str, Any]:
        self.cluster.proxy.call(cmd="delay", ms=0, links=self.cluster.node_link_names())
        return {"healed": True}


class Kill(Fault):
    """SIGKILL some nodes; stop restarts every dead node."""

    op_name = "kill"
    specs = ("one", "minority", "majority", "all")

    def targets(self) -> tuple[list[str], dict[str, Any]]:
        spec = self.rng.choice(self.specs)
        return pick_nodes(self.cluster.node_names(), spec, self.rng), {"target": spec}

    def start(self) -> dict[str, Any]:
        nodes, desc = self.targets()
        for n in nodes:
            self.cluster.kill(n)
        return {**desc, "nodes": nodes}

    def stop(self) -> dict[str, Any]:
        dead = self.cluster.dead_nodes()
        for n in dead:
            self.cluster.start(n)
        return {"restarted": dead}


class LeaderKill(Kill):
    """Kill the current leader of a random topic-partition (the acks=1 killer:
    its unreplicated tail is truncated when it rejoins as a follower)."""

    def targets(self) -> tuple[list[str], dict[str, Any]]:
        key = self.rng.choice(self.cluster.keys())
        leader = self.cluster.leader_of(key)
        return ([leader] if leader else []), {"target": "leader", "key": key}


class ControllerKill(Kill):
    """Kill the active KRaft controller (the metadata quorum leader)."""

    def targets(self) -> tuple[list[str], dict[str, Any]]:
        c = self.cluster.active_controller()
        return ([c] if c else []), {"target": "controller"}


class Pause(Fault):
    """SIGSTOP some nodes (a GC pause / VM freeze); stop SIGCONTs all."""

    op_name = "pause"

    def start(self) -> dict[str, Any]:
        spec = self.rng.choice(("one", "minority", "majority"))
        nodes = pick_nodes(self.cluster.live_nodes() or self.cluster.node_names(), spec, self.rng)
        for n in nodes:
            self.cluster.pause(n)
        return {"target": spec, "nodes": nodes}

    def stop(self) -> dict[str, Any]:
        resumed = self.cluster.resume_all()
        return {"resumed": resumed}


class Clock(Fault):
    """Skew node clocks through the control endpoint: a bump (one offset) or a
    strobe (flip between two offsets for a while), as Jepsen's clock nemesis."""

    op_name = "clock"

    def start(self) -> dict[str, Any]:
        nodes = pick_nodes(self.cluster.live_nodes() or self.cluster.node_names(),
                           self.rng.choice(("one", "minority", "majority")), self.rng)
        mode = self.rng.choice(("bump", "strobe"))
        if mode == "bump":
            offsets = {n: self.rng.choice((-1, 1)) * self.rng.randint(100, 60_000) for n in nodes}
            for n, ms in offsets.items():
                self.cluster.set_clock(n, ms)
            return {"mode": "bump", "offsets_ms": offsets}
        delta = self.rng.randint(50, 5_000)
        period = self.rng.choice((0.01, 0.05, 0.1))
        duration = self.rng.uniform(0.5, 2.0)
        end = time.monotonic() + duration
        flip = False
        while time.monotonic() < end:
            flip = not flip
            for n in nodes:
                self.cluster.set_clock(n, delta if flip else 0)
            time.sleep(period)
        return {"mode": "strobe", "nodes": nodes, "delta_ms": delta, "period_s": period, "duration_s": round(duration, 2)}

    def stop(self) -> dict[str, Any]:
        reset = []
        for n in self.cluster.live_nodes():
            try:
                self.cluster.set_clock(n, 0)
                reset.append(n)
            except Exception:
                pass
        return {"reset": reset}


class LoseUnfsynced(Fault):
    """Power loss: every file of the target nodes reverts to its last fsync
    (by the node's ``kraftwerk fs`` mount on netns, else the broker's
    memory-cache storage mode), and the process dies. A
    majority or all, since losing one node's page cache is what replication
    is for."""

    op_name = "lose-unfsynced"

    def start(self) -> dict[str, Any]:
        spec = self.rng.choice(("majority", "all"))
        nodes = pick_nodes(self.cluster.node_names(), spec, self.rng)
        for n in nodes:
            self.cluster.power_loss(n)
        return {"target": spec, "nodes": nodes}

    def stop(self) -> dict[str, Any]:
        dead = self.cluster.dead_nodes()
        for n in dead:
            self.cluster.start(n)
        return {"restarted": dead}


@dataclass(frozen=True)
class FaultType:
    op_name: str
    make: Callable[[Any, random.Random], Fault]


FAULTS: dict[str, FaultType] = {
    "partition": FaultType("partition", Partition),
    "latency": FaultType("latency", Latency),
    "kill": FaultType("kill", Kill),
    "leader-kill": FaultType("kill", LeaderKill),
    "controller-kill": FaultType("kill", ControllerKill),
    "pause": FaultType("pause", Pause),
    "clock": FaultType("clock", Clock),
    "lose-unfsynced": FaultType("lose-unfsynced", LoseUnfsynced),
}


def make_faults(names: list[str], cluster: Any, rng: random.Random) -> dict[str, Fault]:
    return {n: FAULTS[n].make(cluster, random.Random(rng.getrandbits(64))) for n in names}
