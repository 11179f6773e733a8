"""``kraftwerk cluster up|down|status --backend netns``: a reference-broker
cluster in network namespaces that outlives the command, for hand
experiments (iptables, tcpdump or a client inside ``ip netns exec``).

``up`` makes a fabric of kind ``cluster`` (never swept by ``kraftwerk
cleanup``: it belongs to no run), starts the nodes with no lease, waits
until they answer and every broker is registered, and records the tag,
addresses and pids in ``<dir>/cluster.json``; node data, logs and traces
are in ``<dir>/nodes/<name>/``. ``down`` stops brokers then controllers
with SIGTERM (controlled shutdown; SIGKILL after the grace period) and
removes the namespaces. The docker and ssh backends are for runs only so
far: their daemons are tied to the harness's connection.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from harness.backend.netns import NetnsHosts
from harness.config import TestConfig
from harness.db.hosted import NODE_PORT, HostedReference
from harness.errors import HarnessError, UsageError
from harness.net.netns import Fabric, remove_tag, require_root
from harness.state import alive, proc_start_time

STATE_FILE = "cluster.json"


def up(cfg: TestConfig, dir: Path, node_args: list[str], timeout: float) -> dict[str, Any]:
    require_root("--backend netns")
    dir = dir.resolve()
    if load(dir) is not None:
        raise UsageError(f"a cluster is already in {dir}; run `kraftwerk cluster down --dir {dir}` first")
    dir.mkdir(parents=True, exist_ok=True)
    fabric = Fabric.create(cfg.node_names(), kind="cluster", dir=str(dir))
    hosts = NetnsHosts(fabric, None, dir)
    db = HostedReference(cfg, dir, None, hosts, node_args)
    try:
        db.boot()
        _wait_brokers(db, timeout)
    except BaseException:
        db.teardown()
        raise
    st = {
        "backend": "netns", "tag": fabric.tag, "dir": str(dir), "bootstrap": db.client_bootstrap(),
        "client_address": fabric.client_address,
        "nodes": [{"name": n, "node_id": db.ids[n], "roles": db.roles[n], "address": hosts.address(n),
                   "namespace": fabric.ns(n), "pid": hosts.procs[n].pid,
                   "start": proc_start_time(hosts.procs[n].pid)} for n in db.node_names()],
    }
    (dir / STATE_FILE).write_text(json.dumps(st, indent=1))
    return st


def _wait_brokers(db: HostedReference, timeout: float) -> None:
    from reference_impl.server.launcher import metadata_brokers

    want = {db.ids[b] for b in db.brokers()}
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    while time.monotonic() < deadline:
        try:
            seen = set(metadata_brokers(db.hosts.address(db.brokers()[0]), NODE_PORT))
        except OSError:
            pass
        if want <= seen:
            return
        time.sleep(0.2)
    raise HarnessError(f"brokers registered: {sorted(seen)}, expected {sorted(want)} within {timeout:.0f}s")


def load(dir: Path) -> dict[str, Any] | None:
    """The state of a namespace cluster in ``dir``, or None (none, or another kind)."""
    try:
        st = json.loads((Path(dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) and st.get("backend") == "netns" else None


def status(st: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**n, "alive": alive(n["pid"], n.get("start"))} for n in st["nodes"]]


def down(dir: Path, timeout: float = 40.0) -> dict[str, bool]:
    """Brokers first, then controllers: SIGTERM, SIGKILL after ``timeout``;
    then the namespaces. Returns {node: stopped cleanly}."""
    st = load(dir)
    if st is None:
        return {}
    result: dict[str, bool] = {}
    groups = ([n for n in st["nodes"] if "broker" in n["roles"]], [n for n in st["nodes"] if "broker" not in n["roles"]])
    for group in groups:
        live = [n for n in group if alive(n["pid"], n.get("start"))]
        for n in live:
            os.kill(n["pid"], signal.SIGTERM)
        for n in live:
            deadline = time.monotonic() + timeout
            while alive(n["pid"], n.get("start")) and time.monotonic() < deadline:
                time.sleep(0.05)
            result[n["name"]] = not alive(n["pid"], n.get("start"))
    remove_tag(st["tag"])
    (Path(dir) / STATE_FILE).unlink(missing_ok=True)
    return result
