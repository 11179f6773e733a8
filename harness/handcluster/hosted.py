"""``kraftwerk cluster up|down|status --backend netns|docker|ssh``: a cluster
on real hosts that outlives the command, for hand experiments (a client,
iptables, tcpdump), with ``--db reference`` or ``--db kafka``.

``up`` makes the hosts in their kept form: a fabric of kind ``cluster``
(netns), containers labelled ``kraftwerk.kind=cluster`` (docker), or a
directory ``<dir>/runs/cluster-<tag>/`` on each ssh host; none of them is
swept by ``kraftwerk cleanup`` (they belong to no run). The db is started
exactly as a run's (:class:`harness.dbs.reference.hosted.HostedReference`,
:class:`harness.dbs.kafka.db.KafkaDB`), through the host contract only, but its
daemons get no lease (their own session; docker: a detached exec; ssh:
``setsid``). ``up`` waits until every broker is registered and records the
backend, the hosts and each daemon's pid in ``<dir>/cluster.json``; node
data, logs and traces are in ``<dir>/nodes/<name>/`` (on an ssh host, in its
directory until ``down`` brings the logs back). ``down`` stops brokers then
controllers with SIGTERM (controlled shutdown; SIGKILL after the grace
period) and removes what ``up`` made: namespaces, containers and network,
the hosts' chains and directories.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import dbs, runtimes
from harness.config import TestConfig
from harness.dbs.kafka import db as kafka_db
from harness.dbs.kafka.db import COLLECT as KAFKA_FILES, KafkaDB
from harness.dbs.reference.hosted import COLLECT as REFERENCE_FILES, NODE_PORT, HostedReference
from harness.errors import HarnessError, UsageError
from reference_impl.server.procs import proc_start_time, same_process
from harness.runtimes import collect_files
from harness.runtimes.docker import DockerHosts
from harness.runtimes.net.iptables import IptablesNetwork
from harness.runtimes.net.netns import Fabric, remove_tag
from harness.runtimes.netns import NetnsHosts
from reference_impl.server.launcher import metadata_brokers

STATE_FILE = "cluster.json"
KEPT_BACKENDS = ("netns", "docker", "ssh")


def up(cfg: TestConfig, dir: Path, node_args: list[str], timeout: float) -> dict[str, Any]:
    dir = dir.resolve()
    if load(dir) is not None:
        raise UsageError(f"a cluster is already in {dir}; run `kraftwerk cluster down --dir {dir}` first")
    checked = runtimes.preflight(cfg, dbs.host_needs(cfg))
    if cfg.db == "kafka":
        kafka_db.preflight(cfg)
    dir.mkdir(parents=True, exist_ok=True)
    hosts, extra = _kept_hosts(cfg, dir, checked)
    db: Any = None
    try:
        if cfg.backend != "ssh":
            # provisional until the nodes are up: if this command is killed
            # (SIGKILL leaves no handler a chance), `down` still finds the
            # namespaces or containers it made on this machine and removes them
            (dir / STATE_FILE).write_text(json.dumps(
                {"backend": cfg.backend, "db": cfg.db, "dir": str(dir), "bootstrap": None, "provisional": True,
                 **extra, "nodes": []}, indent=1))
        db = _db(cfg, dir, hosts, node_args)
        if cfg.db == "kafka":
            db.setup(ready_timeout=timeout, topics=False)
        else:
            db.boot()
            _wait_brokers(db, timeout)
        st = {"backend": cfg.backend, "db": cfg.db, "dir": str(dir), "bootstrap": db.client_bootstrap(),
              "client_address": hosts.client_address, **extra,
              "nodes": [_row(db, hosts, n) for n in db.topo.node_names()]}
        if cfg.db == "kafka":
            st["version"] = db.version()
        (dir / STATE_FILE).write_text(json.dumps(st, indent=1))
    except BaseException:
        # until cluster.json is written nothing finds these hosts again
        # (kept hosts are no run's: cleanup leaves them), so they go now
        if db is not None:
            db.teardown()
        else:
            hosts.teardown()
        with contextlib.suppress(OSError):  # the provisional record goes with the hosts
            (dir / STATE_FILE).unlink(missing_ok=True)
        raise
    return st


def _kept_hosts(cfg: TestConfig, dir: Path, checked: Any) -> tuple[Any, dict[str, Any]]:
    """The backend's hosts made to outlive this command, and what ``down``
    needs to find them again."""
    names = cfg.node_names()
    if cfg.backend == "netns":
        fabric = Fabric.create(names, kind="cluster", dir=str(dir))
        return NetnsHosts(fabric, None, dir), {"tag": fabric.tag}
    if cfg.backend == "docker":
        hosts = DockerHosts.create(names, None, dir, client=checked, ro_paths=dbs.ro_paths(cfg), detached=True)
        return hosts, {"tag": hosts.tag, "subnet": hosts.subnet}
    assert cfg.hosts is not None
    run_id = f"cluster-{secrets.token_hex(3)}"
    hosts = runtimes.ssh_runtime().SshHosts.open(checked, names, None, dir, detached=True, run_id=run_id)
    return hosts, {"hosts": str(Path(cfg.hosts).resolve()), "run_id": run_id}


def _db(cfg: TestConfig, dir: Path, hosts: Any, node_args: list[str]) -> Any:
    if cfg.db == "kafka":
        return KafkaDB(cfg, dir, None, hosts)  # type: ignore[arg-type]
    return HostedReference(cfg, dir, None, hosts, node_args)


def _row(db: Any, hosts: Any, name: str) -> dict[str, Any]:
    pid = _pid(hosts, name)
    ids = {n: i for n, i, _ in db.cfg.layout()}
    roles = {n: r for n, _, r in db.cfg.layout()}
    row = {"name": name, "node_id": ids[name], "roles": list(roles[name]), "address": hosts.address(name),
           "pid": pid}
    if hosts.runtime != "ssh":  # a pid of this machine (a namespace's or a container's process)
        row["start"] = proc_start_time(pid)
    if hosts.runtime == "netns":
        row["namespace"] = hosts.fabric.ns(name)
    return row


def _pid(hosts: Any, name: str) -> int:
    if hosts.runtime == "netns":
        return int(hosts.procs[name].pid)
    if hosts.runtime == "docker":
        return int(hosts.daemons[name][2])  # (exec id, socket, host pid, start)
    return int(hosts.daemons[name][1])  # ssh: (channel, pid on the host)


def _wait_brokers(db: Any, timeout: float) -> None:
    want = {db.topo.id_of(b) for b in db.topo.brokers()}
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    while time.monotonic() < deadline:
        try:
            seen = set(metadata_brokers(db.hosts.address(db.topo.brokers()[0]), NODE_PORT))
        except OSError:
            pass
        if want <= seen:
            return
        time.sleep(0.2)
    raise HarnessError(f"brokers registered: {sorted(seen)}, expected {sorted(want)} within {timeout:.0f}s")


def load(dir: Path) -> dict[str, Any] | None:
    """The state of a kept cluster on real hosts in ``dir``, or None."""
    try:
        st = json.loads((Path(dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) and st.get("backend") in KEPT_BACKENDS else None


def status(st: dict[str, Any]) -> list[dict[str, Any]]:
    if st["backend"] == "ssh":
        hosts = _ssh_hosts(st)
        try:
            return [{**n, "alive": hosts.running(n["name"])} for n in st["nodes"]]
        finally:
            hosts.close()
    return [{**n, "alive": same_process(n["pid"], n.get("start"))} for n in st["nodes"]]


def _ssh_hosts(st: dict[str, Any]) -> Any:
    ssh = runtimes.ssh_runtime()
    names = [n["name"] for n in st["nodes"]]
    hosts = ssh.SshHosts(ssh.preflight(st["hosts"], names), None, st["run_id"], detached=True)
    for n in st["nodes"]:
        hosts.adopt(n["name"], n["pid"])
    return hosts


def down(dir: Path, timeout: float = 40.0) -> dict[str, bool]:
    """Brokers first, then controllers: SIGTERM, SIGKILL after ``timeout``;
    then whatever ``up`` made. Returns {node: stopped cleanly}."""
    st = load(dir)
    if st is None:
        return {}
    if st["backend"] == "ssh":
        result = _down_ssh(st, timeout)
    else:
        result = _stop_local_pids(st, timeout)
        if st["backend"] == "netns":
            remove_tag(st["tag"])
        else:
            DockerHosts.attach(st["tag"], st["subnet"], Path(dir), {}).teardown()
    (Path(dir) / STATE_FILE).unlink(missing_ok=True)
    return result


def _waves(st: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return ([n for n in st["nodes"] if "broker" in n["roles"]], [n for n in st["nodes"] if "broker" not in n["roles"]])


def _stop_local_pids(st: dict[str, Any], timeout: float) -> dict[str, bool]:
    """Daemons whose pids are this machine's (namespaces, containers)."""
    result: dict[str, bool] = {}
    for group in _waves(st):
        live = [n for n in group if same_process(n["pid"], n.get("start"))]
        for n in live:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                with contextlib.suppress(ProcessLookupError):  # it may end between the check and the signal
                    os.kill(n["pid"], sig)
        deadline = time.monotonic() + timeout
        for n in live:
            while same_process(n["pid"], n.get("start")) and time.monotonic() < deadline:
                time.sleep(0.05)
            result[n["name"]] = not same_process(n["pid"], n.get("start"))
            if not result[n["name"]]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(n["pid"], signal.SIGKILL)
    return result


def _down_ssh(st: dict[str, Any], timeout: float) -> dict[str, bool]:
    """Through the hosts' connections: stop, bring the logs back, remove
    our chains and the cluster's directory on each host."""
    hosts = _ssh_hosts(st)
    result: dict[str, bool] = {}
    try:
        for group in _waves(st):
            def term(name: str) -> bool:  # a wave at once: a combined node waits for its peers' votes
                if not hosts.running(name):
                    return True
                hosts.signal(name, signal.SIGCONT)
                hosts.signal(name, signal.SIGTERM)
                return hosts.wait_exit(name, timeout)

            with ThreadPoolExecutor(max_workers=max(1, len(group))) as pool:
                result.update(zip([n["name"] for n in group], pool.map(term, [n["name"] for n in group])))
        _collect_ssh(st, hosts)
        names = [n["name"] for n in st["nodes"]]
        IptablesNetwork(names, {n["name"]: n["address"] for n in st["nodes"]}, hosts.client_address,
                        lambda node, argv, stdin: hosts.exec(node, list(argv), 30.0, stdin=stdin)).teardown()
    finally:
        hosts.teardown()
    return result


def _collect_ssh(st: dict[str, Any], hosts: Any) -> None:
    collect_files(hosts, [n["name"] for n in st["nodes"]], KAFKA_FILES if st["db"] == "kafka" else REFERENCE_FILES,
                  hosts.node_dir, lambda n: Path(st["dir"]) / "nodes" / n)
