"""The databases a test runs against, on any real runtime.

* ``reference``: the bundled broker, one ``kraftwerk node`` process per node:
  on local processes behind per-link proxies (:mod:`.reference.local`,
  :mod:`.reference.db`) or on the hosts of netns, docker and ssh
  (:mod:`.reference.hosted`);
* ``kafka``: real Apache Kafka in KRaft mode on any runtime (:mod:`.kafka`);
* ``external``: a cluster someone else runs; bootstrap only (:mod:`.external`).

A db runs on a runtime's hosts (:mod:`harness.runtimes`), never the other way
round: what a db needs of a host (a file to test for, a path to mount
read-only) it hands to the runtime here, so the runtimes import no db.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from harness.config import TestConfig
from harness.dbs.external import ExternalDB
from harness.dbs.kafka import db as kafka
from harness.dbs.reference import db as reference
from harness.dbs.reference import hosted
from harness.dbs.reference.local import CAPABILITIES as LOCAL_CAPABILITIES
from harness.errors import UsageError
from harness.rundir.state import RunState
from harness import runtimes
from nemesis.control import Cluster, Unsupported
from nemesis.faults import check_supported


class DB(Protocol):
    """What the lifecycle does with a db: start it, hand its cluster contract
    to the nemesis, point the clients at it, tear it down (Jepsen's db
    protocol, with the fault capabilities on :attr:`cluster`)."""

    #: the cluster contract (``nemesis.control.Cluster``) the nemesis drives;
    #: None for a db the harness does not run (external)
    @property
    def cluster(self) -> Cluster | None: ...

    def setup(self) -> None: ...

    def client_bootstrap(self) -> str: ...

    def teardown(self) -> None: ...


def capabilities(cfg: TestConfig) -> Any:
    """The faults this db can be given on this runtime (None: no check)."""
    if cfg.db == "kafka":  # the JVMs on any backend: what KafkaDB can make there
        return kafka.capabilities_for(cfg)
    if cfg.backend == "local":
        return LOCAL_CAPABILITIES
    if cfg.db == "reference":
        return hosted.capabilities_for(cfg)
    return None


def host_needs(cfg: TestConfig) -> list[tuple[list[str], str]]:
    """What every real host must have for this run, as (``test`` arguments,
    the refusal's words after the host's name)."""
    needs: list[tuple[list[str], str]] = []
    if cfg.storage == "lazyfs":  # kraftwerk fs is mounted on every host
        needs.append((["-c", "/dev/fuse"], "has no /dev/fuse, so kraftwerk fs cannot mount there (--storage lazyfs)"))
    if cfg.db == "kafka":
        needs += kafka.host_needs(cfg)
    return needs


def ro_paths(cfg: TestConfig) -> list[str]:
    """What a db's daemons read from this machine besides ``/usr`` and the
    project, which the docker runtime mounts read-only: Kafka's jars."""
    return kafka.ro_paths(cfg) if cfg.db == "kafka" else []


def preflight(cfg: TestConfig) -> Any:
    """Checks that need the machine but start nothing: the faults the db can
    be given here, ports free, binaries present, the runtime's hosts
    reachable and holding what the db needs. Returns what the runtime
    checked (the connected hosts, for ssh)."""
    have = capabilities(cfg)
    if have is not None:
        try:
            check_supported(cfg.faults(), cfg.backend, have)
        except Unsupported as e:
            raise UsageError(str(e)) from None
    if cfg.db == "kafka":
        kafka.preflight(cfg)
    if cfg.backend != "local":
        return runtimes.preflight(cfg, host_needs(cfg))
    if cfg.db == "reference":
        reference.preflight(cfg)
    return None


def open_db(cfg: TestConfig, run_dir: Path, state: RunState, checked: Any = None) -> DB:
    """The db of ``cfg`` on its runtime, its hosts made or connected (not yet
    started: :meth:`DB.setup` starts it)."""
    if cfg.db == "kafka":
        hosts = None
        if cfg.backend != "local":
            hosts = runtimes.open_hosts(cfg, run_dir, state, checked, ro_paths(cfg))
        return kafka.KafkaDB(cfg, run_dir, state, hosts)
    if cfg.backend != "local":
        return hosted.HostedReference(cfg, run_dir, state, runtimes.open_hosts(cfg, run_dir, state, checked),
                                      reference.node_settings(cfg))
    if cfg.db == "external":
        return ExternalDB(cfg)
    return reference.ReferenceDB(cfg, run_dir, state)
