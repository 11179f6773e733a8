"""``kraftwerk cluster up|down|status`` with the reference broker on this
machine: node processes laid out and started by
:class:`reference_impl.server.launcher.LocalCluster` (no proxies: a hand
cluster has no faults but the ones its user makes), left running until
``down``. State in ``<dir>/cluster.json``."""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError, UsageError
from reference_impl.server.launcher import ClusterError, LocalCluster


def parse_settings(overrides: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--set key=value`` pairs; a malformed one is bad input."""
    config: dict[str, str] = {}
    for kv in overrides:
        k, sep, v = kv.partition("=")
        if not sep:
            raise UsageError(f"--set {kv!r} must look like key=value")
        config[k.strip()] = v.strip()
    return config


def plan(dir: str, brokers: int, controllers: int, base_port: int, combined: bool, config: dict[str, str],
         storage_mode: str) -> LocalCluster:
    """The cluster's layout and ports, refused while another runs in ``dir``."""
    try:
        c = LocalCluster.plan(dir, brokers, controllers, base_port, combined, config, storage_mode)
    except ClusterError as e:
        raise UsageError(str(e)) from None
    try:
        existing = LocalCluster.load(dir)
        if any(n.running() for n in existing.nodes):
            raise UsageError(f"a cluster is already running in {dir}; run `kraftwerk cluster down --dir {dir}` first")
    except ClusterError:
        pass
    return c


def up(c: LocalCluster, timeout: float) -> None:
    """Start every node and wait for the brokers; a cluster that cannot come
    up is taken down before the error goes on."""
    try:
        c.up(timeout)
    except ClusterError as e:
        c.down(timeout=10)
        raise HarnessError(str(e)) from None


def load(dir: str) -> LocalCluster:
    try:
        return LocalCluster.load(dir)
    except ClusterError as e:
        raise UsageError(str(e)) from None


def down(dir: str, timeout: float) -> dict[int, bool]:
    """Stop every node (controlled shutdown, SIGKILL after ``timeout``): node
    id -> whether it stopped cleanly."""
    return load(dir).down(timeout)


def status(dir: str) -> dict[str, Any]:
    c = load(dir)
    return {"bootstrap": c.bootstrap, "nodes": c.status()}
