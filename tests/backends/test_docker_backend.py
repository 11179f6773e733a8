"""The docker backend: a grudge made by iptables inside the containers cuts
exactly its links (node to node, client to node) and heal restores them;
SIGKILL of the harness mid-run leaves, 90 s later and with no ``kraftwerk
cleanup`` run, no container, network or process of the run (its reaper
undoes them: harness/rundir/state.py ``reap``; harness/runtimes/docker.py).
The engine is the project's own when none runs; a test that started it
stops it."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.runtimes import docker as kwdocker
from harness.runtimes.net.iptables import IptablesNetwork
from harness.runtimes.net.latency import Delayers
from reference_impl.server.procs import alive
from harness.runtimes.net.netns import OWNER_DIR

from nemesis.control import Network, Remote

from .conftest import needs_root_net
from .probe import CLIENT, Prober, all_links
from tests.docker_engine import shared_engine

from .test_netns_latency import LISTENER, PORT, connect_ms, undelayed

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]
NODES = ["n1", "n2", "n3"]


@pytest.fixture(scope="module")
def engine():
    needs_root_net()
    with shared_engine() as client:
        yield client


def labelled(client, tag):
    f = {"label": f"kraftwerk.tag={tag}"}
    return client.containers.list(all=True, filters=f) + client.networks.list(filters=f)


def test_a_grudge_inside_containers_cuts_exactly_its_links(engine, tmp_path):
    hosts = kwdocker.DockerHosts.create(NODES, None, tmp_path, client=engine)
    try:
        net = IptablesNetwork(NODES, {n: hosts.address(n) for n in NODES}, hosts.client_address,
                              lambda n, argv, stdin: hosts.exec(n, argv, 30, stdin=stdin))
        net.setup()
        assert isinstance(hosts, Remote) and isinstance(net, Network)  # the cluster contract, structurally
        probe = Prober(hosts, NODES, tmp_path, remote_dir=lambda n: f"{tmp_path}/nodes/{n}")
        probe.start()
        try:
            assert probe.delivered() == all_links(NODES)
            cut = {("n1", "n2"), ("n3", "n1"), (CLIENT, "n3"), ("n2", CLIENT)}
            net.cut(cut)
            assert probe.delivered() == all_links(NODES) - cut
            net.cut([])
            assert probe.delivered() == all_links(NODES)
        finally:
            probe.stop()
        assert {c.labels["kraftwerk"] for c in labelled(engine, hosts.tag) if hasattr(c, "labels")} == {"1"}
    finally:
        hosts.teardown()
    assert labelled(engine, hosts.tag) == []


def test_latency_inside_containers_delays_its_links_until_healed(engine, tmp_path):
    """A delayer per container that holds a delayed link (the host's /usr,
    the project mounted read-only, NET_ADMIN): a TCP connect over a link
    with 200 ms asked takes at least 150 ms; once healed its fastest of a few
    connects is under 100 ms (tests/backends/test_netns_latency.py ``undelayed``)."""
    hosts = kwdocker.DockerHosts.create(NODES, None, tmp_path, client=engine)
    try:
        net = IptablesNetwork(NODES, {n: hosts.address(n) for n in NODES}, hosts.client_address,
                              lambda n, argv, stdin: hosts.exec(n, argv, 30, stdin=stdin), delayers=Delayers(hosts))
        net.setup()
        for n in NODES:
            hosts.start_helper(n, [sys.executable, "-c", LISTENER, hosts.address(n), str(PORT)],
                               f"{tmp_path}/nodes/{n}/listener.log")
        time.sleep(0.5)

        net.set_latency([("n1", "n2"), (CLIENT, "n3")], 200, 20)
        assert connect_ms(hosts, "n1", "n2") >= 150 and undelayed(hosts, "n3", "n1")
        assert connect_ms(hosts, CLIENT, "n3") >= 150
        net.heal()
        assert undelayed(hosts, "n1", "n2")
        pids = [h[2] for h in hosts.helpers]
    finally:
        hosts.teardown()
    assert labelled(engine, hosts.tag) == []
    assert not any(alive(p) for p in pids)


def test_a_sigkilled_harness_leaves_no_container_network_or_process_within_90_s_without_cleanup(engine, tmp_path):
    out = tmp_path / "results"
    registry = tmp_path / "registry"
    env = {**os.environ, "KRAFTWERK_RUNTIME_DIR": str(registry)}
    harness = subprocess.Popen(CLI + ["run", "--backend", "docker", "--out", str(out), "--time-limit", "60",
                                      "--nemesis", "partition,pause", "--nemesis-interval", "1", "--seed", "6",
                                      "--no-progress"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        hist = None
        while time.monotonic() < deadline and hist is None:
            runs = list(out.glob("queue/*/history.jsonl"))
            if runs and runs[0].stat().st_size > 3_000:
                hist = runs[0]
            time.sleep(0.5)
        assert hist is not None, "the run never got going"
        (state,) = list(registry.glob("*.json"))
        recorded = json.loads(state.read_text())
        owner = f"{harness.pid}:"
        ours = [c for c in engine.api.containers(all=True, filters={"label": "kraftwerk"})
                if c["Labels"].get("kraftwerk.owner", "").startswith(owner)]
        assert len(ours) == 6
        tag = ours[0]["Labels"]["kraftwerk.tag"]
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    procs = [p for p in recorded["processes"] if p["role"] == "node"]
    assert len(procs) == 6

    def left() -> list:
        f = {"label": f"kraftwerk.tag={tag}"}  # the low-level list: no inspect of a container going away meanwhile
        return (engine.api.containers(all=True, filters=f) + engine.api.networks(filters=f)
                + [p["pid"] for p in procs if alive(p["pid"], p["start"])]
                + [str(f) for f in (OWNER_DIR / f"{tag}.json", state) if f.exists()])

    # no cleanup run: the run's reaper alone (harness/rundir/state.py reap); it takes a few seconds,
    # more than 30 on a machine loaded four times over (the window is for that)
    deadline = time.monotonic() + 90
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left() == []
    again = subprocess.run(CLI + ["cleanup"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert again.returncode == 0 and f"kw-{tag}" not in again.stdout


def test_a_kafka_cluster_in_containers_serves_a_real_client_and_down_leaves_nothing(engine, tmp_path):
    """``cluster up --backend docker --db kafka``: the JVM runs in the
    project's image (the host's /usr, Kafka's jars mounted read-only),
    started through the host contract with no lease, so it outlives ``up``
    and ``cleanup``; ``down`` removes its containers and network."""
    from .test_netns_cluster import kw, produce_and_consume

    d = tmp_path / "k"
    r = kw("cluster", "up", "--backend", "docker", "--db", "kafka", "--combined", "--brokers", "1",
           "--controllers", "1", "--dir", str(d), "--json", "--timeout", "150")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    try:
        assert [c.labels["kraftwerk.kind"] for c in engine.containers.list(
            filters={"label": f"kraftwerk.tag={st['tag']}"})] == ["cluster"]
        kw("cleanup", env={"KRAFTWERK_RUNTIME_DIR": str(tmp_path / "registry")})
        assert produce_and_consume(st["bootstrap"]) == [f"v{i}" for i in range(5)]
        assert "Kafka version: 4.4." in (d / "nodes" / "n1" / "server.log").read_text()
    finally:
        down = kw("cluster", "down", "--dir", str(d), "--timeout", "30")
    assert down.returncode == 0 and "node n1: stopped" in down.stdout, down.stdout + down.stderr
    assert labelled(engine, st["tag"]) == []
    assert not any(alive(n["pid"], n["start"]) for n in st["nodes"])


@pytest.mark.slow
def test_a_short_run_of_real_kafka_in_containers_is_valid(engine, tmp_path):
    """db kafka on the docker backend through the host contract: partitions
    by iptables inside the containers, kills, pauses and libfaketime clocks;
    valid, no acknowledged acks=all write lost, nothing of the run left."""
    out = tmp_path / "r"
    before = {c.id for c in engine.containers.list(all=True, filters={"label": "kraftwerk"})}
    r = subprocess.run(CLI + ["run", "--backend", "docker", "--db", "kafka", "--combined", "--out", str(out),
                              "--json", "--seed", "3", "--nemesis", "partition,kill,pause,clock",
                              "--nemesis-interval", "4", "--time-limit", "20", "--no-progress"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-800:]
    res = json.loads(r.stdout)
    run_dir = Path(res["run_dir"])
    assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0
    assert json.loads((run_dir / "test.json").read_text())["backend"] == "docker"
    assert "Kafka version: 4.4." in (run_dir / "nodes" / "n1" / "server.log").read_text()
    def owner_gone(c):
        pid, _, start = c.labels.get("kraftwerk.owner", "").partition(":")
        return not (pid.isdigit() and alive(int(pid), int(start) if start.isdigit() else None))

    # another run may be using the engine: the run's own containers are the
    # new ones whose owner has exited
    left = [c.name for c in engine.containers.list(all=True, filters={"label": "kraftwerk"})
            if c.id not in before and owner_gone(c)]
    assert left == []
