"""The simulated cluster's state at a moment, as the availability checker
reads it (``checkers.availability.cause.FinalState``): the metadata image of
a running active controller (else the most advanced controller's), each
broker's process, registration and fencing, the quorum's leader, and for
each broker what it was waiting on: the simulator sees inside the nodes, so a
broker out of an ISR can be told apart by its replica fetcher (a fetch in
flight since when, on which clock; a fetch backoff), its metadata log (how
far behind the controller's), its KRaft observer (which quorum leader it
knows) and its clock's offset.

Read-only: nothing here changes the simulation.
"""

from __future__ import annotations

from typing import Any

from reference_impl.sim.simulation import Simulation, node_name


def _controllers(sim: Simulation) -> list[tuple[int, Any]]:
    out = []
    for cid in sim.controller_ids:
        node = sim.node(cid)
        if node is not None and node.controller is not None:
            out.append((cid, node.controller))
    return out


def quorum_leader(sim: Simulation) -> str | None:
    """The running controller that is active (its term's NoOp committed)."""
    for cid, c in _controllers(sim):
        if sim.is_up(cid) and c.is_active:
            return node_name(cid)
    return None


def _image(sim: Simulation) -> Any:
    ctrls = _controllers(sim)
    active = [c for cid, c in ctrls if sim.is_up(cid) and c.is_active]
    if active:
        return active[0].image
    return max((c.image for _, c in ctrls), key=lambda im: im.offset, default=None)


def _partition(p: Any) -> dict[str, Any]:
    return {"leader": p.leader, "isr": list(p.isr), "elr": list(p.elr), "last_known_elr": list(p.last_known_elr),
            "replicas": list(p.replicas), "last_known_leader": p.last_known_leader,
            "partition_epoch": p.partition_epoch}


def _broker(sim: Simulation, bid: int, image: Any) -> dict[str, Any]:
    node = sim.node(bid)
    reg = image.brokers.get(bid) if image is not None else None
    running = sim.is_up(bid)
    b = node.broker if node is not None else None
    mine = b.broker_epoch if b is not None else -1
    out: dict[str, Any] = {"name": node_name(bid), "running": running,
                           "registered": reg is not None and mine >= 0 and reg.broker_epoch == mine,
                           "fenced": True if reg is None else reg.fenced}
    words = _waits(sim, bid, image)
    if reg is not None and mine >= 0 and reg.broker_epoch != mine:
        words.insert(0, f"the controller holds its previous incarnation's registration (epoch {reg.broker_epoch})")
    if words:
        out["detail"] = "; ".join(words)
    return out


def _waits(sim: Simulation, bid: int, image: Any) -> list[str]:
    """What a running broker was waiting on, in words."""
    node = sim.node(bid)
    if node is None or node.broker is None or not sim.is_up(bid):
        return []
    host, b = sim.host(bid), node.broker
    now = host.now()
    words = []
    if host.clock.offset_ms:
        words.append(f"its wall clock {host.clock.offset_ms / 1000:+.1f} s off")
    obs = node.observer
    if obs is not None and obs.leader_id < 0:
        words.append("its KRaft observer knows no quorum leader (it fetches no metadata)")
    if image is not None and b.image.offset < image.offset:
        words.append(f"its metadata at offset {b.image.offset} of the controller's {image.offset}")
    for leader, f in sorted(b.fetcher.fetchers.items()):
        if f.inflight is not None:
            words.append(fetch_in_flight_words(node_name(leader), f.sent_at, now, b.fetcher.fetch_timeout_ms))
        elif f.backoff_until > now:
            words.append(f"its fetch from {node_name(leader)} backing off {(f.backoff_until - now) / 1000:.1f} s "
                         "more on its wall clock")
    return words


def fetch_in_flight_words(leader: str, sent_at: int, now: int, timeout_ms: int) -> str:
    """A replica fetch in flight, in words. The fetcher stamps a fetch and
    gives it up on the broker's wall clock (as Kafka's NetworkClient times a
    request out on ``time.milliseconds()``), so a clock set back after the
    send leaves the stamp in the clock's future: the fetch has then waited
    no time at all by that clock, and is given up only once the clock has
    caught up with the stamp plus the timeout. Said so, not as a negative
    time in flight."""
    ahead = sent_at - now
    if ahead <= 0:
        return (f"a replica fetch to {leader} in flight for {-ahead / 1000:.1f} s on its wall clock "
                f"(given up after {timeout_ms / 1000:g} s)")
    return (f"a replica fetch to {leader} in flight, sent when its wall clock read {ahead / 1000:.1f} s later than "
            f"it does now (the clock was set back since): given up after {timeout_ms / 1000:g} s on that clock, "
            f"{(ahead + timeout_ms) / 1000:.1f} s from now")


def cluster_state(sim: Simulation, *, min_isr: int, rules: dict[str, Any], t_ns: int | None = None) -> dict[str, Any]:
    """The state as a plain dict (``FinalState.from_dict``)."""
    image = _image(sim)
    return {
        "source": "simulator",
        "t_ns": t_ns,
        "quorum_leader": quorum_leader(sim),
        "controllers": {node_name(cid): sim.host(cid).state.replace("up", "running")
                        for cid in sim.controller_ids},
        "partitions": {str(tp): _partition(p) for tp, p in (image.partitions.items() if image else ())},
        "brokers": {str(bid): _broker(sim, bid, image) for bid in sim.broker_ids},
        "rules": rules,
        "min_isr": min_isr,
    }
