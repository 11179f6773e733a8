"""``--db external``: a cluster the harness does not run. Only the workload and
the checks apply — no node faults, no logs to collect."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from harness.config import TestConfig
from harness.config.placement import assignment, differs
from harness.errors import HarnessError


@dataclass
class ExternalDB:
    cfg: TestConfig
    nodes: list[str] = field(default_factory=list)

    def client_bootstrap(self) -> str:
        assert self.cfg.bootstrap
        return self.cfg.bootstrap

    def setup(self) -> None:
        ensure_topics(self.client_bootstrap(), self.cfg, timeout=30)

    def teardown(self) -> None:
        return None

    def collect(self) -> None:
        return None


def ensure_topics(bootstrap: str, cfg: TestConfig, timeout: float, expect_brokers: int = 1,
                  check_rf: bool = False, alive: Callable[[], None] | None = None) -> None:
    """Create the test's topics (CreateTopics, or auto-creation where a cluster
    has no CreateTopics handler, like librdkafka's mock) and wait until every
    topic-partition has a leader. ``alive`` raises if the cluster's processes
    died meanwhile (so a node that cannot start is named at once)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": 5000})
    want = {t: cfg.partitions for t in cfg.topic_names()}
    deadline = time.monotonic() + timeout
    while True:  # a cluster just started may not have its brokers registered yet
        try:
            md = admin.list_topics(timeout=min(10, timeout))
            if len(md.brokers) >= expect_brokers:
                break
            err = f"{len(md.brokers)} of {expect_brokers} brokers registered"
        except KafkaException as e:
            err = e.args[0].str()
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise HarnessError(f"cannot reach {bootstrap}: {err}")
        time.sleep(0.5)
    missing = [t for t in want if t not in md.topics or md.topics[t].error is not None]
    if missing and not check_rf:  # a metadata request auto-creates a topic where the cluster allows
        for t in missing:
            try:
                admin.list_topics(topic=t, timeout=2)
            except KafkaException:
                pass
        md = admin.list_topics(timeout=min(10, timeout))
        missing = [t for t in want if t not in md.topics or md.topics[t].error is not None]
    if missing:
        futs = admin.create_topics([new_topic(cfg, t, len(md.brokers)) for t in missing],
                                   operation_timeout=10, request_timeout=15)
        for t, fut in futs.items():
            try:
                fut.result(timeout=20)
            except Exception:
                pass  # already exists, or no CreateTopics handler: auto-creation below
    last = ""
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=5)
        except KafkaException as e:
            last = str(e)
            time.sleep(0.5)
            continue
        ok = True
        for t, n in want.items():
            tm = md.topics.get(t)
            if tm is None or tm.error is not None or len(tm.partitions) < n:
                ok = False
                last = f"topic {t}: {tm.error if tm is not None and tm.error else 'not ready'}"
                break
            if any(p.leader < 0 for p in tm.partitions.values()):
                ok = False
                last = f"topic {t}: a partition has no leader"
                break
            if check_rf and any(len(p.replicas) != cfg.rf for p in tm.partitions.values()):
                raise HarnessError(f"topic {t} exists with a replication factor other than {cfg.rf}")
            if check_rf and cfg.placement is not None and t in cfg.topic_names()[:cfg.topics]:
                pinned_as_asked(cfg, t, tm)
        if ok:
            return
        for t in want if not check_rf else ():  # a metadata request auto-creates where allowed
            try:
                admin.list_topics(topic=t, timeout=2)
            except KafkaException:
                pass
        time.sleep(0.5)
    raise HarnessError(f"topics not ready on {bootstrap} after {timeout:.0f}s ({last})")


def new_topic(cfg: TestConfig, topic: str, brokers: int) -> NewTopic:
    """The CreateTopics entry of one of the test's topics: the pinned
    placement's replica assignment where the test pins one (an input
    topic), else the partition count and replication factor for the db to
    place (no more replicas than brokers registered: an external cluster's
    size is its own)."""
    config = {"min.insync.replicas": str(cfg.min_isr)}
    if cfg.placement is not None and topic in cfg.topic_names()[:cfg.topics]:
        ids = {n: i for n, i, _ in cfg.layout()}
        # librdkafka wants the partition count beside an assignment, and no replication factor
        return NewTopic(topic, num_partitions=cfg.partitions,
                        replica_assignment=assignment(cfg.placement, topic, cfg.partitions, ids), config=config)
    return NewTopic(topic, num_partitions=cfg.partitions, replication_factor=min(cfg.rf, max(1, brokers)),
                    config=config)


def pinned_as_asked(cfg: TestConfig, topic: str, tm: Any) -> None:
    """Refuse a topic whose replicas are not the pinned placement's (one
    left from before, or a db that ignored the assignment): the replay
    would re-plan every move it makes."""
    names = {i: n for n, i, _ in cfg.layout()}
    created = {f"{topic}-{p}": [names.get(r, str(r)) for r in pm.replicas] for p, pm in tm.partitions.items()}
    pinned = {k: v for k, v in (cfg.placement or {}).items() if k in created}
    wrong = differs(pinned, created)
    if wrong:
        raise HarnessError(f"topic {topic} has other replicas than the pinned placement: {'; '.join(wrong)}")
