"""Partition shapes as grudges: sets of directed cuts ``(a, b)`` (bytes from a
to b stop). Jepsen's shapes (``jepsen.nemesis``: ``complete-grudge``,
``bisect``, ``bridge``, ``majorities-ring``), as pure functions of an ordered
node list: the caller shuffles with the seeded rng, the shape is then a
function of the order alone, so every shape is tested by equality and every
runtime (the proxies, iptables, the simulator's network) makes the same cut
from the same order. Node names are strings; :data:`~nemesis.control.CLIENT`
stands for the clients.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterable, Sequence

from .control import CLIENT

Cut = set[tuple[str, str]]

#: shapes over the nodes alone, drawn by a plain ``partition`` fault
NODE_SHAPES = ("isolate-one", "halves", "majorities-ring", "bridge", "one-way")
#: shapes whose target the protocol's state names (see :func:`grudge`)
ROLE_SHAPES = ("primaries", "controller", "clients")
SHAPES = NODE_SHAPES + ROLE_SHAPES


def complete_grudge(groups: Iterable[Iterable[str]]) -> Cut:
    """Nodes in different groups cannot talk, both ways."""
    gs = [list(g) for g in groups]
    return {(x, y) for i, a in enumerate(gs) for j, b in enumerate(gs) if i != j for x in a for y in b}


def isolate(node: str, others: Iterable[str]) -> Cut:
    """``node`` and each of ``others`` cannot talk, both ways."""
    return complete_grudge([[node], [o for o in others if o != node]])


def bisect(order: Sequence[str]) -> Cut:
    """The first half (the smaller, with an odd count) against the rest."""
    k = len(order) // 2
    return complete_grudge([order[:k], order[k:]])


def bridge(order: Sequence[str]) -> Cut:
    """Two halves joined only by the middle node, which talks to both."""
    if len(order) < 3:
        return bisect(order)
    k = len(order) // 2
    return complete_grudge([order[:k], order[k + 1:]])


def one_way(order: Sequence[str]) -> Cut:
    """The first node hears nobody but can still send (inbound dropped)."""
    deaf = order[0]
    return {(x, deaf) for x in order[1:]}


def ring_reach(n: int) -> int:
    """Neighbours per side on a majorities ring: the fewest k with 1 + 2k a majority."""
    k = 1
    while 1 + 2 * k < n // 2 + 1:
        k += 1
    return k


def majorities_ring(order: Sequence[str]) -> Cut:
    """Every node sees a majority (itself and its ring neighbours in
    ``order``), no two nodes the same one. Under 5 nodes: :func:`bisect`."""
    n = len(order)
    if n < 5:
        return bisect(order)
    k = ring_reach(n)
    sees = {a: {order[(i + d) % n] for d in range(-k, k + 1)} for i, a in enumerate(order)}
    return {(a, b) for a in order for b in order if a != b and (b not in sees[a] or a not in sees[b])}


def from_clients(node: str) -> Cut:
    """The clients and ``node`` cannot talk, both ways."""
    return {(CLIENT, node), (node, CLIENT)}


_ORDERED: dict[str, Callable[[Sequence[str]], Cut]] = {
    "isolate-one": lambda order: isolate(order[0], order),
    "halves": bisect,
    "majorities-ring": majorities_ring,
    "bridge": bridge,
    "one-way": one_way,
}


def describe(shape: str, order: Sequence[str]) -> dict[str, Any]:
    """What the history records of a node shape, besides the cut itself."""
    k = len(order) // 2
    if shape == "isolate-one":
        return {"isolated": [order[0]]}
    if shape == "halves" or (shape in ("bridge", "majorities-ring") and len(order) < (3 if shape == "bridge" else 5)):
        return {"minority": sorted(order[:k]), "majority": sorted(order[k:])}
    if shape == "bridge":
        return {"left": sorted(order[:k]), "right": sorted(order[k + 1:]), "bridge": order[k]}
    if shape == "majorities-ring":
        return {"ring": list(order), "neighbours_per_side": ring_reach(len(order))}
    return {"deaf": order[0]}


def shaped(shape: str, nodes: Sequence[str], rng: random.Random) -> tuple[Cut, dict[str, Any]]:
    """A node shape over ``nodes`` in an order the seeded ``rng`` draws."""
    order = list(nodes)
    rng.shuffle(order)
    return _ORDERED[shape](order), describe(shape, order)


def connected(cut: Cut, a: str, b: str) -> bool:
    """Can a and b exchange bytes both ways (a TCP connection works)?"""
    return (a, b) not in cut and (b, a) not in cut


def links(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """Every directed link between two nodes."""
    return [(a, b) for a in nodes for b in nodes if a != b]


def as_lists(cut: Cut) -> list[list[str]]:
    """A cut as the history records it: sorted ``[src, dst]`` pairs."""
    return sorted([list(p) for p in cut])
