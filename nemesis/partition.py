"""Partition shapes as sets of directed cuts ``(a, b)``: bytes from a to b are
dropped. These are Jepsen's grudges (jepsen.nemesis/partition-*), computed from
the node list and a seeded rng so a schedule replays from its seed."""

from __future__ import annotations

import random
from typing import Iterable

Cut = set[tuple[str, str]]

SHAPES = ("isolate-one", "halves", "majorities-ring", "bridge", "one-way")


def complete_split(groups: Iterable[Iterable[str]]) -> Cut:
    """Nodes in different groups cannot talk, both ways."""
    gs = [list(g) for g in groups]
    cut: Cut = set()
    for i, a in enumerate(gs):
        for j, b in enumerate(gs):
            if i != j:
                cut |= {(x, y) for x in a for y in b}
    return cut


def isolate_one(nodes: list[str], rng: random.Random) -> tuple[Cut, dict]:
    n = rng.choice(nodes)
    rest = [x for x in nodes if x != n]
    return complete_split([[n], rest]), {"isolated": [n]}


def halves(nodes: list[str], rng: random.Random) -> tuple[Cut, dict]:
    """A random minority and majority (Jepsen's partition-random-halves)."""
    ns = list(nodes)
    rng.shuffle(ns)
    k = len(ns) // 2
    minority, majority = sorted(ns[:k]), sorted(ns[k:])
    return complete_split([minority, majority]), {"minority": minority, "majority": majority}


def majorities_ring(nodes: list[str], rng: random.Random) -> tuple[Cut, dict]:
    """Every node sees a majority, no two nodes the same one (Jepsen's
    partition-majorities-ring): nodes on a shuffled ring talk only to their
    nearest neighbours. Needs 5+ nodes to differ from halves."""
    n = len(nodes)
    if n < 5:
        return halves(nodes, rng)
    ring = list(nodes)
    rng.shuffle(ring)
    k = 1  # neighbours per side: the fewest with 1 + 2k >= a majority
    while 1 + 2 * k < n // 2 + 1:
        k += 1
    sees: dict[str, set[str]] = {}
    for i, a in enumerate(ring):
        sees[a] = {ring[(i + d) % n] for d in range(-k, k + 1)}
    cut = {(a, b) for a in nodes for b in nodes if a != b and (b not in sees[a] or a not in sees[b])}
    return cut, {"ring": ring, "neighbours_per_side": k}


def bridge(nodes: list[str], rng: random.Random) -> tuple[Cut, dict]:
    """Two halves that only one bridge node connects (Jepsen's partition-bridge)."""
    ns = list(nodes)
    rng.shuffle(ns)
    if len(ns) < 3:
        return halves(nodes, rng)
    k = len(ns) // 2
    b = ns[k]
    left, right = ns[:k], ns[k + 1:]
    return complete_split([left, right]), {"left": sorted(left), "right": sorted(right), "bridge": b}


def one_way(nodes: list[str], rng: random.Random) -> tuple[Cut, dict]:
    """One node hears nobody but can still send (inbound traffic dropped)."""
    n = rng.choice(nodes)
    return {(x, n) for x in nodes if x != n}, {"deaf": n}


_SHAPE_FNS = {
    "isolate-one": isolate_one,
    "halves": halves,
    "majorities-ring": majorities_ring,
    "bridge": bridge,
    "one-way": one_way,
}


def make_cut(shape: str, nodes: list[str], rng: random.Random) -> tuple[Cut, dict]:
    return _SHAPE_FNS[shape](nodes, rng)


def connected(cut: Cut, a: str, b: str) -> bool:
    """Can a and b exchange bytes both ways (a TCP connection works)?"""
    return (a, b) not in cut and (b, a) not in cut
