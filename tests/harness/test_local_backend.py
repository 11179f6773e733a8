"""Local backend wiring: every node-to-node and client-to-node path goes
through its own proxy link, and each node is told so on its command line."""

from pathlib import Path

from harness.dbs.reference.local import LocalCluster, ports_needed
from harness.config import TestConfig
from harness.rundir.state import RunState


def cluster(tmp_path, combined=False):
    cfg = TestConfig(seed=1, combined=combined)
    st = RunState.create(tmp_path / "out", "t", tmp_path)
    return LocalCluster(cfg.layout(), tmp_path, st), cfg


def opt(cmd, flag):
    return cmd[cmd.index(flag) + 1]


def test_dedicated_layout_brokers_and_controllers(tmp_path):
    c, cfg = cluster(tmp_path)
    assert [(s.name, s.node_id, s.roles) for s in c.specs] == [
        ("n1", 1, ["broker"]), ("n2", 2, ["broker"]), ("n3", 3, ["broker"]),
        ("c1", 101, ["controller"]), ("c2", 102, ["controller"]), ("c3", 103, ["controller"])]
    assert len(c.links()) == 6 * 5 + 6
    ports = [s.listen for s in c.specs] + [s.control for s in c.specs] + [s.client_port for s in c.specs] + \
        [p for s in c.specs for p in s.peer_ports.values()] + [c.control_port]
    assert len(set(ports)) == len(ports) == ports_needed(6)


def test_nodes_reach_peers_only_through_their_own_links(tmp_path):
    c, _ = cluster(tmp_path)
    by = c.by_name
    for s in c.specs:
        cmd = c.node_command(s, "os")
        quorum = dict(item.split("@") for item in opt(cmd, "--controller-quorum").split(","))
        for v in ("c1", "c2", "c3"):
            want = by[v].listen if v == s.name else s.peer_ports[v]
            assert quorum[str(by[v].node_id)] == f"127.0.0.1:{want}"
        peers = dict(item.split("=") for item in opt(cmd, "--peer").split(","))
        assert peers == {str(by[o].node_id): f"127.0.0.1:{p}" for o, p in s.peer_ports.items()}
        assert opt(cmd, "--advertise") == f"127.0.0.1:{s.client_port}"  # clients get the proxy from Metadata
        assert opt(cmd, "--listen") == f"127.0.0.1:{s.listen}"
    links = {(l["src"], l["dst"]): l for l in c.links()}
    assert links[("n1", "c2")]["target"] == by["c2"].listen
    assert links[("client", "n2")]["listen"] == by["n2"].client_port


def test_client_bootstrap_lists_broker_client_links_only(tmp_path):
    c, _ = cluster(tmp_path)
    assert c.client_bootstrap() == ",".join(f"127.0.0.1:{c.by_name[n].client_port}" for n in ("n1", "n2", "n3"))


def test_combined_layout_puts_voters_on_brokers(tmp_path):
    c, _ = cluster(tmp_path, combined=True)
    assert [(s.name, s.roles) for s in c.specs] == [
        ("n1", ["broker", "controller"]), ("n2", ["broker", "controller"]), ("n3", ["broker", "controller"])]
