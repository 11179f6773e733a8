"""A grudge becomes iptables rules on the hosts that see its packets: pure
functions, tested by equality (harness/runtimes/net/iptables.py)."""

import pytest

from harness.runtimes.net.iptables import CHAIN_IN, CHAIN_OUT, LinkFaults, check_links, node_rules, restore_text

ADDR = {"n1": "10.0.0.11", "n2": "10.0.0.12", "n3": "10.0.0.13"}
CLIENT_ADDR = "10.0.0.1"


def rules(node, cut=(), loss=None, mode="drop", exempt=()):
    return node_rules(node, LinkFaults(frozenset(cut), loss or {}), ADDR, CLIENT_ADDR, mode, exempt)


def test_a_directed_cut_is_dropped_by_the_receiver_only():
    cut = {("n1", "n2")}
    assert rules("n2", cut) == [["-A", CHAIN_IN, "-s", "10.0.0.11", "-j", "DROP"]]
    assert rules("n1", cut) == []
    assert rules("n3", cut) == []


def test_client_to_node_is_cut_at_the_node_and_node_to_client_on_its_way_out():
    cut = {("client", "n3"), ("n1", "client")}
    assert rules("n3", cut) == [["-A", CHAIN_IN, "-s", CLIENT_ADDR, "-j", "DROP"]]
    assert rules("n1", cut) == [["-A", CHAIN_OUT, "-d", CLIENT_ADDR, "-j", "DROP"]]


def test_client_cuts_spare_the_control_ports():
    got = rules("n3", {("client", "n3")}, exempt=(9093,))
    assert got == [
        ["-A", CHAIN_IN, "-s", CLIENT_ADDR, "-p", "tcp", "--dport", "9093", "-j", "ACCEPT"],
        ["-A", CHAIN_OUT, "-d", CLIENT_ADDR, "-p", "tcp", "--sport", "9093", "-j", "ACCEPT"],
        ["-A", CHAIN_IN, "-s", CLIENT_ADDR, "-j", "DROP"],
    ]
    assert rules("n3", {("n1", "n3")}, exempt=(9093,)) == [["-A", CHAIN_IN, "-s", "10.0.0.11", "-j", "DROP"]]


def test_reject_mode_resets_tcp_and_drops_the_rest():
    assert rules("n2", {("n1", "n2")}, mode="reject") == [
        ["-A", CHAIN_IN, "-s", "10.0.0.11", "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"],
        ["-A", CHAIN_IN, "-s", "10.0.0.11", "-j", "DROP"],
    ]


def test_loss_is_a_random_statistic_drop_and_a_cut_link_needs_none():
    got = rules("n2", {("n3", "n2")}, loss={("n1", "n2"): 0.25, ("n3", "n2"): 0.5})
    assert got == [
        ["-A", CHAIN_IN, "-s", "10.0.0.13", "-j", "DROP"],
        ["-A", CHAIN_IN, "-s", "10.0.0.11", "-m", "statistic", "--mode", "random", "--probability", "0.2500", "-j", "DROP"],
    ]


def test_heal_is_the_empty_ruleset_replacing_our_chains_only():
    assert all(rules(n) == [] for n in ADDR)
    assert restore_text([]) == f"*filter\n:{CHAIN_IN} - [0:0]\n:{CHAIN_OUT} - [0:0]\nCOMMIT\n"


def test_links_must_join_two_known_endpoints():
    assert check_links([("n1", "client")], ADDR) == frozenset({("n1", "client")})
    for bad in [("n1", "n9"), ("n1", "n1"), ("client", "client")]:
        with pytest.raises(ValueError):
            check_links([bad], ADDR)
