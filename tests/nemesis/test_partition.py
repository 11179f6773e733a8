"""Partition shapes (Jepsen's grudges) as directed cuts."""

import random

import pytest

from nemesis.partition import SHAPES, connected, make_cut

NODES3 = ["n1", "n2", "n3"]
NODES5 = ["n1", "n2", "n3", "n4", "n5"]


def components(cut, nodes):
    seen, comps = set(), []
    for n in nodes:
        if n in seen:
            continue
        comp, todo = set(), [n]
        while todo:
            x = todo.pop()
            if x in comp:
                continue
            comp.add(x)
            todo += [y for y in nodes if y != x and connected(cut, x, y)]
        seen |= comp
        comps.append(comp)
    return comps


def test_isolate_one_cuts_exactly_one_node_both_ways():
    cut, desc = make_cut("isolate-one", NODES5, random.Random(1))
    (iso,) = desc["isolated"]
    assert cut == {(iso, x) for x in NODES5 if x != iso} | {(x, iso) for x in NODES5 if x != iso}


@pytest.mark.parametrize("seed", range(5))
def test_halves_split_into_minority_and_majority(seed):
    cut, desc = make_cut("halves", NODES5, random.Random(seed))
    assert len(desc["minority"]) == 2 and len(desc["majority"]) == 3
    comps = sorted(map(len, components(cut, NODES5)))
    assert comps == [2, 3]


def test_majorities_ring_every_node_sees_a_majority_no_two_the_same():
    cut, desc = make_cut("majorities-ring", NODES5, random.Random(3))
    views = {}
    for a in NODES5:
        views[a] = frozenset([a] + [b for b in NODES5 if b != a and connected(cut, a, b)])
        assert len(views[a]) >= 3
    assert len(set(views.values())) == 5
    assert len(components(cut, NODES5)) == 1  # not a clean split: that is the point


def test_bridge_node_talks_to_both_halves_which_do_not_talk():
    cut, desc = make_cut("bridge", NODES5, random.Random(2))
    b = desc["bridge"]
    assert all(connected(cut, b, x) for x in NODES5 if x != b)
    assert all(not connected(cut, x, y) for x in desc["left"] for y in desc["right"])


def test_one_way_cut_drops_only_inbound_traffic_of_one_node():
    cut, desc = make_cut("one-way", NODES3, random.Random(1))
    deaf = desc["deaf"]
    assert all((x, deaf) in cut for x in NODES3 if x != deaf)
    assert not any(src == deaf for src, _ in cut)


@pytest.mark.parametrize("shape", SHAPES)
def test_shapes_are_seeded(shape):
    assert make_cut(shape, NODES5, random.Random(9)) == make_cut(shape, NODES5, random.Random(9))
