"""Partition shapes (Jepsen's grudges) as pure functions of an ordered node
list, tested by equality; the seeded draw of an order is apart."""

import random

import pytest

from nemesis.partition import (
    NODE_SHAPES,
    bisect,
    bridge,
    complete_grudge,
    connected,
    from_clients,
    isolate,
    majorities_ring,
    one_way,
    shaped,
)

NODES3 = ["n1", "n2", "n3"]
NODES5 = ["n1", "n2", "n3", "n4", "n5"]


def both(a, b):
    return {(a, b), (b, a)}


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


def test_complete_grudge_cuts_every_pair_across_groups_both_ways():
    assert complete_grudge([["a"], ["b", "c"]]) == both("a", "b") | both("a", "c")


def test_isolate_cuts_exactly_one_node_from_the_others_both_ways():
    assert isolate("n2", NODES3) == both("n2", "n1") | both("n2", "n3")


def test_bisect_puts_the_smaller_half_first():
    assert bisect(NODES5) == complete_grudge([["n1", "n2"], ["n3", "n4", "n5"]])
    assert sorted(map(len, components(bisect(NODES5), NODES5))) == [2, 3]


def test_bridge_node_talks_to_both_halves_which_do_not_talk():
    assert bridge(NODES5) == complete_grudge([["n1", "n2"], ["n4", "n5"]])
    assert all(connected(bridge(NODES5), "n3", x) for x in NODES5 if x != "n3")


def test_bridge_of_two_nodes_is_a_bisection():
    assert bridge(["a", "b"]) == both("a", "b")


def test_one_way_drops_only_the_first_nodes_inbound_traffic():
    assert one_way(NODES3) == {("n2", "n1"), ("n3", "n1")}


def test_majorities_ring_of_five_cuts_each_node_from_its_two_far_neighbours():
    # n1..n5 on a ring: each sees itself and one neighbour per side (3 of 5)
    far = {("n1", "n3"), ("n1", "n4"), ("n2", "n4"), ("n2", "n5"), ("n3", "n5")}
    assert majorities_ring(NODES5) == far | {(b, a) for a, b in far}


def test_majorities_ring_every_node_sees_a_majority_no_two_the_same():
    cut = majorities_ring(NODES5)
    views = {a: frozenset([a] + [b for b in NODES5 if b != a and connected(cut, a, b)]) for a in NODES5}
    assert all(len(v) >= 3 for v in views.values())
    assert len(set(views.values())) == 5
    assert len(components(cut, NODES5)) == 1  # not a clean split: that is the point


def test_majorities_ring_under_five_nodes_is_a_bisection():
    assert majorities_ring(NODES3) == bisect(NODES3)


def test_from_clients_cuts_the_client_links_of_one_node():
    assert from_clients("n1") == both("client", "n1")


@pytest.mark.parametrize("shape", NODE_SHAPES)
def test_a_drawn_shape_is_the_pure_shape_of_the_drawn_order(shape):
    cut, desc = shaped(shape, NODES5, random.Random(9))
    order = list(NODES5)
    random.Random(9).shuffle(order)
    assert cut == shaped(shape, NODES5, random.Random(9))[0]
    pure = {"isolate-one": lambda o: isolate(o[0], o), "halves": bisect, "majorities-ring": majorities_ring,
            "bridge": bridge, "one-way": one_way}[shape]
    assert cut == pure(order)
    assert desc
