"""``kraftwerk cluster up|down|status``: a local reference-broker cluster, or
with ``--db kafka`` a real Apache Kafka one (``harness.handcluster.kafka``);
with ``--backend netns|docker|ssh`` either db on real hosts
(``harness.handcluster.hosted``).

``up`` starts the node processes detached (pids in ``<dir>/cluster.json``),
waits until every broker is registered and prints the bootstrap servers;
``down`` stops them cleanly (SIGTERM = controlled shutdown, SIGKILL only after
a grace period); ``status`` shows each node. Layout and ids:
:mod:`reference_impl.server.launcher`.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import click
from harness.cli.output import console
from rich.table import Table

from harness import handcluster
from harness.cli.node import build_options
from harness.config import build_config
from harness.dbs.kafka import db as kafka_db
from harness.errors import HarnessError, UsageError
from harness.rundir.trust import check_dir, trusted_dir


def register(group: click.Group) -> None:
    @group.group("cluster")
    def cluster() -> None:
        """Run a local cluster of reference-broker nodes."""

    @cluster.command("up")
    @click.option("--backend", type=click.Choice(["local", "netns", "docker", "ssh"]), default="local", show_default=True,
                  help="local processes; network namespaces or containers (root); ssh hosts (--hosts)")
    @click.option("--hosts", "hosts_file", type=click.Path(dir_okay=False),
                  help="--backend ssh: the hosts file (kraftwerk hosts up writes one)")
    @click.option("--ssh-accept-new", is_flag=True, help="--backend ssh: trust a host key seen for the first time")
    @click.option("--db", type=click.Choice(["reference", "kafka"]), default="reference", show_default=True)
    @click.option("--kafka-version", default="4.4.0", show_default=True, help="--db kafka: release from Maven Central")
    @click.option("--kafka-home", type=click.Path(file_okay=False), help="--db kafka: a Kafka binary distribution")
    @click.option("--brokers", type=int, default=3, show_default=True)
    @click.option("--controllers", type=int, default=3, show_default=True)
    @click.option("--base-port", type=int, default=19092, show_default=True, help="first port (node i: base+i, its control base+100+i); 0: free ports chosen by the kernel")
    @click.option("--dir", "dir", default="results/cluster", show_default=True, help="state and data directory")
    @click.option("--combined", is_flag=True, help="run broker and controller roles in the same processes")
    @click.option("--storage-mode", type=click.Choice(["os", "memory-cache"]), default="os", show_default=True)
    @click.option("--set", "overrides", multiple=True,
                  help="key=value config for every node (repeatable; server.properties with --db kafka)")
    @click.option("--timeout", type=float, default=60.0, show_default=True, help="seconds to wait for the brokers")
    @click.option("--json", "as_json", is_flag=True)
    def up(backend, hosts_file, ssh_accept_new, db, kafka_version, kafka_home, brokers, controllers, base_port, dir,
           combined, storage_mode, overrides, timeout, as_json):
        """Start the nodes and print the bootstrap servers."""
        check_dir(dir, "kraftwerk cluster up --dir")  # made once the flags hold: bad input leaves nothing
        if backend != "local":
            return _hosted_up(backend, db, {"hosts": hosts_file, "ssh_accept_new": ssh_accept_new,
                                            "kafka_version": kafka_version, "kafka_home": kafka_home},
                              brokers, controllers, dir, combined, storage_mode, overrides, timeout, as_json)
        if hosts_file or ssh_accept_new:
            raise UsageError("--hosts and --ssh-accept-new are for --backend ssh")
        if db == "kafka":
            return _kafka_up(kafka_version, kafka_home, brokers, controllers, base_port, dir, combined, overrides,
                             timeout, as_json)
        config = handcluster.local.parse_settings(overrides)
        c = handcluster.local.plan(dir, brokers, controllers, base_port, combined, config, storage_mode)
        # validate flags and config once, before anything starts
        n0 = c.nodes[0]
        build_options(n0.node_id, ",".join(n0.roles), f"127.0.0.1:{n0.port}", c.quorum, n0.data_dir, None, None,
                      storage_mode, tuple(f"{k}={v}" for k, v in config.items()))
        trusted_dir(dir, "kraftwerk cluster up --dir")  # state, secret and data go there
        handcluster.local.up(c, timeout)
        if as_json:
            click.echo(json.dumps({"bootstrap": c.bootstrap, "dir": c.dir, "nodes": c.status()}))
        else:
            click.echo(c.bootstrap)

    @cluster.command("down")
    @click.option("--dir", "dir", default="results/cluster", show_default=True)
    @click.option("--timeout", type=float, default=40.0, show_default=True, help="grace period before SIGKILL")
    def down(dir, timeout):
        """Stop every node (controlled shutdown)."""
        dir = str(trusted_dir(dir, "kraftwerk cluster down --dir", create=False))  # whose pids get signalled
        kind = handcluster.kind_of(dir)
        if kind == "hosted":
            res = handcluster.hosted.down(Path(dir), timeout)
        elif kind == "kafka":
            res = handcluster.kafka.down(dir, timeout)
        else:
            res = handcluster.local.down(dir, timeout)
        for name, clean in sorted(res.items()):
            click.echo(f"node {name}: {'stopped' if clean else 'killed after timeout'}")

    @cluster.command("status")
    @click.option("--dir", "dir", default="results/cluster", show_default=True)
    @click.option("--json", "as_json", is_flag=True)
    def status(dir, as_json):
        """Show each node: pid, alive, partitions it leads, quorum role."""
        dir = str(trusted_dir(dir, "kraftwerk cluster status --dir", create=False))  # the token goes to its ports
        nst = handcluster.hosted.load(Path(dir))
        if nst is not None and nst.get("provisional"):
            raise HarnessError(f"the cluster in {dir} never finished coming up; `kraftwerk cluster down --dir {dir}` "
                               "removes what it made")
        if nst is not None:
            rows = handcluster.hosted.status(nst)
            if as_json:
                click.echo(json.dumps({"bootstrap": nst["bootstrap"], "nodes": rows}))
                return
            for r in rows:
                where = f" netns={r['namespace']}" if "namespace" in r else ""
                click.echo(f"{r['name']} id={r['node_id']} roles={','.join(r['roles'])} {r['address']}:9092"
                           f"{where} pid={r['pid']} alive={'yes' if r['alive'] else 'no'}")
            click.echo(f"bootstrap: {nst['bootstrap']}  ({nst['backend']}, db {nst.get('db', 'reference')})")
            return

        if handcluster.kind_of(dir) == "kafka":
            st = handcluster.kafka.status(dir)
            if as_json:
                click.echo(json.dumps(st))
                return
            for r in st["nodes"]:
                click.echo(f"{r['name']} id={r['node_id']} roles={','.join(r['roles'])} "
                           f"port={r['port'] if 'broker' in r['roles'] else r['controller_port']} "
                           f"pid={r['pid'] or '-'} alive={'yes' if r['alive'] else 'no'}")
            click.echo(f"bootstrap: {st['bootstrap']}  (Kafka {st['version']})")
            return
        st = handcluster.local.status(dir)
        rows = st["nodes"]
        if as_json:
            click.echo(json.dumps(st))
            return
        t = Table("node", "roles", "port", "pid", "alive", "quorum", "leads")
        for r in rows:
            raft = r.get("raft") or {}
            t.add_row(
                str(r["node_id"]), ",".join(r["roles"]), str(r["port"]), str(r["pid"] or "-"),
                "yes" if r["alive"] else "no",
                f"{raft.get('role', '-')}@{raft.get('epoch', '-')}" if raft else "-",
                " ".join(r.get("leader_of", [])) or "-",
            )
        console().print(t)
        click.echo(f"bootstrap: {st['bootstrap']}")


def _hosted_up(backend, db, extra, brokers, controllers, dir, combined, storage_mode, overrides, timeout,
               as_json) -> None:
    """Either db on the hosts of a real backend (harness.handcluster.hosted)."""
    args: list[str] = []
    for kv in overrides:
        if "=" not in kv:
            raise UsageError(f"--set {kv!r} must look like key=value")
        args += ["--set", kv]
    settings = {"backend": backend, "db": db, "brokers": brokers, "controllers": controllers, "combined": combined,
                "rf": min(3, brokers), "min_isr": min(2, brokers), "seed": 1,
                "hosts": extra["hosts"], "ssh_accept_new": extra["ssh_accept_new"]}
    if db == "kafka":
        if storage_mode != "os":
            raise UsageError("--storage-mode is the reference broker's: drop it with --db kafka")
        settings.update(kafka_version=extra["kafka_version"], kafka_home=extra["kafka_home"],
                        kafka_config=list(overrides))
        args = []
    else:
        settings["storage"] = "pagecache" if storage_mode == "memory-cache" else "file"
    cfg = build_config(None, settings)
    dir = str(trusted_dir(dir, "kraftwerk cluster up --dir"))  # state, secret and data go there
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (a timeout, a cancelled job) mid-up removes what up made so
        # far, like Ctrl-C: kept hosts are no run's, cleanup never takes them
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    st = handcluster.hosted.up(cfg, Path(dir), args, timeout)
    if as_json:
        click.echo(json.dumps(st))
    else:
        click.echo(st["bootstrap"])


def _kafka_up(version, home, brokers, controllers, base_port, dir, combined, overrides, timeout, as_json) -> None:
    cfg = build_config(None, {"db": "kafka", "kafka_version": version, "kafka_home": home,
                              "kafka_config": list(overrides), "brokers": brokers, "controllers": controllers,
                              "combined": combined, "base_port": base_port, "rf": min(3, brokers),
                              "min_isr": min(2, brokers), "seed": 1})
    kafka_db.preflight(cfg)
    dir = str(trusted_dir(dir, "kraftwerk cluster up --dir"))  # state, secret and data go there
    st = handcluster.kafka.up(cfg, dir, timeout)
    if as_json:
        click.echo(json.dumps({"bootstrap": st["bootstrap"], "dir": dir, "version": st["version"],
                               "nodes": st["nodes"]}))
    else:
        click.echo(st["bootstrap"])
