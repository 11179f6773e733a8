"""Nobody but the cluster gets in: a node started with the cluster secret
answers its control endpoint only to callers presenting its token (401
otherwise, and nothing is done), closes an internal-RPC connection whose hello
lacks the RPC token before reading any message (a forged vote cannot push the
quorum epoch), refuses --listen/--control on any address that is not
loopback unless asked, however it is spelled, and runs no control endpoint
without the secret."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from reference_impl.core import messages as m
from reference_impl.server import auth
from reference_impl.server.addresses import AddressError
from reference_impl.server.codec import FRAME, REGISTRY
from reference_impl.server.launcher import LocalCluster
from reference_impl.server.rpc import MAGIC
from reference_impl.server.runtime import NodeOptions, NodeRuntime

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
    base = 25000 + (os.getpid() % 200) * 10
    c = LocalCluster.plan(str(tmp_path_factory.mktemp("auth")), 1, 1, base, combined=True)
    c.up(60)
    yield c
    c.down(20)


def _raw(c: LocalCluster, method: str, path: str, headers: dict | None = None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{c.nodes[0].control_port}{path}", method=method,
                                 data=b"{}" if method == "POST" else None, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_secret_file_is_owner_only(one_node):
    assert stat.S_IMODE(os.stat(one_node.secret_path).st_mode) == 0o600


@pytest.mark.parametrize("path", ["/shutdown", "/clock", "/power-loss"])
def test_forged_control_call_is_refused_and_does_nothing(one_node, path):
    assert _raw(one_node, "POST", path) == 401
    assert _raw(one_node, "POST", path, {"Authorization": "Bearer " + "0" * 64}) == 401
    assert _raw(one_node, "GET", "/status") == 401
    st = one_node.control(1, "GET", "/status")  # the cluster's own caller
    assert st["shutting_down"] is False and st["clock_offset_ms"] == 0


def test_forged_rpc_vote_cannot_move_the_quorum_epoch(one_node):
    before = one_node.control(1, "GET", "/status")
    hello = REGISTRY.dumps((2, "127.0.0.1", 1))
    vote = REGISTRY.dumps((2, m.VoteRequest(2, 1_000_000, 1_000_000, 10**9)))
    with socket.create_connection(("127.0.0.1", one_node.nodes[0].port), timeout=5) as s:
        s.sendall(MAGIC + FRAME.pack(len(hello)) + hello + FRAME.pack(len(vote)) + vote)
        s.settimeout(5)
        try:
            assert s.recv(1) == b""  # closed on us
        except ConnectionResetError:
            pass
    time.sleep(0.5)
    after = one_node.control(1, "GET", "/status")
    assert after["raft"].get("epoch", 0) == before["raft"].get("epoch", 0) < 1000
    assert after["counters"].get("bad_rpc_frames", 0) >= 1


def _node_cli(tmp_path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    cli = [*prefix, sys.executable, "-c", "from harness.cli import main; main()", "node", "--id", "1",
           "--controller-quorum", "1@127.0.0.1:1", "--data-dir", str(tmp_path / "d"), *args]
    return subprocess.run(cli, capture_output=True, text=True, timeout=60, cwd=ROOT)


def _one_line(r: subprocess.CompletedProcess, *words: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert all(w in lines[0] for w in words), lines[0]


@pytest.mark.parametrize("host", ["0", "0.0.0.0", "::", "::0", "[::]", "0000::", "0.0", "0x0", "10.9.8.7"])
def test_a_listen_address_that_is_not_loopback_is_refused_in_one_line_however_spelled(tmp_path, host):
    _one_line(_node_cli(tmp_path, "--listen", f"{host}:1"), "--listen", "not a loopback address",
              "--allow-non-loopback")


def test_a_control_address_that_is_not_loopback_is_refused(tmp_path):
    secret = auth.make_secret_file(str(tmp_path / "s"))
    _one_line(_node_cli(tmp_path, "--listen", "127.0.0.1:1", "--control", "0:2", "--secret-file", secret),
              "--control", "--allow-non-loopback")


def test_a_host_name_is_judged_by_the_addresses_it_resolves_to(tmp_path):
    """A name for a far address is refused like the address: resolved in a
    mount namespace of its own whose /etc/hosts says so (nothing outside it
    sees that file)."""
    hosts = tmp_path / "hosts"
    hosts.write_text("10.9.8.7 kw-far-away\n127.0.0.1 localhost\n")
    unshare = ("unshare", "-m", "sh", "-c", f'mount --bind {hosts} /etc/hosts && exec "$@"', "sh")
    _one_line(_node_cli(tmp_path, "--listen", "kw-far-away:1", prefix=unshare), "kw-far-away", "10.9.8.7",
              "--allow-non-loopback")


def test_a_control_endpoint_never_runs_without_the_secret(tmp_path):
    _one_line(_node_cli(tmp_path, "--listen", "127.0.0.1:1", "--control", "127.0.0.1:2"), "--secret-file")


def test_a_secret_file_readable_by_others_is_refused(tmp_path):
    f = tmp_path / "s"
    f.write_text("x" * 64)
    os.chmod(f, 0o644)
    with pytest.raises(auth.SecretError):
        auth.load_secret(str(f))


@pytest.mark.parametrize("listen,control", [(("0.0.0.0", 1), None), (("127.0.0.1", 1), ("::", 2)),
                                            (("127.0.0.1", 1), ("127.0.0.1", 2))])
def test_the_runtime_itself_refuses_before_it_reads_or_writes_anything(tmp_path, listen, control):
    """Whoever builds NodeOptions without the CLI meets the same rules: no
    address that is not loopback unless allowed, no control endpoint without
    the secret; the refusal comes before the data directory is touched."""
    d = tmp_path / "d"
    d.mkdir()
    opts = NodeOptions(1, frozenset({"broker", "controller"}), listen, {1: ("127.0.0.1", 1)}, str(d), control=control)
    with pytest.raises(AddressError):
        asyncio.run(NodeRuntime(opts).run())
    assert list(d.iterdir()) == []
