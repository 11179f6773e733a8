"""``--db reference``: the bundled broker, one ``kraftwerk node`` process per
node, run by the local backend behind per-link proxies."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.dbs.reference.local import LocalCluster, ports_needed
from harness.runtimes.local import allocate_ports
from harness.config import TestConfig
from harness.config.timings import reference_settings
from harness.dbs.external import ensure_topics
from harness.errors import HarnessError
from harness.rundir.state import RunState
from reference_impl.core.config import ProtocolConfig

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


def node_settings(cfg: TestConfig) -> list[str]:
    props = reference_settings(cfg.brokers)
    props["min.insync.replicas"] = str(cfg.min_isr)
    props["default.replication.factor"] = str(cfg.rf)
    props["num.partitions"] = str(cfg.partitions)
    props.update({k.replace("_", "."): str(v) for k, v in cfg.protocol.items()})
    if cfg.flush_messages:
        props["log.flush.interval.messages"] = str(cfg.flush_messages)
    for name, on in sorted(cfg.variants.items()):
        props[f"variant.{name}"] = "on" if on else "off"
    out: list[str] = []
    for k, v in props.items():
        out += ["--set", f"{k}={v}"]
    return out


@dataclass
class ReferenceDB:
    cfg: TestConfig
    run_dir: Path
    state: RunState
    cluster: LocalCluster | None = field(default=None, init=False)

    def setup(self) -> None:
        cfg = self.cfg
        self.cluster = LocalCluster(
            cfg.layout(), self.run_dir, self.state,
            base_port=cfg.base_port, node_args=node_settings(cfg), seed=cfg.seed or 0,
        )
        self.cluster._keys = cfg.keys()
        self.cluster.start_proxy()
        self.cluster.start_all("memory-cache" if cfg.storage == "pagecache" else "os")
        self.cluster.wait_ready(timeout=30)
        ensure_topics(self.cluster.client_bootstrap(), cfg, timeout=60, expect_brokers=cfg.brokers, check_rf=True)

    def client_bootstrap(self) -> str:
        assert self.cluster is not None
        return self.cluster.client_bootstrap()

    def teardown(self) -> None:
        if self.cluster is not None:
            self.cluster.teardown()
