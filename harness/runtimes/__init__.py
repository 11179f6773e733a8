"""Where node processes run and how faults reach them.

* ``local`` (:mod:`.local`): processes on 127.0.0.1 with a harness-owned TCP
  proxy on every directed link; no root needed.
* ``netns`` (:mod:`.netns`): one network namespace per node on a bridge,
  real addresses, iptables faults; needs root.
* ``docker`` (:mod:`.docker`): one container per node on a labelled network,
  from an image built here; iptables inside (NET_ADMIN).
* ``ssh`` (:mod:`.ssh`): hosts from a hosts file (VMs, or the throwaway
  namespace hosts of ``kraftwerk hosts up``), driven with paramiko.

The three real backends implement the host contract (``Remote``: exec,
upload, download, start_daemon, signal, address, teardown) that
:mod:`harness.dbs.reference.hosted` runs the reference broker on.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

from harness.config import TestConfig
from harness.errors import HarnessError, UsageError
from harness.rundir.state import RunState
from harness.runtimes.docker import DockerHosts, preflight as docker_preflight
from harness.runtimes.net.netns import require_root
from harness.runtimes.netns import NetnsHosts

BACKENDS = ("local", "netns", "docker", "ssh")


def preflight(cfg: TestConfig, needs: Sequence[tuple[list[str], str]] = ()) -> Any:
    """Everything about the backend that can be bad input, checked before
    anything starts (root, the hosts file, each host reachable with a known
    key and holding what the db needs there: ``needs``, as ``test``
    arguments and the refusal's words). Returns what ``open_hosts`` needs
    (the parsed hosts, for ssh)."""
    if cfg.backend == "netns":
        require_root("--backend netns")
    elif cfg.backend == "docker":
        client = docker_preflight()
        if cfg.storage == "lazyfs" and not os.path.exists("/dev/fuse"):
            raise UsageError("--storage lazyfs on --backend docker: /dev/fuse is missing on this machine, "
                             "so no container can mount kraftwerk fs")
        return client
    elif cfg.backend == "ssh":
        assert cfg.hosts is not None
        checked = ssh_runtime().preflight(cfg.hosts, cfg.node_names(), accept_new=cfg.ssh_accept_new)
        _hosts_have(checked, needs)
        return checked
    return None


def _hosts_have(checked: Any, needs: Sequence[tuple[list[str], str]]) -> None:
    """Refuse, before anything starts, a host that lacks one of ``needs``
    (``harness.dbs.host_needs``); the connections are closed with the refusal."""
    for test_args, words in needs:
        for node, (spec, client) in checked.items():
            if not ssh_runtime().host_passes(spec, client, test_args):
                for _, c in checked.values():
                    c.close()
                raise UsageError(f"host {spec.name} ({spec.address}) {words}")


def open_hosts(cfg: TestConfig, run_dir: Path, state: RunState | None, checked: Any = None,
               ro_paths: Sequence[str] = ()) -> Any:
    """The Remote of a real backend, its hosts made (netns, docker) or
    connected (ssh); ``ro_paths``: what the db's daemons read from this
    machine besides ``/usr`` and the project (docker mounts them read-only)."""
    names = cfg.node_names()
    if cfg.backend == "netns":
        return NetnsHosts.create(names, state, run_dir)
    if cfg.backend == "docker":
        return DockerHosts.create(names, state, run_dir, ro_paths=ro_paths, fuse=cfg.storage == "lazyfs")
    if cfg.backend == "ssh":
        return ssh_runtime().SshHosts.open(checked, names, state, run_dir)
    raise ValueError(f"backend {cfg.backend!r} has no hosts")


def ssh_runtime() -> ModuleType:
    """The ssh runtime (:mod:`harness.runtimes.ssh`), loaded when a run or a
    hand cluster asks for ssh hosts."""
    import harness.runtimes.ssh  # late: paramiko (0.5 s), which runs on every other backend never need

    return harness.runtimes.ssh


def collect_files(hosts: Any, nodes: list[str], files: tuple[str, ...], remote_dir: Callable[[str], str],
                  local_dir: Callable[[str], Path]) -> None:
    """Bring each node's ``files`` back from ``remote_dir(node)`` on its host
    to ``local_dir(node)``, where the host does not share this machine's
    filesystem (ssh); a file the node never wrote is passed over."""
    if getattr(hosts, "shared_fs", True):
        return
    for n in nodes:
        for f in files:
            try:
                hosts.download(n, f"{remote_dir(n)}/{f}", local_dir(n) / f)
            except (OSError, HarnessError):
                pass
