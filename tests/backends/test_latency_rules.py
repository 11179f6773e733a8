"""Latency on the kernel backends without a kernel: the delay's mark, the
rules a delayed link becomes, the netlink messages of the packet queue and
the delayer's release schedule (harness/runtimes/net/latency.py,
harness/netdelay/)."""

import random
import socket
import struct

import pytest

from harness.netdelay import nfqueue
from harness.netdelay.delayer import Scheduler
from harness.runtimes.net.iptables import CHAIN_IN, CHAIN_OUT, IptablesNetwork, LinkFaults, node_rules
from harness.netdelay.mark import QUEUE, decode_mark, encode_mark
from harness.runtimes.net.latency import delayed_hosts, parse_queues, set_delays

ADDR = {"n1": "10.0.0.11", "n2": "10.0.0.12", "n3": "10.0.0.13"}
CLIENT_ADDR = "10.0.0.1"


def rules(node, delay, cut=(), loss=None, exempt=()):
    return node_rules(node, LinkFaults(frozenset(cut), loss or {}, delay), ADDR, CLIENT_ADDR, "drop", exempt)


def test_the_mark_carries_ms_and_jitter_and_refuses_what_does_not_fit():
    assert decode_mark(encode_mark(100, 0)) == (100, 0)
    assert decode_mark(encode_mark(20, 5)) == (20, 5)
    assert decode_mark(encode_mark(65535, 65535)) == (65535, 65535)
    assert encode_mark(12.4, 0.6) == (12 << 16) | 1
    for ms, jitter in ((65536, 0), (0, 70000), (-1, 0), (float("nan"), 0), (float("inf"), 1)):
        with pytest.raises(ValueError, match="0..65535 ms"):
            encode_mark(ms, jitter)


def test_a_delayed_link_is_marked_and_queued_where_a_cut_would_drop_it():
    delay = {("n1", "n2"): (100.0, 5.0)}
    mark = f"0x{(100 << 16) | 5:08x}"
    assert rules("n2", delay) == [
        ["-A", CHAIN_IN, "-s", "10.0.0.11", "-j", "MARK", "--set-mark", mark],
        ["-A", CHAIN_IN, "-s", "10.0.0.11", "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"],
    ]
    assert rules("n1", delay) == [] and rules("n3", delay) == []
    out = rules("n1", {("n1", "client"): (50.0, 0.0)})
    assert [r[:4] for r in out] == [["-A", CHAIN_OUT, "-d", CLIENT_ADDR]] * 2


def test_a_cut_link_is_not_also_queued_and_loss_comes_before_the_delay():
    delay = {("n1", "n2"): (100.0, 0.0)}
    assert rules("n2", delay, cut={("n1", "n2")}) == [["-A", CHAIN_IN, "-s", "10.0.0.11", "-j", "DROP"]]
    got = rules("n2", delay, loss={("n1", "n2"): 0.5})
    assert [r[-1] for r in got] == ["DROP", "0x00640000", "--queue-bypass"] and "statistic" in got[0]


def test_delayed_client_links_spare_the_control_ports():
    got = rules("n3", {("client", "n3"): (100.0, 0.0)}, exempt=(9093,))
    assert got[0][-1] == "ACCEPT" and got[1][-1] == "ACCEPT" and got[-1][-1] == "--queue-bypass"


def test_setting_zero_removes_a_links_delay_and_the_delays_name_their_hosts():
    d = set_delays({}, [("n1", "n2"), ("n2", "client"), ("client", "n3")], 20, 5)
    assert delayed_hosts(d, "client") == ["n2", "n3"]
    d = set_delays(d, [("n2", "client"), ("client", "n3")], 0, 0)
    assert d == {("n1", "n2"): (20.0, 5.0)}
    with pytest.raises(ValueError):
        set_delays(d, [("n1", "n3")], 10**6, 0)


def test_without_delayers_a_network_refuses_latency_before_changing_anything():
    calls = []
    net = IptablesNetwork(["n1", "n2"], {"n1": "10.0.0.11", "n2": "10.0.0.12"}, CLIENT_ADDR,
                          lambda n, argv, stdin: calls.append(argv) or (0, "", ""))
    with pytest.raises(NotImplementedError):
        net.set_latency([("n1", "n2")], 100, 0)
    net.set_latency([("n1", "n2")], 0, 0)  # no delay asked: nothing to refuse
    assert net.faults.delay == {} and not any("NFQUEUE" in " ".join(c) for c in calls)


def test_the_delayers_start_before_the_rules_that_queue_to_them():
    events = []

    class Delayers:
        def ensure(self, nodes):
            events.append(("ensure", list(nodes)))

    net = IptablesNetwork(["n1", "n2"], {"n1": "10.0.0.11", "n2": "10.0.0.12"}, CLIENT_ADDR,
                          lambda n, argv, stdin: events.append(("rules", n, stdin)) or (0, "", ""),
                          delayers=Delayers())
    net.set_latency([("n1", "n2")], 100, 0)
    assert events[0] == ("ensure", ["n2"])
    assert any(e[0] == "rules" and e[1] == "n2" and "NFQUEUE" in e[2] for e in events[1:])
    net.cut([("n2", "n1")])
    assert net.faults.delay == {("n1", "n2"): (100.0, 0.0)}  # a partition keeps the latency
    net.heal()
    assert net.faults == LinkFaults()


def test_bind_and_verdict_messages_are_nfnetlink_queue_messages():
    msg = nfqueue.config_message(QUEUE, 7)
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", msg)
    assert length == len(msg) and kind == (3 << 8) | 2 and seq == 7 and flags & nfqueue.NLM_F_ACK
    assert struct.unpack_from("!BBH", msg, 16) == (socket.AF_UNSPEC, 0, QUEUE)
    attrs = dict(nfqueue._attrs(msg, 20, len(msg)))
    assert attrs[nfqueue.NFQA_CFG_CMD][0] == nfqueue.NFQNL_CFG_CMD_BIND
    assert struct.unpack("!IB", attrs[nfqueue.NFQA_CFG_PARAMS][:5]) == (64, nfqueue.NFQNL_COPY_PACKET)
    v = nfqueue.verdict_message(QUEUE, 42)
    attrs = dict(nfqueue._attrs(v, 20, len(v)))
    assert struct.unpack("!II", attrs[nfqueue.NFQA_VERDICT_HDR]) == (nfqueue.NF_ACCEPT, 42)
    assert struct.unpack("!I", attrs[nfqueue.NFQA_MARK]) == (0,)


def packet_message(pid, hook, mark, head):
    attrs = (nfqueue._attr(nfqueue.NFQA_PACKET_HDR, struct.pack("!IHB", pid, 0x0800, hook) + b"\0")
             + nfqueue._attr(nfqueue.NFQA_MARK, struct.pack("!I", mark))
             + nfqueue._attr(nfqueue.NFQA_PAYLOAD, head))
    return nfqueue._message(nfqueue.NFQNL_MSG_PACKET, QUEUE, attrs, 0)


def ipv4_tcp(src, dst, sport, dport):
    return (bytes([0x45, 0, 0, 40]) + b"\0" * 5 + bytes([6]) + b"\0\0" + socket.inet_aton(src)
            + socket.inet_aton(dst) + struct.pack("!HH", sport, dport) + b"\0" * 16)


def test_queued_packets_are_parsed_with_their_mark_and_flow():
    a = ipv4_tcp("10.0.0.11", "10.0.0.12", 40000, 9092)
    b = ipv4_tcp("10.0.0.11", "10.0.0.12", 40001, 9092)
    data = packet_message(5, nfqueue.HOOK_INPUT, 0x00640005, a) + packet_message(6, nfqueue.HOOK_OUTPUT, 1, b[:30])
    got = list(nfqueue.parse_packets(data))
    assert [(p.packet_id, p.hook, p.mark) for p in got] == [(5, 1, 0x00640005), (6, 3, 1)]
    assert nfqueue.flow_of(got[0].head) != nfqueue.flow_of(b) and nfqueue.flow_of(a) == nfqueue.flow_of(a + b"x")


def test_a_refused_command_is_an_error_not_a_packet():
    err = struct.pack("=IHHII", 36, nfqueue.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -16) + b"\0" * 16
    with pytest.raises(nfqueue.QueueError, match="EBUSY"):
        list(nfqueue.parse_packets(err))


def test_jitter_stays_in_bounds_and_never_reorders_a_flow():
    s = Scheduler(random.Random(1))
    mark = encode_mark(20, 5)
    flows = [b"A", b"B"]
    for i in range(2000):
        s.add(i * 0.0001, i, mark, flows[i % 2])
    released, now = [], 0.0
    while s.heap:
        now += 0.0005
        released += s.pop_due(now)
    for f in (0, 1):
        order = [p for p in released if p % 2 == f]
        assert order == sorted(order)  # FIFO per flow
    assert released != sorted(released)  # but flows move independently
    dues = []
    s2 = Scheduler(random.Random(2))
    for i in range(500):
        dues.append(s2.due_time(i * 1.0, mark, bytes([i % 256, i // 256])) - i * 1.0)
    assert 0.015 <= min(dues) < 0.016 and 0.024 < max(dues) <= 0.025


def test_the_kernels_queue_list_is_parsed():
    text = f"{QUEUE:5d}  1234     3 2    64     7     1     9876  1\n    1  55  0 2 65531 0 0 0 1\n"
    q = parse_queues(text)[QUEUE]
    assert (q.queued, q.dropped, q.user_dropped, q.total) == (3, 7, 1, 9876)
    assert set(parse_queues(text)) == {QUEUE, 1}
