"""The kernel's packet queue (``iptables -j NFQUEUE``) spoken over netlink.

A packet an ``NFQUEUE`` rule matches is held by the kernel until the
process bound to that queue number (in the same network namespace) answers
with a verdict. This module is that process's side of the protocol, in the
standard library only: a ``socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)``
and the nfnetlink_queue messages of ``linux/netfilter/nfnetlink_queue.h``
(subsystem 3: PACKET 0, VERDICT 1, CONFIG 2). No C library is needed, so the
delayer runs wherever the project's Python runs: a namespace, a container
with the host's ``/usr``, a bare ssh host that has only the project's wheel.

Message encoding and decoding are pure functions (``config_message``,
``verdict_message``, ``parse_packets``) so they are tested without root; the
:class:`PacketQueue` socket needs CAP_NET_ADMIN in its namespace.

Only what the delayer needs is asked of the kernel: packet metadata and the
first ``copy_range`` bytes (enough for the IPv4 and TCP/UDP headers that name
a flow), GSO packets queued whole (``NFQA_CFG_F_GSO``: a 64 kB TCP segment is
one verdict, not forty), and verdicts only ever ACCEPT with the mark reset.
"""

from __future__ import annotations

import errno
import socket
import struct
from dataclasses import dataclass
from typing import Iterable, Iterator

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NLMSG_ERROR = 2
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NFNETLINK_V0 = 0

# config attributes and values
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_CFG_CMD_UNBIND = 2
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_GSO = 0x4

# packet and verdict attributes
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_MARK = 3
NFQA_PAYLOAD = 10
NF_ACCEPT = 1

#: netfilter hook numbers (``nfqnl_msg_packet_hdr.hook``)
HOOK_INPUT = 1
HOOK_OUTPUT = 3

_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, portid (host order)
_NFGEN = struct.Struct("!BBH")  # family, version, res_id (network order)
_ATTR = struct.Struct("=HH")  # nla_len, nla_type (host order)
_PKT_HDR = struct.Struct("!IHB")  # packet_id, hw_protocol, hook
_VERDICT_HDR = struct.Struct("!II")  # verdict, id
_NLA_TYPE_MASK = 0x3FFF


class QueueError(OSError):
    """The kernel refused a queue command (another process holds the queue,
    no CAP_NET_ADMIN, no nfnetlink_queue in this kernel)."""


@dataclass(frozen=True)
class Packet:
    """One queued packet as the kernel reported it."""

    packet_id: int
    hook: int
    mark: int
    head: bytes  # the first copy_range bytes of the network header on


def _attr(kind: int, payload: bytes) -> bytes:
    pad = (-len(payload)) % 4
    return _ATTR.pack(_ATTR.size + len(payload), kind) + payload + b"\0" * pad


def _message(msg: int, queue: int, attrs: bytes, seq: int, flags: int = NLM_F_REQUEST) -> bytes:
    body = _NFGEN.pack(socket.AF_UNSPEC, NFNETLINK_V0, queue) + attrs
    return _NLMSG.pack(_NLMSG.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def config_message(queue: int, seq: int, *, bind: bool = True, copy_range: int = 64,
                   maxlen: int = 4096, flags: int = NFQA_CFG_F_GSO) -> bytes:
    """BIND (with copy mode, queue length and flags) or UNBIND of ``queue``,
    asking for an acknowledgement."""
    cmd = NFQNL_CFG_CMD_BIND if bind else NFQNL_CFG_CMD_UNBIND
    attrs = _attr(NFQA_CFG_CMD, struct.pack("!BxH", cmd, socket.AF_INET))
    if bind:
        attrs += _attr(NFQA_CFG_PARAMS, struct.pack("!IB", copy_range, NFQNL_COPY_PACKET))
        attrs += _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen))
        attrs += _attr(NFQA_CFG_FLAGS, struct.pack("!I", flags))
        attrs += _attr(NFQA_CFG_MASK, struct.pack("!I", flags))
    return _message(NFQNL_MSG_CONFIG, queue, attrs, seq, NLM_F_REQUEST | NLM_F_ACK)


def verdict_message(queue: int, packet_id: int, mark: int | None = 0) -> bytes:
    """ACCEPT for one packet; ``mark`` (unless None) replaces its mark."""
    attrs = _attr(NFQA_VERDICT_HDR, _VERDICT_HDR.pack(NF_ACCEPT, packet_id))
    if mark is not None:
        attrs += _attr(NFQA_MARK, struct.pack("!I", mark))
    return _message(NFQNL_MSG_VERDICT, queue, attrs, 0)


def _attrs(data: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    pos = start
    while pos + _ATTR.size <= end:
        length, kind = _ATTR.unpack_from(data, pos)
        if length < _ATTR.size:
            break
        yield kind & _NLA_TYPE_MASK, data[pos + _ATTR.size:pos + length]
        pos += (length + 3) & ~3


def parse_packets(data: bytes) -> Iterator[Packet]:
    """The queued packets in one netlink read; errors (an ACK with a
    failure) raise :class:`QueueError`, anything else is passed over."""
    pos = 0
    while pos + _NLMSG.size <= len(data):
        length, kind, _, _, _ = _NLMSG.unpack_from(data, pos)
        if length < _NLMSG.size or pos + length > len(data):
            break
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", data, pos + _NLMSG.size)
            if code:
                raise QueueError(-code, f"nfnetlink_queue: {errno.errorcode.get(-code, -code)}")
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            pid = hook = mark = 0
            head = b""
            for akind, value in _attrs(data, pos + _NLMSG.size + _NFGEN.size, pos + length):
                if akind == NFQA_PACKET_HDR:
                    pid, _, hook = _PKT_HDR.unpack_from(value)
                elif akind == NFQA_MARK:
                    (mark,) = struct.unpack("!I", value[:4])
                elif akind == NFQA_PAYLOAD:
                    head = bytes(value)
            yield Packet(pid, hook, mark, head)
        pos += (length + 3) & ~3


def flow_of(head: bytes) -> bytes:
    """A flow's key from an IPv4 header and the ports after it (protocol,
    addresses, ports); packets of one key are released in arrival order.
    Anything else (a fragment, IPv6, a truncated head) is one flow per
    first 40 bytes' addresses, which is only ever stricter."""
    if len(head) >= 20 and head[0] >> 4 == 4:
        ihl = (head[0] & 0x0F) * 4
        return head[9:10] + head[12:20] + head[ihl:ihl + 4]
    return head[:40]


class PacketQueue:
    """A bound queue in this process's network namespace."""

    def __init__(self, queue: int, maxlen: int = 4096, rcvbuf: int = 8 << 20) -> None:
        self.queue = queue
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, rcvbuf)  # SO_RCVBUFFORCE (root): beyond rmem_max
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(270, 5, 1)  # SOL_NETLINK, NETLINK_NO_ENOBUFS: a full buffer is not an error
        self.sock.bind((0, 0))
        self._seq = 0
        self._command(config_message(queue, self._next(), maxlen=maxlen))

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _command(self, msg: bytes) -> None:
        """Send one config message and wait for its acknowledgement."""
        self.sock.send(msg)
        (_, _, _, seq, _) = _NLMSG.unpack_from(msg)
        while True:
            data = self.sock.recv(65536)
            pos = 0
            while pos + _NLMSG.size <= len(data):
                length, kind, _, got, _ = _NLMSG.unpack_from(data, pos)
                if kind == NLMSG_ERROR and got == seq:
                    (code,) = struct.unpack_from("=i", data, pos + _NLMSG.size)
                    if code:
                        raise QueueError(-code, f"queue {self.queue}: {errno.errorcode.get(-code, -code)}")
                    return
                pos += max((length + 3) & ~3, _NLMSG.size)

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self, limit: int = 256) -> list[Packet]:
        """Every packet waiting now (at most ``limit`` reads), without blocking."""
        out: list[Packet] = []
        for _ in range(limit):
            try:
                data = self.sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            out.extend(parse_packets(data))
        return out

    def accept(self, packet_ids: Iterable[int]) -> None:
        """ACCEPT these packets (mark reset), in one write."""
        batch = b"".join(verdict_message(self.queue, i) for i in packet_ids)
        if batch:
            self.sock.send(batch)

    def close(self) -> None:
        try:
            self._command(config_message(self.queue, self._next(), bind=False))
        except OSError:
            pass
        self.sock.close()
