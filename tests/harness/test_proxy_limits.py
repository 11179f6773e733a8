"""The proxy's limits: a connection holding more than its limit across a cut
is reset (both ends see it at once) instead of hanging, and a delay that is
not a finite, bounded number of milliseconds (Infinity, NaN, negative) is
refused instead of stalling the link."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.runtimes.local import allocate_ports
from harness.runtimes.proxy import ProxyControl
from reference_impl.server import auth

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def link(tmp_path):
    """Link a->b to a sink that accepts and never reads much."""
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen()
    la, ctl = allocate_ports(2)
    f = tmp_path / "links.json"
    f.write_text(json.dumps([{"src": "a", "dst": "b", "listen": la, "target": sink.getsockname()[1]}]))
    secret = auth.make_secret_file(str(tmp_path / "cluster.secret"))
    p = subprocess.Popen([sys.executable, "-m", "harness.runtimes.proxy", "--links", str(f), "--control-port", str(ctl),
                          "--max-held", str(1 << 20), "--secret-file", secret], stdout=subprocess.PIPE, cwd=ROOT)
    control = ProxyControl(json.loads(p.stdout.readline())["control"], secret=auth.load_secret(secret))
    yield la, control, sink
    control.close()
    p.kill()
    p.wait()
    p.stdout.close()
    sink.close()


def test_over_limit_connection_across_a_cut_is_reset_not_left_hanging(link):
    port, control, sink = link
    c = socket.create_connection(("127.0.0.1", port))
    server_side, _ = sink.accept()
    control.call(cmd="cut", pairs=[["a", "b"]])
    c.settimeout(10)
    t0 = time.monotonic()
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        for _ in range(64):  # 4 MiB into a 1 MiB hold limit
            c.sendall(b"x" * 65536)
        while c.recv(65536):
            pass
        raise ConnectionResetError("closed without a reset")  # EOF counts too, but only after the limit
    assert time.monotonic() - t0 < 10
    server_side.settimeout(5)
    with pytest.raises((ConnectionResetError, OSError)):
        while server_side.recv(65536):
            pass
        raise ConnectionResetError("closed")
    assert control.call(cmd="stats")["links"]["a->b"]["resets"] == 1
    c.close()
    server_side.close()


@pytest.mark.parametrize("ms", [float("inf"), float("nan"), -5, 1e12])
def test_delay_that_is_not_a_finite_bounded_time_is_refused(link, ms):
    _, control, _ = link
    with pytest.raises(RuntimeError, match="finite"):
        control.call(cmd="delay", ms=ms)
    assert control.call(cmd="stats")["delay"] == {}


def test_delay_jitter_infinity_is_refused(link):
    _, control, _ = link
    with pytest.raises(RuntimeError, match="finite"):
        control.call(cmd="delay", ms=10, jitter=float("inf"))


def test_proxy_control_needs_the_cluster_token(tmp_path):
    """A forged cut/heal/delay from another local caller is refused."""
    secret_file = auth.make_secret_file(str(tmp_path / "secret"))
    la, ctl = allocate_ports(2)
    f = tmp_path / "links.json"
    f.write_text(json.dumps([{"src": "a", "dst": "b", "listen": la, "target": 1}]))
    p = subprocess.Popen([sys.executable, "-m", "harness.runtimes.proxy", "--links", str(f), "--control-port", str(ctl),
                          "--secret-file", secret_file], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        port = json.loads(p.stdout.readline())["control"]
        forged = ProxyControl(port)
        with pytest.raises(RuntimeError, match="token"):
            forged.call(cmd="cut", pairs=[["a", "b"]])
        forged.close()
        ours = ProxyControl(port, secret=auth.load_secret(secret_file))
        assert ours.call(cmd="stats")["cut"] == []
        ours.close()
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
