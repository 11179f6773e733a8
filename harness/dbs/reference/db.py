"""``--db reference``: the bundled broker, one ``kraftwerk node`` process per
node, run by the local backend behind per-link proxies."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.config import TestConfig
from harness.config.timings import reference_settings
from harness.dbs.external import ensure_topics
from harness.dbs.parts import ClusterParts, ControlEndpoints, Topology
from harness.dbs.reference.local import PortTaken, ProxiedCluster, contract, ports_needed
from harness.errors import HarnessError
from harness.rundir.state import RunState
from harness.runtimes.local import allocate_ports
from reference_impl.core.config import ProtocolConfig
from reference_impl.server.launcher import ClusterError

#: how many times a run plans its ports afresh when a parallel run took one first
PLAN_ATTEMPTS = 3


def preflight(cfg: TestConfig) -> None:
    """Fail as bad input before anything starts: the ports must be free."""
    if cfg.base_port:
        allocate_ports(ports_needed(cfg.node_count()), cfg.base_port)
    try:
        import reference_impl.server.runtime  # noqa: F401  # late: the import is the check (0.4 s)
    except ImportError as e:
        raise HarnessError(f"the reference broker cannot be imported: {e}") from None


def protocol_config(cfg: TestConfig) -> ProtocolConfig:
    """The settings the nodes run with (for what the nemesis waits on)."""
    return ProtocolConfig.from_properties({**reference_settings(cfg.brokers), **cfg.protocol})


def node_config(cfg: TestConfig) -> dict[str, str]:
    """Every node's settings (``--set`` values): the timing table, the test's
    cluster settings, its protocol settings and variants."""
    props = reference_settings(cfg.brokers)
    props["min.insync.replicas"] = str(cfg.min_isr)
    props["default.replication.factor"] = str(cfg.rf)
    props["num.partitions"] = str(cfg.partitions)
    props.update({k.replace("_", "."): str(v) for k, v in cfg.protocol.items()})
    if cfg.flush_messages:
        props["log.flush.interval.messages"] = str(cfg.flush_messages)
    for name, on in sorted(cfg.variants.items()):
        props[f"variant.{name}"] = "on" if on else "off"
    return props


def node_settings(cfg: TestConfig) -> list[str]:
    """:func:`node_config` as ``--set KEY=VALUE`` flags."""
    return [x for k, v in node_config(cfg).items() for x in ("--set", f"{k}={v}")]


@dataclass
class ReferenceDB:
    """The reference broker as local processes behind proxies: ``local``
    (the processes, ports and proxy) and ``cluster`` (the contract the
    nemesis drives, in parts)."""

    cfg: TestConfig
    run_dir: Path
    state: RunState
    local: ProxiedCluster | None = field(default=None, init=False)
    cluster: ClusterParts | None = field(default=None, init=False)
    #: each node's control endpoint (``status``), for tests and tools
    endpoints: ControlEndpoints | None = field(default=None, init=False)

    def setup(self) -> None:
        cfg = self.cfg
        for attempt in range(PLAN_ATTEMPTS):
            self.local = ProxiedCluster.for_run(cfg.layout(), self.run_dir, self.state, base_port=cfg.base_port,
                                                config=node_config(cfg), seed=cfg.seed or 0,
                                                storage_mode="memory-cache" if cfg.storage == "pagecache" else "os")
            self.cluster, self.endpoints = contract(self.local, Topology.of(cfg.layout()), cfg.keys())
            try:
                self.local.start_proxy()
                break
            except PortTaken:
                # ports named by --base-port are the user's: a clash there is theirs to see
                if cfg.base_port or attempt == PLAN_ATTEMPTS - 1:
                    raise
        self.local.start_all()
        try:
            self.local.wait_ready(timeout=30)
        except ClusterError as e:
            raise HarnessError(str(e)) from None
        ensure_topics(self.local.client_bootstrap(), cfg, timeout=60, expect_brokers=cfg.brokers, check_rf=True)

    def client_bootstrap(self) -> str:
        assert self.local is not None
        return self.local.client_bootstrap()

    def teardown(self) -> None:
        if self.cluster is not None:
            self.cluster.timers.cancel_all()
        if self.local is not None:
            self.local.teardown()
