"""Local backend wiring: the launcher's local cluster with a proxy link on
every node-to-node and client-to-node path, each node told so on its
command line; the nodes are the run's processes."""

from reference_impl.server.launcher import LocalCluster

from harness.config import TestConfig
from harness.dbs.reference.local import ProxiedCluster, ports_needed
from harness.rundir.state import RunState


def cluster(tmp_path, combined=False):
    cfg = TestConfig(seed=1, combined=combined)
    st = RunState.create(tmp_path / "out", "t", tmp_path)
    return ProxiedCluster.for_run(cfg.layout(), tmp_path, st, seed=1), cfg


def opt(cmd, flag):
    return cmd[cmd.index(flag) + 1]


def test_the_local_backend_is_the_launchers_cluster_with_proxies(tmp_path):
    c, cfg = cluster(tmp_path)
    assert isinstance(c, LocalCluster)
    assert [(n.name, n.node_id, n.roles) for n in c.nodes] == [(n, i, r) for n, i, r in cfg.layout()]
    assert [n.data_dir for n in c.nodes] == [str(tmp_path / "nodes" / n) for n, _, _ in cfg.layout()]


def test_dedicated_layout_brokers_and_controllers(tmp_path):
    c, cfg = cluster(tmp_path)
    assert [(s.name, s.node_id, s.roles) for s in c.nodes] == [
        ("n1", 1, ["broker"]), ("n2", 2, ["broker"]), ("n3", 3, ["broker"]),
        ("c1", 101, ["controller"]), ("c2", 102, ["controller"]), ("c3", 103, ["controller"])]
    assert len(c.links()) == 6 * 5 + 6
    ports = [s.port for s in c.nodes] + [s.control_port for s in c.nodes] + list(c.client_ports.values()) + \
        [p for peers in c.peer_ports.values() for p in peers.values()] + [c.control_port]
    assert len(set(ports)) == len(ports) == ports_needed(6)


def test_nodes_reach_peers_only_through_their_own_links(tmp_path):
    c, _ = cluster(tmp_path)
    by = c.by_name
    for s in c.nodes:
        cmd = c.command(s)
        quorum = dict(item.split("@") for item in opt(cmd, "--controller-quorum").split(","))
        for v in ("c1", "c2", "c3"):
            want = by(v).port if v == s.name else c.peer_ports[s.name][v]
            assert quorum[str(by(v).node_id)] == f"127.0.0.1:{want}"
        peers = dict(item.split("=") for item in opt(cmd, "--peer").split(","))
        assert peers == {str(by(o).node_id): f"127.0.0.1:{p}" for o, p in c.peer_ports[s.name].items()}
        assert opt(cmd, "--advertise") == f"127.0.0.1:{c.client_ports[s.name]}"  # clients get the proxy from Metadata
        assert opt(cmd, "--listen") == f"127.0.0.1:{s.port}"
        assert opt(cmd, "--seed") == str(101 + s.node_id)
    links = {(link["src"], link["dst"]): link for link in c.links()}
    assert links[("n1", "c2")]["target"] == by("c2").port
    assert links[("client", "n2")]["listen"] == c.client_ports["n2"]


def test_client_bootstrap_lists_broker_client_links_only(tmp_path):
    c, _ = cluster(tmp_path)
    assert c.client_bootstrap() == ",".join(f"127.0.0.1:{c.client_ports[n]}" for n in ("n1", "n2", "n3"))


def test_combined_layout_puts_voters_on_brokers(tmp_path):
    c, _ = cluster(tmp_path, combined=True)
    assert [(s.name, s.roles) for s in c.nodes] == [
        ("n1", ["broker", "controller"]), ("n2", ["broker", "controller"]), ("n3", ["broker", "controller"])]


def test_a_runs_nodes_keep_no_cluster_file(tmp_path):
    """A run's processes are in its state file (kraftwerk cleanup finds them
    there), not in a hand cluster's cluster.json."""
    c, _ = cluster(tmp_path)
    c.save()
    assert not (tmp_path / "cluster.json").exists()
