"""The netns backend cuts exactly the links a grudge names, node to node and
client to node, by the kernel (iptables in each node's namespace), and a heal
restores every link (harness/runtimes/net/iptables.py, harness/runtimes/netns.py)."""

import random
import time

import pytest

from harness.runtimes.netns import NetnsHosts
from harness.runtimes.net.iptables import IptablesNetwork
from harness.runtimes.net.netns import list_namespaces
from nemesis.partition import shaped

from nemesis.control import Network, Remote

from .conftest import needs_root_net
from .probe import CLIENT, Prober, all_links

pytestmark = pytest.mark.integration
NODES = ["n1", "n2", "n3"]


@pytest.fixture
def fabric(tmp_path):
    needs_root_net()
    hosts = NetnsHosts.create(NODES, None, tmp_path)
    try:
        net = IptablesNetwork(NODES, {n: hosts.address(n) for n in NODES}, hosts.client_address,
                              lambda n, argv, stdin: hosts.exec(n, argv, 30, stdin=stdin))
        net.setup()
        assert isinstance(hosts, Remote) and isinstance(net, Network)  # the cluster contract, structurally
        probe = Prober(hosts, NODES, tmp_path)
        probe.start()
        yield probe, net
        probe.stop()
    finally:
        hosts.teardown()
    assert not [ns for ns in list_namespaces() if ns.startswith(f"kw-{hosts.fabric.tag}-")]


ALL_LINKS = all_links(NODES)


def test_a_grudge_cuts_exactly_its_links_and_heal_restores_all(fabric, tmp_path):
    probe, net = fabric
    assert probe.delivered() == ALL_LINKS
    for shape in ("one-way", "isolate-one", "halves"):
        cut, _ = shaped(shape, NODES, random.Random(3))
        cut = set(cut) | {(CLIENT, "n3"), ("n1", CLIENT)}
        net.cut(cut)
        assert probe.delivered() == ALL_LINKS - cut, shape
    net.cut([])
    assert probe.delivered() == ALL_LINKS


def test_a_one_way_cut_stalls_tcp_both_ways_and_reject_mode_refuses_at_once(fabric, tmp_path):
    probe, net = fabric
    net.cut([("n1", "n2"), (CLIENT, "n3")])
    assert not probe.tcp_connects("n1", "n2") and not probe.tcp_connects("n2", "n1")
    assert not probe.tcp_connects(CLIENT, "n3")
    assert probe.tcp_connects("n1", "n3") and probe.tcp_connects(CLIENT, "n2")
    net.mode = "reject"
    net.cut([("n1", "n2")])
    t0 = time.monotonic()
    assert not probe.tcp_connects("n1", "n2")
    assert time.monotonic() - t0 < 0.8  # refused by a reset, not timed out
    net.heal()
    assert all(probe.tcp_connects(a, b) for a, b in ALL_LINKS if b != CLIENT)


def test_random_loss_drops_a_share_of_one_links_packets_only(fabric, tmp_path):
    probe, net = fabric
    net.set_loss([("n1", "n2")], 1.0)
    assert probe.delivered() == ALL_LINKS - {("n1", "n2")}
    rc, out, _ = probe.hosts.exec("n2", ["iptables", "-S", "kw-in"], 10)
    assert "statistic --mode random --probability 1" in out
    net.set_loss([("n1", "n2")], 0)
    assert probe.delivered() == ALL_LINKS
