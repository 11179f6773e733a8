"""Seeded nemesis schedules: faults, their heals, and the final heal.

The schedule alternates *quiet* and *fault* windows of ``interval`` ms: at the
start of a fault window one fault is drawn (seeded) from the requested mix and
started; at its end it is healed. Each start/stop is recorded in the history
as an ``info`` op of process ``"nemesis"`` (``start-<fault>`` /
``stop-<fault>``, docs/architecture.md "History format").

Fault names accepted by ``--nemesis`` (``partition``, ``power-loss`` and
``all`` are groups):

========================  ====================================================
partition-halves          random halves of all nodes, both directions
partition-leader          isolate the leader of a random partition
partition-controller      isolate the active controller
partition-ring            majorities ring (every node sees a majority, no two the same)
partition-one-way         a random half cannot send to the other half
partition-clients         clients cannot reach the leader of a random partition
kill                      SIGKILL a node (random, a leader, or the controller); heal restarts it
pause                     SIGSTOP a node; heal resumes it
clock                     bump one node's clock by up to +/- 30 s; heal resets it
clock-strobe              flip one node's clock back and forth every few ms
power-loss-one            power loss (un-fsynced writes lost) of one broker
power-loss-minority       ... of a minority of the brokers or controllers
power-loss-majority       ... of a majority of the brokers or controllers
leader-churn              isolate a partition's leader, then its successor a few
                          ms after it is elected (rapid leader changes)
last-replica-standing     cut a leader off from the other brokers (not the
                          controllers) until it leads alone, then power-loss it
isr-crash                 cut one follower off from the leader until it leaves the
                          ISR, then kill the leader and the other followers
expand-race               fence a follower (cut from the controllers) while it
                          keeps replicating, then isolate the leader and unfence it
========================  ====================================================

The last four are composites (Jepsen would compose them from the basic ones):
each tells, at random moments, the start of one of the seeds' failure
narratives, so a seed search reaches them in tens, not thousands, of seeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .network import Endpoint, bisect, isolate, majorities_ring, one_way

if TYPE_CHECKING:
    from .simulation import Simulation

PARTITIONS = ("partition-halves", "partition-leader", "partition-controller", "partition-ring",
              "partition-one-way", "partition-clients")
POWER = ("power-loss-one", "power-loss-minority", "power-loss-majority")
COMPOSITES = ("leader-churn", "last-replica-standing", "isr-crash", "expand-race")
SINGLE = PARTITIONS + ("kill", "pause", "clock", "clock-strobe") + POWER + COMPOSITES
GROUPS = {
    "partition": PARTITIONS,
    "power-loss": POWER,
    "composite": COMPOSITES,
    "all": PARTITIONS + ("kill", "pause", "clock", "clock-strobe", "leader-churn", "expand-race"),
    "none": (),
}
NEMESIS_NAMES = tuple(SINGLE) + tuple(GROUPS)


class NemesisError(ValueError):
    pass


def expand(names: list[str]) -> tuple[str, ...]:
    """``["partition", "kill"]`` -> every concrete fault, in a stable order."""
    out: list[str] = []
    for n in names:
        n = n.strip()
        if not n:
            continue
        if n in GROUPS:
            out.extend(GROUPS[n])
        elif n in SINGLE:
            out.append(n)
        else:
            raise NemesisError(f"unknown nemesis {n!r} (known: {', '.join(NEMESIS_NAMES)})")
    seen: dict[str, None] = {}
    for n in out:
        seen.setdefault(n, None)
    return tuple(seen)


def _history_f(fault: str) -> str:
    if fault.startswith("partition") or fault in ("leader-churn", "expand-race"):
        return "partition"
    if fault in ("last-replica-standing", "isr-crash"):
        return "partition"
    if fault.startswith("partition"):
        return "partition"
    if fault.startswith("power-loss"):
        return "lose-unfsynced"
    if fault.startswith("clock"):
        return "clock"
    return fault


class Nemesis:
    def __init__(self, sim: "Simulation", record: Callable[..., None], faults: tuple[str, ...], interval_ms: int,
                 client_names: Callable[[], list[str]] | None = None) -> None:
        self.sim = sim
        self.record = record
        self.faults = faults
        self.interval = interval_ms
        self.client_names = client_names or (lambda: [])
        self.active: dict[str, Any] | None = None
        self.started = 0
        self._strobe_token = 0
        self._token = 0
        self.stopped = False

    # -- schedule -------------------------------------------------------------------
    def schedule(self, start: int, end: int) -> None:
        if not self.faults or self.interval <= 0:
            return
        t = start + self.interval
        while t + 1 < end:
            self.sim.at(t, self._start_random)
            stop_at = min(t + self.interval, end)
            self.sim.at(stop_at, self.stop)
            t = stop_at + self.interval

    def _start_random(self) -> None:
        if self.stopped or self.active is not None:
            return
        self.start(self.sim.rng.choice(self.faults))

    # -- faults ---------------------------------------------------------------------
    def start(self, fault: str, **kw: Any) -> dict[str, Any]:
        """Start ``fault`` now (tests may pass explicit targets, e.g. ``nodes=[2]``)."""
        if self.active is not None:
            self.stop()
        sim, rng = self.sim, self.sim.rng
        everyone = list(sim.node_ids)
        value: dict[str, Any] = {"fault": fault}
        if fault.startswith("partition"):
            if fault == "partition-halves":
                shuffled = everyone[:]
                rng.shuffle(shuffled)
                k = len(shuffled) // 2
                a, b = sorted(shuffled[:k]), sorted(shuffled[k:])
                pairs = bisect(a, b)
                value["halves"] = [a, b]
            elif fault == "partition-leader":
                n = self._leader_or_random_broker()
                with_clients: list[Endpoint] = [*everyone, *self.client_names()]
                pairs = isolate(n, with_clients)
                value["isolated"] = n
            elif fault == "partition-controller":
                n = sim.active_controller()
                if n < 0:
                    n = rng.choice(sim.controller_ids)
                pairs = isolate(n, everyone)
                value["isolated"] = n
            elif fault == "partition-ring":
                shuffled = everyone[:]
                rng.shuffle(shuffled)
                pairs = majorities_ring(shuffled)
                value["ring"] = shuffled
            elif fault == "partition-one-way":
                shuffled = everyone[:]
                rng.shuffle(shuffled)
                k = max(1, len(shuffled) // 2)
                a, b = sorted(shuffled[:k]), sorted(shuffled[k:])
                pairs = one_way(a, b)
                value["from"], value["to"] = a, b
            elif fault == "partition-clients":
                n = self._leader_or_random_broker()
                pairs = bisect([n], self.client_names())
                value["isolated-from-clients"] = n
            else:
                raise NemesisError(f"unknown nemesis {fault!r}")
            sim.cut(pairs)
            value["grudge"] = sorted([list(p) for p in pairs], key=lambda p: (str(p[0]), str(p[1])))
            self.active = {"fault": fault, "pairs": pairs}
        elif fault in ("kill", "pause"):
            nodes = kw.get("nodes") or [self._target_node()]
            for n in nodes:
                (sim.kill if fault == "kill" else sim.pause)(n)
            value["nodes"] = sorted(nodes)
            self.active = {"fault": fault, "nodes": nodes}
        elif fault in ("clock", "clock-strobe"):
            n = (kw.get("nodes") or [rng.choice(everyone)])[0]
            delta = kw.get("delta") or rng.choice([-1, 1]) * rng.randint(100, 30000)
            value.update(node=n, delta_ms=delta)
            self.active = {"fault": fault, "nodes": [n]}
            if fault == "clock":
                sim.bump_clock(n, delta)
            else:
                self._strobe_token += 1
                period = rng.randint(5, 50)
                value["period_ms"] = period
                self._strobe(self._strobe_token, n, delta, period, True)
        elif fault in COMPOSITES:
            self._token += 1
            value.update(self._start_composite(fault, self._token))
        elif fault in POWER:
            nodes = kw.get("nodes") or self._power_targets(fault)
            lost = {}
            for n in nodes:
                lost[str(n)] = sum(sim.power_loss(n).values())
            value["nodes"] = sorted(nodes)
            value["lost_entries"] = lost
            self.active = {"fault": fault, "nodes": nodes}
        else:
            raise NemesisError(f"unknown nemesis {fault!r}")
        self.started += 1
        self.record("nemesis", "info", f"start-{_history_f(fault)}", value)
        return value

    def stop(self) -> None:
        act = self.active
        if act is None:
            return
        self.active = None
        sim = self.sim
        fault = act["fault"]
        value: dict[str, Any] = {"fault": fault}
        if fault in COMPOSITES:
            self._token += 1
            sim.net.heal_pairs(act["pairs"])
            for n in sorted(act["down"]):
                sim.restart(n)
            value["restarted"] = sorted(act["down"])
            for extra in act["extra_stops"]:
                self.record("nemesis", "info", f"stop-{extra}", {"fault": fault})
        elif fault.startswith("partition"):
            sim.net.heal_pairs(act["pairs"])
        elif fault == "pause":
            for n in act["nodes"]:
                sim.resume(n)
            value["nodes"] = sorted(act["nodes"])
        elif fault == "kill" or fault in POWER:
            for n in act["nodes"]:
                sim.restart(n)
            value["nodes"] = sorted(act["nodes"])
        elif fault in ("clock", "clock-strobe"):
            self._strobe_token += 1
            for n in act["nodes"]:
                sim.set_clock(n, 0)
            value["nodes"] = sorted(act["nodes"])
        self.record("nemesis", "info", f"stop-{_history_f(fault)}", value)

    def final_heal(self) -> None:
        """Heal everything, restart dead nodes (the final phase)."""
        self.stopped = True
        self.stop()
        self.sim.heal_everything()

    # -- targets ----------------------------------------------------------------------
    def _leader_or_random_broker(self) -> int:
        sim = self.sim
        known = sorted(sim.leaders)
        if known:
            tp = sim.rng.choice(known)
            n = sim.leader_of(tp)
            if n in sim.broker_ids:
                return n
        return sim.rng.choice(sim.broker_ids)

    def _target_node(self) -> int:
        sim, rng = self.sim, self.sim.rng
        r = rng.random()
        if r < 0.4:
            return self._leader_or_random_broker()
        if r < 0.6:
            n = sim.active_controller()
            if n >= 0:
                return n
        return rng.choice(list(sim.node_ids))

    def _power_targets(self, fault: str) -> list[int]:
        sim, rng = self.sim, self.sim.rng
        if fault == "power-loss-one":
            return [self._leader_or_random_broker()]
        group = list(sim.broker_ids) if rng.random() < 0.7 else list(sim.controller_ids)
        n = len(group)
        k = max(1, (n - 1) // 2) if fault == "power-loss-minority" else n // 2 + 1
        rng.shuffle(group)
        return sorted(group[:k])

    def _strobe(self, token: int, n: int, delta: int, period: int, on: bool) -> None:
        if token != self._strobe_token:
            return
        self.sim.set_clock(n, delta if on else 0)
        self.sim.loop.after(period, self._strobe, token, n, delta, period, not on)


    # -- composites ----------------------------------------------------------------------
    def _random_partition(self) -> tuple[str, int, list[int]]:
        """A random partition with a known live leader: (key, leader, replicas)."""
        sim, rng = self.sim, self.sim.rng
        keys = sorted(k for k in sim.leaders if sim.leader_of(k) in sim.broker_ids and sim.is_up(sim.leader_of(k)))
        if not keys:
            b = rng.choice(sim.broker_ids)
            return "", b, list(sim.broker_ids)
        key = rng.choice(keys)
        meta = sim.partition_meta.get(key) or {}
        reps = [int(x) for x in meta.get("replicas", sim.broker_ids)]
        return key, sim.leader_of(key), reps

    def _later(self, token: int, delay: int, fn: Callable[[], None]) -> None:
        def run() -> None:
            if token == self._token and self.active is not None:
                fn()
        self.sim.loop.after(delay, run)

    def _isolate(self, act: dict[str, Any], n: int) -> None:
        pairs = isolate(n, list(self.sim.node_ids))
        act["pairs"] |= pairs
        self.sim.cut(pairs)

    def _start_composite(self, fault: str, token: int) -> dict[str, Any]:
        sim, rng = self.sim, self.sim.rng
        cfg = sim.config
        key, leader, reps = self._random_partition()
        act: dict[str, Any] = {"fault": fault, "pairs": set(), "down": set(), "extra_stops": []}
        self.active = act
        value: dict[str, Any] = {"tp": key, "leader": leader}
        wait_lag = min(int(cfg.replica_lag_time_max_ms * 1.5), int(self.interval * 0.8))
        if fault == "leader-churn":
            self._isolate(act, leader)

            def successor() -> None:
                new = sim.leader_of(key) if key else -1
                if new < 0 or new == leader or not sim.is_up(new):
                    self._later(token, 5, successor)
                    return
                delay = rng.randint(0, 30)

                def cut() -> None:
                    self._isolate(act, new)
                    act["extra_stops"].append("partition")
                    self.record("nemesis", "info", "start-partition", {"fault": "leader-churn", "tp": key,
                                                                        "successor": new, "after_ms": delay})
                self._later(token, delay, cut)

            self._later(token, 5, successor)
        elif fault == "last-replica-standing":
            others = [b for b in sim.broker_ids if b != leader]
            pairs = bisect([leader], others)
            act["pairs"] |= pairs
            sim.cut(pairs)

            def power() -> None:
                lost = sim.power_loss(leader)
                act["down"].add(leader)
                act["extra_stops"].append("lose-unfsynced")
                self.record("nemesis", "info", "start-lose-unfsynced",
                            {"fault": fault, "nodes": [leader], "lost_entries": {str(leader): sum(lost.values())}})
            self._later(token, wait_lag, power)
        elif fault == "isr-crash":
            followers = [r for r in reps if r != leader]
            laggard = rng.choice(followers) if followers else leader
            pairs = bisect([laggard], [leader])
            act["pairs"] |= pairs
            sim.cut(pairs)
            value["laggard"] = laggard

            def crash() -> None:
                victims = sorted(r for r in reps if r != laggard)
                for n in victims:
                    sim.kill(n)
                    act["down"].add(n)
                act["extra_stops"].append("kill")
                self.record("nemesis", "info", "start-kill", {"fault": fault, "nodes": victims})
            self._later(token, wait_lag, crash)
        elif fault == "expand-race":
            followers = [r for r in reps if r != leader]
            b = rng.choice(followers) if followers else leader
            pairs = bisect([b], list(sim.controller_ids))
            act["pairs"] |= pairs
            sim.cut(pairs)
            value["fenced"] = b

            def swap() -> None:
                sim.net.heal_pairs(pairs)
                act["pairs"] -= pairs
                self._isolate(act, leader)
                act["extra_stops"].append("partition")
                self.record("nemesis", "info", "start-partition", {"fault": fault, "isolated": leader, "unfenced": b})
            self._later(token, min(int(cfg.broker_session_timeout_ms * 1.5), int(self.interval * 0.8)), swap)
        return value
