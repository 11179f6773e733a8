"""Internal RPC on real loopback sockets, served by the node's own listener
(reference_impl/server/listener.py): one outbound connection per peer,
reconnect with backoff, queued messages delivered once connected, stale ones
expired after the request timeout, malformed frames rejected."""

from __future__ import annotations

import asyncio
import collections
import struct
import time

import pytest

from reference_impl.core import messages as m
from reference_impl.server.codec import REGISTRY
from reference_impl.server.limits import Limits
from reference_impl.server.listener import Listener
from reference_impl.server.rpc import MAGIC, Peer, PeerInbound
from reference_impl.server.ports import free_ports


async def _serve(port: int, got: list, hellos: list, errors: list) -> Listener:
    def no_clients(conn):
        raise AssertionError("only peers connect here")

    listener = Listener(Limits(), no_clients, lambda conn: PeerInbound(
        lambda *h: hellos.append(h), lambda src, msg: got.append((src, msg)), errors.append), collections.Counter())
    await listener.start(["127.0.0.1"], port)
    return listener


def test_peer_reconnects_when_the_listener_appears_and_delivers_queued_messages_in_order():
    async def main():
        port = free_ports(1)[0]
        got: list = []
        hellos: list = []
        peer = Peer(7, ("127.0.0.1", 1), 9, lambda nid: ("127.0.0.1", port), request_timeout_ms=30000)
        peer.start()
        for i in range(5):
            peer.send(m.VoteRequest(7, i, 0, 0))
        await asyncio.sleep(0.3)  # nobody listening yet: backoff
        server = await _serve(port, got, hellos, [])
        deadline = time.monotonic() + 5
        while len(got) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await peer.close()
        server.close()
        return got, hellos

    got, hellos = asyncio.run(main())
    assert hellos == [(7, "127.0.0.1", 1)]
    assert [msg.candidate_epoch for _, msg in got] == [0, 1, 2, 3, 4]
    assert all(src == 7 for src, _ in got)


def test_messages_waiting_longer_than_the_request_timeout_are_dropped():
    async def main():
        port = free_ports(1)[0]
        got: list = []
        peer = Peer(1, ("127.0.0.1", 1), 2, lambda nid: ("127.0.0.1", port), request_timeout_ms=100)
        peer.start()
        peer.send(m.BeginQuorumEpochRequest(1, 3))
        await asyncio.sleep(0.5)
        server = await _serve(port, got, [], [])
        deadline = time.monotonic() + 5
        while not peer.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        peer.send(m.BeginQuorumEpochRequest(1, 4))
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        await peer.close()
        server.close()
        return got, peer.dropped

    got, dropped = asyncio.run(main())
    assert [msg.leader_epoch for _, msg in got] == [4]
    assert dropped == 1


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">I", 2**31) + b"x",  # oversized length
        struct.pack(">I", 3) + b"\xc1\xc1\xc1",  # not msgpack
        struct.pack(">I", 1) + b"\x05",  # a bare int, not a hello
    ],
)
def test_malformed_peer_frames_are_rejected_not_crashing(payload):
    async def main():
        port = free_ports(1)[0]
        errors: list = []
        server = await _serve(port, [], [], errors)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(MAGIC + payload)
        await w.drain()
        await asyncio.wait_for(r.read(), 5)  # the server closes the connection
        w.close()
        server.close()
        return errors

    assert len(asyncio.run(main())) == 1


def test_hello_then_message_frames_round_trip_through_the_registry():
    hello = REGISTRY.dumps((3, "127.0.0.1", 9092))
    assert REGISTRY.loads(hello) == (3, "127.0.0.1", 9092)
