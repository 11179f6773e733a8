"""The link proxy, against plain TCP echo servers: traffic passes, a directed
cut holds bytes (never drops them mid-stream) until the heal, a connection
across a cut hangs until the heal, latency delays delivery, and the real
proxy process is controlled over its control port."""

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.runtimes.local import allocate_ports
from harness.runtimes.proxy import ProxyControl
from reference_impl.server import auth

ROOT = Path(__file__).resolve().parents[2]


class EchoServer:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.received = bytearray()  # every byte that reached this server
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(c,), daemon=True).start()

    def _echo(self, c):
        with c:
            while data := c.recv(65536):
                self.received += data
                c.sendall(data)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.sock.close()


@pytest.fixture
def proxy(tmp_path):
    """Links a->b and b->a in front of one echo server each, run as the real
    proxy process."""
    ea, eb = EchoServer(), EchoServer()
    la, lb, ctl = allocate_ports(3)
    links = [
        {"src": "a", "dst": "b", "listen": la, "target": eb.port},
        {"src": "b", "dst": "a", "listen": lb, "target": ea.port},
    ]
    f = tmp_path / "links.json"
    f.write_text(json.dumps(links))
    secret = auth.make_secret_file(str(tmp_path / "cluster.secret"))
    p = subprocess.Popen([sys.executable, "-m", "harness.runtimes.proxy", "--links", str(f), "--control-port", str(ctl),
                          "--secret-file", secret], stdout=subprocess.PIPE, cwd=ROOT)
    ready = json.loads(p.stdout.readline())
    control = ProxyControl(ready["control"], secret=auth.load_secret(secret))
    yield {"a->b": la, "b->a": lb, "control": control, "echo_a": ea, "echo_b": eb}
    control.close()
    p.kill()
    p.wait()
    p.stdout.close()
    ea.close()
    eb.close()


def roundtrip(sock, payload, timeout=2.0):
    sock.settimeout(timeout)
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_traffic_passes_through_a_link(proxy):
    with socket.create_connection(("127.0.0.1", proxy["a->b"])) as s:
        assert roundtrip(s, b"hello" * 1000) == b"hello" * 1000
    st = proxy["control"].call(cmd="stats")
    assert st["links"]["a->b"]["bytes"] >= 10000


def test_one_way_cut_holds_bytes_until_heal_without_loss(proxy):
    ctl = proxy["control"]
    with socket.create_connection(("127.0.0.1", proxy["a->b"])) as s:
        assert roundtrip(s, b"x") == b"x"
        ctl.call(cmd="cut", pairs=[["b", "a"]])  # replies from b to a are dropped
        s.settimeout(0.5)
        s.sendall(b"during-cut")
        with pytest.raises(socket.timeout):
            s.recv(100)
        ctl.call(cmd="cut", pairs=[])
        s.settimeout(2)
        got = b""
        while len(got) < len(b"during-cut"):
            got += s.recv(100)
        assert got == b"during-cut"  # held, then delivered in order: no corrupted stream


def wait_until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.01)
    return pred()


def test_cut_is_directed(proxy):
    """A cut of a->b holds every byte a sends to b, on a's connections to b
    and on b's connections to a (a's replies), while b's bytes still reach
    a; the heal delivers what was held."""
    ctl = proxy["control"]
    ea, eb = proxy["echo_a"], proxy["echo_b"]
    with socket.create_connection(("127.0.0.1", proxy["a->b"])) as ab, \
            socket.create_connection(("127.0.0.1", proxy["b->a"])) as ba:
        assert roundtrip(ab, b"1") == b"1" and roundtrip(ba, b"2") == b"2"
        ctl.call(cmd="cut", pairs=[["a", "b"]])
        assert ctl.call(cmd="stats")["cut"] == [["a", "b"]]
        ab.sendall(b"from-a")
        ba.sendall(b"from-b")
        assert wait_until(lambda: bytes(ea.received).endswith(b"from-b"))  # b -> a passes
        for s in (ab, ba):  # a's request to b, and a's reply to b, are held
            s.settimeout(0.3)
            with pytest.raises(socket.timeout):
                s.recv(100)
        assert not bytes(eb.received).endswith(b"from-a")
        ctl.call(cmd="heal")
        assert ctl.call(cmd="stats")["cut"] == []
        ab.settimeout(5)
        ba.settimeout(5)
        assert ab.recv(100) == b"from-a" and ba.recv(100) == b"from-b"
        assert bytes(eb.received).endswith(b"from-a")


def test_new_connection_across_a_cut_hangs_until_heal(proxy):
    ctl = proxy["control"]
    before = proxy["echo_b"].accepted
    ctl.call(cmd="cut", pairs=[["a", "b"], ["b", "a"]])
    with socket.create_connection(("127.0.0.1", proxy["a->b"])) as s:
        s.settimeout(0.5)
        s.sendall(b"ping")
        with pytest.raises(socket.timeout):
            s.recv(10)
        assert proxy["echo_b"].accepted == before  # never reached the target
        ctl.call(cmd="heal")
        s.settimeout(2)
        assert s.recv(10) == b"ping"


def test_latency_delays_each_chunk(proxy):
    ctl = proxy["control"]
    with socket.create_connection(("127.0.0.1", proxy["a->b"])) as s:
        roundtrip(s, b"warm")
        ctl.call(cmd="delay", ms=150, links=["a->b"])
        t0 = time.monotonic()
        assert roundtrip(s, b"slow") == b"slow"
        assert time.monotonic() - t0 >= 0.14
        ctl.call(cmd="delay", ms=0, links=["a->b"])
        assert "a->b" not in ctl.call(cmd="stats")["delay"]  # how fast it then is: bench/harness_overhead.py
        assert roundtrip(s, b"fast") == b"fast"


def test_target_down_refuses_like_a_direct_connection(proxy):
    proxy["echo_b"].close()
    with socket.create_connection(("127.0.0.1", proxy["a->b"])) as s:
        s.settimeout(2)
        assert s.recv(10) == b""  # closed at once, not a hang


def test_port_in_use_is_a_usage_error():
    from harness.errors import UsageError

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    port = busy.getsockname()[1]
    try:
        with pytest.raises(UsageError, match=f"port {port} .* in use"):
            allocate_ports(3, base=port)
    finally:
        busy.close()
