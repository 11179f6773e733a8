"""``kraftwerk node`` / ``kraftwerk cluster``: bad flags and config give one
clean line and exit 2 (CLI contract), before anything starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.cli.node import build_options, parse_quorum, read_properties
from harness.errors import UsageError
from reference_impl.server.auth import make_secret_file


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--roles", "broker,zookeeper"], "--roles"),
        (["--listen", "nohostport"], "--listen"),
        (["--controller-quorum", "1@127.0.0.1"], "controller quorum"),
        (["--controller-quorum", "x@127.0.0.1:9"], "controller quorum"),
        (["--set", "replica.lag.time.max.ms=soon"], "not an integer"),
        (["--set", "no.such.key=1"], "unknown config key"),
        (["--set", "variant.kip101=maybe"], "variant"),
        (["--config", "/nonexistent/server.properties"], "cannot read config"),
        (["--set", "max.connections.per.ip=none"], "max.connections.per.ip"),
        (["--set", "queued.max.request.bytes=1000"], "queued.max.request.bytes must be at least"),
        (["--set", "max.connections.per.ip.overrides=127.0.0.2"], "HOST:COUNT"),
        (["--set", "socket.request.read.timeout.ms=0"], "must be positive"),
        (["--control", "127.0.0.1:19998"], "--control needs --secret-file"),
    ],
)
def test_node_bad_flags_exit_2_with_one_line(tmp_path, args, needle):
    base = {"--id": "1", "--roles": "broker,controller", "--listen": "127.0.0.1:19999",
            "--controller-quorum": "1@127.0.0.1:19999", "--data-dir": str(tmp_path / "d")}
    flat: list[str] = []
    over = dict(zip(args[::2], args[1::2]))
    for k, v in {**base, **over}.items():
        flat += [k, v]
    r = _run("node", *flat)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_controller_role_requires_membership_in_the_quorum(tmp_path):
    with pytest.raises(UsageError):
        build_options(5, "controller", "127.0.0.1:1", "1@127.0.0.1:1", str(tmp_path), None, None, None)
    with pytest.raises(UsageError):
        build_options(1, "broker", "127.0.0.1:1", "1@127.0.0.1:1", str(tmp_path), None, None, None)


def test_server_properties_file_feeds_protocol_config_runtime_keys_and_variants(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\nmin.insync.replicas=2\nreplica_lag_time_max_ms = 5000\nstorage.mode=memory-cache\n"
                 "variant.kip966=off\nlog.segment.bytes=4096\n")
    assert read_properties(str(f))["min.insync.replicas"] == "2"
    secret = make_secret_file(str(tmp_path / "secret"))
    o = build_options(1, "broker,controller", "127.0.0.1:1", "1@127.0.0.1:1", str(tmp_path / "d"), str(f), "127.0.0.1:2", None,
                      secret_file=secret)
    assert o.config.min_insync_replicas == 2 and o.config.replica_lag_time_max_ms == 5000
    assert o.config.variants.kip966 is False
    assert (o.storage_mode, o.segment_bytes, o.control) == ("memory-cache", 4096, ("127.0.0.1", 2))


def test_connection_bounds_are_read_under_kafkas_names(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("socket.request.max.bytes=2000000\nqueued.max.request.bytes=3000000\nmax.connections=50\n"
                 "max.connections.per.ip=7\nmax.connections.per.ip.overrides=127.0.0.2:9,localhost:11\n"
                 "connections.max.idle.ms=1234\nconnections.handshake.timeout.ms=99\n"
                 "socket.request.read.timeout.ms=98\nsocket.listen.backlog.size=17\n")
    lim = build_options(1, "broker,controller", "127.0.0.1:1", "1@127.0.0.1:1", str(tmp_path / "d"), str(f), None,
                        None).limits
    assert (lim.max_request_bytes, lim.queued_max_request_bytes, lim.max_connections, lim.idle_ms) == \
        (2_000_000, 3_000_000, 50, 1234)
    assert (lim.handshake_timeout_ms, lim.request_read_timeout_ms, lim.listen_backlog) == (99, 98, 17)
    assert (lim.max_for("127.0.0.3"), lim.max_for("127.0.0.2"), lim.max_for("127.0.0.1")) == (7, 9, 11)


def test_a_host_address_is_accepted_only_with_allow_non_loopback(tmp_path):
    """What the real-host backends do: a node on its host's address, with the flag."""
    far = "10.9.8.7"  # never bound here: build_options only checks
    with pytest.raises(UsageError, match="--allow-non-loopback"):
        build_options(1, "broker,controller", f"{far}:1", f"1@{far}:1", str(tmp_path / "d"), None, None, None)
    o = build_options(1, "broker,controller", f"{far}:1", f"1@{far}:1", str(tmp_path / "d"), None, None, None,
                      allow_non_loopback=True)
    assert o.allow_non_loopback and o.listen == (far, 1)


def test_quorum_parsing_rejects_duplicates():
    assert parse_quorum("1@a:1,2@b:2") == {1: ("a", 1), 2: ("b", 2)}
    with pytest.raises(UsageError):
        parse_quorum("1@a:1,1@b:2")


def test_cluster_status_without_cluster_exits_2(tmp_path):
    r = _run("cluster", "status", "--dir", str(tmp_path))
    assert r.returncode == 2 and "no cluster" in r.stderr and "Traceback" not in r.stderr


def test_cluster_up_rejects_bad_counts(tmp_path):
    r = _run("cluster", "up", "--dir", str(tmp_path), "--brokers", "0")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.integration
def test_cluster_up_status_down_round_trip(tmp_path):
    import json

    d = str(tmp_path / "c")
    r = _run("cluster", "up", "--dir", d, "--brokers", "1", "--controllers", "1", "--combined", "--base-port", "0")
    assert r.returncode == 0, r.stderr
    try:
        [port] = [n["port"] for n in json.loads((tmp_path / "c" / "cluster.json").read_text())["nodes"]]
        assert r.stdout.strip() == f"127.0.0.1:{port}"
        again = _run("cluster", "up", "--dir", d, "--brokers", "1", "--controllers", "1", "--base-port", "0")
        assert again.returncode == 2 and "already running" in again.stderr
        st = _run("cluster", "status", "--dir", d, "--json")
        assert st.returncode == 0
        [node] = json.loads(st.stdout)["nodes"]
        assert node["alive"] and node["roles"] == ["broker", "controller"] and node["raft"]["role"] == "leader"
    finally:
        down = _run("cluster", "down", "--dir", d)
    assert down.returncode == 0 and "node 1: stopped" in down.stdout
    st = json.loads(_run("cluster", "status", "--dir", d, "--json").stdout)
    assert not st["nodes"][0]["alive"]


def test_a_planned_clusters_node_directories_have_the_run_directories_names(tmp_path):
    """``kraftwerk cluster`` lays nodes out as a run directory does and names
    and numbers them alike (reference_impl/server/layout.py): ``nodes/n1``..
    the brokers with ids 1.. (every node of a combined cluster), ``nodes/c1``..
    the dedicated controllers with ids 101.."""
    from pathlib import Path

    from reference_impl.server.launcher import LocalCluster

    sep = LocalCluster.plan(str(tmp_path / "s"), 3, 3, 0)
    assert {(n.node_id, n.name, Path(n.data_dir).name) for n in sep.nodes} == {
        (1, "n1", "n1"), (2, "n2", "n2"), (3, "n3", "n3"), (101, "c1", "c1"), (102, "c2", "c2"), (103, "c3", "c3")}
    assert {Path(n.data_dir).parent for n in sep.nodes} == {tmp_path / "s" / "nodes"}
    combined = LocalCluster.plan(str(tmp_path / "c"), 2, 3, 0, combined=True)
    assert [Path(n.data_dir).name for n in combined.nodes] == ["n1", "n2", "n3"]
