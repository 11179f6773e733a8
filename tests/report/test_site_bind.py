"""``kraftwerk serve`` resolves ``--host`` once: the addresses the loopback
rule checked are the ones bound (every one of them, on one port) and the
ones the Host check answers to; nothing resolves the name again."""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.site.app import allowed_hosts
from harness.site.listen import listen_sockets
from reference_impl.server.addresses import bind_addresses

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def _closed(socks: list[socket.socket]) -> None:
    for s in socks:
        s.close()


def test_serve_binds_exactly_the_addresses_it_checked():
    ips = bind_addresses("localhost", 0)
    socks = listen_sockets(ips, 0)
    try:
        assert [s.getsockname()[0] for s in socks] == ips
        assert len({s.getsockname()[1] for s in socks}) == 1
    finally:
        _closed(socks)


def test_two_addresses_listen_on_one_port_and_ipv6_takes_ipv6_only():
    socks = listen_sockets(["127.0.0.1", "::1"], 0)
    try:
        v4, v6 = socks
        port = v4.getsockname()[1]
        assert v6.getsockname()[1] == port
        assert v6.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1
        for fam, ip in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(fam) as c:
                c.connect((ip, port))
    finally:
        _closed(socks)


def test_a_port_in_use_is_one_line_and_leaves_no_socket_open():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UsageError, match=rf"^cannot listen on 127\.0\.0\.1:{port}: ") as e:
            listen_sockets(["::1", "127.0.0.1"], port)
        assert "\n" not in str(e.value)
    socks = listen_sockets(["::1"], port)  # the ::1 socket of the failed try was closed
    _closed(socks)


def test_the_host_check_answers_the_bound_addresses_without_a_new_lookup():
    names = allowed_hosts("kw-never-resolved.invalid", ["127.0.0.2"])
    assert "127.0.0.2" in names and "kw-never-resolved.invalid" in names
    assert "0.0.0.0" not in names and socket.gethostname().lower() not in names


def test_kraftwerk_serve_prints_and_answers_on_the_address_it_checked(tmp_path):
    p = subprocess.Popen(CLI + ["serve", "--out", str(tmp_path), "--host", "localhost", "--port", "0"],
                         stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = p.stderr.readline()
        m = re.search(r" at (http://\S+:(\d+)/(?:, \S+)*) \(Ctrl-C stops\)$", line.strip())
        assert m, line
        port, ips = int(m.group(2)), bind_addresses("localhost", 0)
        assert m.group(1).split(", ") == [f"http://{f'[{ip}]' if ':' in ip else ip}:{port}/" for ip in ips]
        deadline = time.monotonic() + 30
        while True:
            try:
                c = http.client.HTTPConnection(ips[0], port, timeout=10)
                c.request("GET", "/", headers={"Host": f"localhost:{port}"})
                assert c.getresponse().status == 200
                c.close()
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        c = http.client.HTTPConnection(ips[0], port, timeout=10)
        c.request("GET", "/", headers={"Host": "attacker.example"})
        assert c.getresponse().status == 400
        c.close()
    finally:
        p.terminate()
        p.wait(timeout=30)
        p.stderr.close()
