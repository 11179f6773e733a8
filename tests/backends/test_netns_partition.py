"""The netns backend cuts exactly the links a grudge names, node to node and
client to node, by the kernel (iptables in each node's namespace), and a heal
restores every link (harness/net/iptables.py, harness/backend/netns.py)."""

import random
import socket
import subprocess
import sys
import time
from itertools import permutations

import pytest

from harness.backend.netns import NetnsHosts
from harness.net.iptables import CLIENT, IptablesNetwork
from harness.net.netns import list_namespaces
from nemesis.partition import make_cut

from .conftest import needs_root_net

pytestmark = pytest.mark.integration
NODES = ["n1", "n2", "n3"]
PORT = 7000

RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((sys.argv[1], int(sys.argv[2]) + 1)); t.listen(64)
import threading
def tcp():
    while True:
        c, _ = t.accept(); c.close()
threading.Thread(target=tcp, daemon=True).start()
with open(sys.argv[3], "a") as f:
    while True:
        data, (src, _) = s.recvfrom(100)
        f.write(data.decode() + "\\n"); f.flush()
"""

SENDER = """
import socket, sys
me, targets = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    for t in targets:
        name, addr = t.split("=")
        try:
            s.sendto(f"{me}->{name}".encode(), (addr, %d))
        except PermissionError:  # dropped on its way out by our OUTPUT chain
            pass
""" % PORT


@pytest.fixture
def fabric(tmp_path):
    needs_root_net()
    hosts = NetnsHosts.create(NODES, None, tmp_path)
    try:
        net = IptablesNetwork(NODES, {n: hosts.address(n) for n in NODES}, hosts.client_address,
                              lambda n, argv, stdin: hosts.exec(n, argv, 30, stdin=stdin))
        net.setup()
        for n in NODES:
            hosts.start_daemon(n, [sys.executable, "-c", RECEIVER, hosts.address(n), str(PORT), str(tmp_path / f"{n}.got")],
                               str(tmp_path / f"{n}.log"), {})
        client_rx = subprocess.Popen([sys.executable, "-c", RECEIVER, hosts.client_address, str(PORT),
                                      str(tmp_path / "client.got")])
        time.sleep(0.5)
        yield hosts, net
        client_rx.kill()
        client_rx.wait()
    finally:
        hosts.teardown()
    assert not [ns for ns in list_namespaces() if ns.startswith(f"kw-{hosts.fabric.tag}-")]


def delivered(hosts, tmp_path) -> set[tuple[str, str]]:
    """Send a datagram over every directed link; return the links it crossed."""
    for f in tmp_path.glob("*.got"):
        f.write_text("")
    addr = {**{n: hosts.address(n) for n in NODES}, CLIENT: hosts.client_address}
    for src in [*NODES, CLIENT]:
        targets = [f"{d}={addr[d]}" for d in addr if d != src]
        argv = [sys.executable, "-c", SENDER, src, *targets]
        if src == CLIENT:
            subprocess.run(argv, check=True, timeout=10)
        else:
            rc, _, err = hosts.exec(src, argv, 10)
            assert rc == 0, err
    time.sleep(0.4)
    got = set()
    for f in tmp_path.glob("*.got"):
        for line in f.read_text().split():
            a, b = line.split("->")
            got.add((a, b))
    return got


ALL_LINKS = set(permutations([*NODES, CLIENT], 2))


def tcp_connects(hosts, src: str, dst: str) -> bool:
    if src == CLIENT:
        try:
            socket.create_connection((hosts.address(dst), PORT + 1), timeout=1).close()
            return True
        except OSError:
            return False
    code = f"import socket; socket.create_connection(('{hosts.address(dst)}', {PORT + 1}), timeout=1).close()"
    return hosts.exec(src, [sys.executable, "-c", code], 10)[0] == 0


def test_a_grudge_cuts_exactly_its_links_and_heal_restores_all(fabric, tmp_path):
    hosts, net = fabric
    assert delivered(hosts, tmp_path) == ALL_LINKS
    for shape in ("one-way", "isolate-one", "halves"):
        cut, _ = make_cut(shape, NODES, random.Random(3))
        cut = set(cut) | {(CLIENT, "n3"), ("n1", CLIENT)}
        net.cut(cut)
        assert delivered(hosts, tmp_path) == ALL_LINKS - cut, shape
    net.cut([])
    assert delivered(hosts, tmp_path) == ALL_LINKS


def test_a_one_way_cut_stalls_tcp_both_ways_and_reject_mode_refuses_at_once(fabric, tmp_path):
    hosts, net = fabric
    net.cut([("n1", "n2"), (CLIENT, "n3")])
    assert not tcp_connects(hosts, "n1", "n2") and not tcp_connects(hosts, "n2", "n1")
    assert not tcp_connects(hosts, CLIENT, "n3")
    assert tcp_connects(hosts, "n1", "n3") and tcp_connects(hosts, CLIENT, "n2")
    net.mode = "reject"
    net.cut([("n1", "n2")])
    t0 = time.monotonic()
    assert not tcp_connects(hosts, "n1", "n2")
    assert time.monotonic() - t0 < 0.8  # refused by a reset, not timed out
    net.heal()
    assert all(tcp_connects(hosts, a, b) for a, b in ALL_LINKS if b != CLIENT)


def test_random_loss_drops_a_share_of_one_links_packets_only(fabric, tmp_path):
    hosts, net = fabric
    net.set_loss([("n1", "n2")], 1.0)
    assert delivered(hosts, tmp_path) == ALL_LINKS - {("n1", "n2")}
    rc, out, _ = hosts.exec("n2", ["iptables", "-S", "kw-in"], 10)
    assert "statistic --mode random --probability 1" in out
    net.set_loss([("n1", "n2")], 0)
    assert delivered(hosts, tmp_path) == ALL_LINKS
