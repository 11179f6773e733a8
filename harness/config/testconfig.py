"""Test configuration: one validated object built from CLI flags and/or a YAML
file, for both runtimes (``kraftwerk run``: real processes, ``kraftwerk sim``:
the simulator). The two commands take the same flags and the same YAML keys;
they differ by runtime, not by spelling, and a setting one runtime has no use
for is refused by it with a one-line reason (``--base-port`` in the
simulator, ``--clock-drift`` on real processes).

Everything a run does is decided here before anything starts, so bad input is
rejected with a one-line message (exit 2) and no process, port or file is left
behind. The whole object is written to ``test.json`` so a run can be replayed
from its seed.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, PrivateAttr, ValidationError,
                      field_validator, model_validator)

from harness.config.kafka import check_variants, parse_overrides
from harness.config.placement import placement_error
from harness.config.settings import SETTINGS, only_for
from harness.errors import UsageError
from harness.rundir.store import BadName, check_name
from nemesis import NemesisPlan, replay, swarm
from nemesis.faults import FaultSpec, UnknownFault, expand
from nemesis.scenarios import NEEDS_PAGECACHE, SCENARIOS
from nemesis.stories import STORIES
from reference_impl.core.config import VARIANT_NAMES, ConfigError, ProtocolConfig
from reference_impl.server.layout import layout

#: protocol variants of the reference broker (ARCHITECTURE.md principle 2)
VARIANTS = VARIANT_NAMES


def _parse_mix(v: Any) -> list[FaultSpec]:
    """A nemesis mix as given (a comma list, names, groups, aliases) ->
    fault specs: the one parse of ``--nemesis`` (``nemesis.faults.expand``)."""
    try:
        return list(expand([v] if isinstance(v, (str, FaultSpec)) else v))
    except TypeError:
        raise ValueError(f"a nemesis mix is a list of fault names, not {v!r}") from None
    except UnknownFault as e:
        raise ValueError(str(e)) from None


#: a nemesis mix: parsed into :class:`~nemesis.faults.FaultSpec` values when
#: the configuration is validated, written to test.json by name
FaultMix = Annotated[list[FaultSpec], BeforeValidator(_parse_mix),
                     PlainSerializer(lambda v: [s.name for s in v], return_type=list[str])]

#: a replayed schedule as loaded: its entries, and every fault it may start
Replayed = tuple[tuple[dict[str, Any], ...], tuple[FaultSpec, ...]]


def load_schedule(path: str) -> Replayed:
    """A recorded schedule (``nemesis.replay.load``), its faults parsed."""
    try:
        entries, faults = replay.load(path)
    except replay.ScheduleError as e:
        raise ValueError(str(e)) from None
    return tuple(entries), faults


class TestConfig(BaseModel):
    """A campaign's settings. Field names match the ``kraftwerk run`` flags."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)
    __test__ = False  # not a pytest class, despite the name

    name: str = "queue"
    #: what the clients do: ``queue`` (sends and polls, Jepsen's queue
    #: workload) or ``txn`` (Kafka transactions of several sends and polls,
    #: committed or aborted; needs a broker with a transaction coordinator)
    #: or ``ctp`` (consume-transform-produce: a consumer group copies the
    #: input topics to ``<prefix>out`` and commits, workloads/ctp.py)
    workload: Literal["queue", "txn", "ctp"] = "queue"
    #: ctp: each round is one transaction of outputs and offsets
    #: (exactly-once; needs Kafka's transaction coordinator)
    ctp_txn: bool = False
    #: txn: the probability a transaction is aborted instead of committed
    abort_probability: float = Field(0.0, ge=0, le=1)
    #: txn: at most this many micro-operations (sends and polls) per transaction
    max_txn_length: int = Field(4, ge=1, le=64)
    #: the consumers' isolation.level (librdkafka's default: read_committed)
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed"
    #: how consumers get partitions (Jepsen's sub-via): ``assign`` (each
    #: process reads every key from its own positions) or ``subscribe`` (one
    #: consumer group; the coordinator assigns partitions and rebalances)
    sub_via: Literal["assign", "subscribe"] = "assign"
    #: subscribed consumers are static members (KIP-345): each worker
    #: thread's ``group.instance.id``, kept by the process that replaces a
    #: crashed or timed-out one, so it rejoins without a rebalance
    static_members: bool = False
    #: where the nodes run: processes on this machine behind proxies (local),
    #: network namespaces, containers, ssh hosts, or the simulator (sim)
    backend: Literal["local", "netns", "docker", "ssh", "sim"] = "local"
    #: ssh backend: the hosts file (harness/runtimes/hostsfile.py)
    hosts: str | None = None
    #: ssh backend: trust a host key seen for the first time (else known_hosts decides)
    ssh_accept_new: bool = False
    #: how a partition cuts on kernel backends: drop packets, or refuse TCP with a reset
    net_cut: Literal["drop", "reject"] = "drop"
    db: Literal["reference", "external", "kafka"] = "reference"
    bootstrap: str | None = None
    #: --db kafka: the release to fetch from Maven Central, or a binary
    #: distribution already on disk, and server.properties overrides
    kafka_version: str = Field("4.4.0", pattern=r"^\d+\.\d+\.\d+(-[A-Za-z0-9.]+)?$")
    kafka_home: str | None = None
    kafka_config: list[str] = Field(default_factory=list)
    brokers: int = Field(3, ge=1, le=9)
    controllers: int = Field(3, ge=1, le=9)
    combined: bool = False
    topics: int = Field(1, ge=1, le=50)
    topic_prefix: str = Field("t", pattern=r"^[A-Za-z0-9._-]{1,100}$")
    partitions: int = Field(2, ge=1, le=64)
    #: each input partition's replicas by broker name, the first the
    #: preferred leader: the topics are created with this assignment
    #: instead of the db's own placement (``harness.config.placement``; a
    #: replay takes the recorded run's, so its moves meet the same replicas)
    placement: dict[str, list[str]] | None = None
    rf: int = Field(3, ge=1)
    min_isr: int = Field(2, ge=1)
    acks: Literal["all", "1", "0", "mixed"] = "all"
    #: acks=all producers use enable.idempotence=true (acks=1 ones cannot:
    #: Kafka requires acks=all for idempotence); off by default
    idempotent: bool = False
    #: the producers' ``retries`` (librdkafka's); None: 0 for producers that
    #: are not idempotent (so NOT_ENOUGH_REPLICAS proves nothing was
    #: written), librdkafka's default for idempotent ones (it needs retries)
    retries: int | None = Field(None, ge=0)
    #: the consumers' ``auto.offset.reset``: ``error`` (default) makes a
    #: truncated log seen; ``earliest``/``latest`` skip silently, as users'
    #: consumers do
    auto_offset_reset: Literal["error", "earliest", "latest"] = "error"
    #: the settings Kafka documents for no loss of acknowledged writes
    #: (acks=all, enable.idempotence, replication factor 3 and
    #: min.insync.replicas 2, no unclean leader election, retries left to
    #: the client): turns idempotence on and refuses a setting against them
    safe: bool = False
    #: Jepsen's --crash-clients: a client process is killed mid-operation
    #: and replaced about once per ``crash_client_interval`` seconds each
    #: (real clients; workloads/crash.py)
    crash_clients: bool = False
    crash_client_interval: float = Field(30.0, gt=0)
    variants: dict[str, bool] = Field(default_factory=dict)
    #: the faults to draw from (``--nemesis``), parsed once here
    nemesis: FaultMix = Field(default_factory=list)
    nemesis_interval: float = Field(5.0, gt=0)
    nemesis_mode: Literal["sequential", "overlap"] = "sequential"
    scenario: str | None = None
    time_limit: float = 30.0
    rate: float = Field(50.0, gt=0)
    #: client processes: worker threads, each sending and polling (both runtimes)
    concurrency: int = Field(4, ge=1, le=256)
    seed: int | None = None
    test_count: int = Field(1, ge=1)
    out: str = "results"
    op_timeout: float = Field(10.0, gt=0)
    final_read_timeout: float = Field(30.0, gt=0)
    base_port: int = Field(0, ge=0, le=65000)
    #: where un-fsynced writes live, hence how power loss loses them: "file"
    #: (the OS page cache: nothing is ever lost), "pagecache" (the broker's
    #: in-process emulation), "lazyfs" (each node's data directory through
    #: kraftwerk fs, crashed on power loss; netns, docker, ssh). Default:
    #: "file", or for a power-loss fault "lazyfs" on netns, docker and ssh
    #: and "pagecache" on local processes.
    storage: Literal["file", "pagecache", "lazyfs"] | None = None
    #: log.flush.interval.messages of every broker: fsync after this many
    #: appended messages (0: never, Kafka's default, leaving it to the OS)
    flush_messages: int = Field(0, ge=0)
    #: storage lazyfs: a power loss keeps a random (seeded) prefix of each
    #: file's un-fsynced writes instead of none (torn writes)
    torn_writes: bool = False
    checker_engine: Literal["inline", "spark"] = "inline"
    #: whether a partition still unavailable after the final heal fails the
    #: run (checkers/availability): ``auto`` fails it when a replica the
    #: election rules may elect was running (stuck) and reports one down by
    #: design; ``strict`` fails both; ``report`` fails neither
    liveness: Literal["auto", "strict", "report"] = "auto"
    history_fsync_every: int = Field(200, ge=1)
    record_history: bool = True
    #: seconds for the cluster to come up and every partition to have a leader
    setup_timeout: float = Field(30.0, gt=0)
    #: protocol settings (``ProtocolConfig`` keys, e.g.
    #: ``replica_lag_time_max_ms``) over the runtime's own defaults
    protocol: dict[str, Any] = Field(default_factory=dict)
    #: the simulator's network: each message's delay is ``link_latency_ms``
    #: plus an exponential with mean ``link_jitter_ms``
    link_latency_ms: int = Field(1, ge=0)
    link_jitter_ms: float = Field(2.0, ge=0)
    #: the simulator's clocks drift by up to this fraction
    clock_drift: float = Field(0.0, ge=0, lt=1)
    #: the simulator's restarted process comes up this long after the
    #: nemesis asks (a JVM's start, log loading; 0: at once)
    start_delay_ms: int = Field(0, ge=0, le=600_000)
    #: replay this fault schedule (a run's test.json, or its ``schedule``
    #: list) instead of drawing one
    schedule: str | None = None
    #: swarm testing (``nemesis.swarm``): each seed draws its own subset of
    #: the mix (all generic faults if none is given) and schedule parameters
    swarm: bool = False
    #: the mix a swarm seed drew from (set by the draw, recorded in test.json)
    swarm_of: FaultMix = Field(default_factory=list)
    #: ``schedule`` as loaded when validated (:meth:`replaying`)
    _replayed: Replayed | None = PrivateAttr(default=None)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        try:
            return check_name(v)
        except BadName as e:
            raise ValueError(str(e)) from None

    @field_validator("time_limit")
    @classmethod
    def _time_limit_positive(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"time limit must be positive, got {v:g}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _all_overlaps(cls, data: Any) -> Any:
        """``--nemesis all`` runs every fault group on its own timetable
        (overlap mode) unless a mode is given: a bug that needs two faults
        at once (a shrunk ISR, then its last member's power loss) is reached
        by generic faults only when they overlap."""
        if isinstance(data, dict) and data.get("nemesis_mode") is None and not data.get("swarm"):
            raw = data.get("nemesis") or []
            names = [n.strip() for item in (raw if isinstance(raw, (list, tuple)) else [raw])
                     for n in str(getattr(item, "name", item)).split(",")]
            if "all" in names:
                data = {**data, "nemesis_mode": "overlap"}
        return data

    @field_validator("nemesis")
    @classmethod
    def _no_story_in_the_mix(cls, v: list[FaultSpec]) -> list[FaultSpec]:
        """The story composites are not faults to name here: they tell a
        seed's narrative, asked for with ``scenario``."""
        for spec in v:
            if spec.kind == "story":
                what = f"{spec.target} is a story composite" if spec.target else "story composites are scenarios"
                raise ValueError(f"{what}: use --scenario {spec.target or 'NAME'} (stories: {', '.join(STORIES)}; "
                                 "given with --nemesis, the story joins that mix)")
        return v

    @field_validator("scenario")
    @classmethod
    def _known_scenario(cls, v: str | None) -> str | None:
        """A scripted scenario, or one or more stories (a comma list)."""
        if v is None:
            return v
        names = [n.strip() for n in v.split(",") if n.strip()]
        for n in names:
            if n not in SCENARIOS and n not in STORIES:
                known = dict.fromkeys([*SCENARIOS, *STORIES])
                raise ValueError(f"unknown scenario {n!r} (known: {', '.join(known)})")
            if len(names) > 1 and n not in STORIES:
                raise ValueError(f"{n} is a script, played alone; only stories ({', '.join(STORIES)}) combine")
        if not names:
            raise ValueError("give a scenario name")
        return ",".join(names)

    @field_validator("variants")
    @classmethod
    def _known_variants(cls, v: dict[str, bool]) -> dict[str, bool]:
        for k in v:
            if k not in VARIANTS:
                raise ValueError(f"unknown variant {k!r} (known: {', '.join(VARIANTS)})")
        return v

    @model_validator(mode="after")
    def _placement_fits(self) -> "TestConfig":
        """A pinned placement names every input partition, ``rf`` distinct
        brokers of this cluster each (one line, exit 2, otherwise)."""
        why = self.placement_problem()
        if why:
            raise ValueError(why)
        return self

    def placement_problem(self) -> str | None:
        """Why the pinned placement cannot be this test's (None if it can,
        or none is pinned): one line (``harness.config.placement``)."""
        if self.placement is None:
            return None
        brokers = [n for n, _, roles in self.layout() if "broker" in roles]
        return placement_error(self.placement, self.keys(), brokers, self.rf)

    @model_validator(mode="after")
    def _consistent(self) -> "TestConfig":
        if self.db == "external":
            if not self.bootstrap:
                raise ValueError("--db external needs --bootstrap HOST:PORT")
            if self.nemesis or self.scenario:
                raise ValueError(
                    "--db external runs no nodes, so node faults are impossible: drop --nemesis"
                )
            if not re.fullmatch(r"[^\s,:]+:\d+(,[^\s,:]+:\d+)*", self.bootstrap):
                raise ValueError(f"--bootstrap must be HOST:PORT[,HOST:PORT...], got {self.bootstrap!r}")
        else:
            if self.bootstrap:
                raise ValueError("--bootstrap is only for --db external")
            if self.rf > self.brokers:
                raise ValueError(f"--rf {self.rf} exceeds --brokers {self.brokers}")
        if self.db == "kafka":
            _kafka_consistent(self)
        elif self.kafka_home or self.kafka_config:
            raise ValueError("--kafka-home and --kafka-config are only for --db kafka")
        if self.backend != "local" and self.db == "external":
            raise ValueError(f"--backend {self.backend} runs the reference broker: drop --db {self.db}")
        kinds = {s.kind for s in self.nemesis}
        for k in ("reassign", "decommission"):
            if k in kinds and self.brokers <= self.rf:
                raise ValueError(f"--nemesis {k} moves a replica to a broker outside the partition's replica set: "
                                 f"it needs more brokers than --rf (got {self.brokers} brokers, rf {self.rf})")
        if self.backend == "ssh" and not self.hosts:
            raise ValueError("--backend ssh needs --hosts HOSTS.yaml (kraftwerk hosts up writes one)")
        if self.hosts and self.backend != "ssh":
            raise ValueError("--hosts is only for --backend ssh")
        _workload_consistent(self)
        if "name" not in self.model_fields_set:  # results/<workload>/... unless named
            self.name = self.workload
        _client_consistent(self)
        if self.min_isr > self.rf:
            raise ValueError(f"--min-isr {self.min_isr} exceeds --rf {self.rf}")
        self._runtime_settings()
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(1, 2**31)
        if self.scenario is not None:
            if self.rf < 3 or self.brokers < 3:
                raise ValueError(f"scenario {self.scenario} needs --rf 3 and 3 brokers")
            if self.nemesis and not self.stories():
                raise ValueError(f"--scenario {self.scenario} is a fixed schedule: drop --nemesis")
        if self.swarm:
            if self.backend != "sim":
                raise ValueError("--swarm draws a nemesis per seed: it is for kraftwerk sim")
            if self.scenario or self.schedule:
                raise ValueError("--swarm draws its own faults: drop --scenario and --schedule")
            if not self.nemesis:
                self.nemesis = list(expand(["all"]))
        if self.storage is None:
            pc = (bool(kinds & {"lose-unfsynced", "torn-write"})
                  or any(n in NEEDS_PAGECACHE for n in (self.scenario or "").split(",")))
            if self.db == "kafka" and self.scenario and self.backend in ("netns", "docker", "ssh"):
                # a story's power loss: a JVM loses un-fsynced writes only through kraftwerk fs
                pc = pc or any(s.kind == "story" for s in self.faults())
            self.storage = ("lazyfs" if self.backend in ("netns", "docker", "ssh") else "pagecache") if pc else "file"
        if self.torn_writes and self.storage != "lazyfs":
            raise ValueError("--torn-writes is a mode of --storage lazyfs (kraftwerk fs crash --torn)")
        if self.storage == "lazyfs" and self.backend not in ("netns", "docker", "ssh"):
            raise ValueError("--storage lazyfs mounts each node's data directory through kraftwerk fs: "
                             "it runs on --backend netns, docker or ssh (local uses --storage pagecache)")
        if self.db == "kafka" and self.storage == "pagecache":
            raise ValueError("--storage pagecache is the reference broker's own emulation: Kafka loses "
                             "un-fsynced writes with --storage lazyfs on --backend netns, docker or ssh")
        return self

    def _runtime_settings(self) -> None:
        """Settings only one runtime has a use for are refused by the other."""
        defaults = TestConfig.model_fields
        if self.backend == "sim":
            if self.db != "reference":
                raise ValueError("the simulator runs the reference implementation only: drop --db")
            for name in only_for("real"):
                if name != "backend" and getattr(self, name) not in (defaults[name].default, None):
                    raise ValueError(f"{SETTINGS[name].flag_name} is for real processes, not the simulator")
        else:
            for name in only_for("sim"):
                if getattr(self, name) != defaults[name].default:
                    raise ValueError(f"{SETTINGS[name].flag_name} is for the simulator, not real processes")
        try:
            ProtocolConfig.from_properties(self.protocol)
        except ConfigError as e:
            raise ValueError(f"--protocol: {e}") from None
        if self.schedule is not None:
            if self.nemesis or self.scenario:
                raise ValueError("--schedule replays a recorded fault schedule: drop --nemesis and --scenario")
            self._replayed = load_schedule(self.schedule)
            try:
                replay.check_nodes(self._replayed[0], self.node_names(), self.schedule)
            except replay.ScheduleError as e:
                raise ValueError(str(e)) from None

    # ----------------------------------------------------------------- helpers
    def keys(self) -> list[str]:
        """Queue keys: every topic-partition, spelt ``<topic>-<partition>``."""
        return [f"{self.topic_prefix}{t}-{p}" for t in range(self.topics) for p in range(self.partitions)]

    def topic_names(self) -> list[str]:
        """Every topic the run creates: the inputs, and ctp's output topic."""
        names = [f"{self.topic_prefix}{t}" for t in range(self.topics)]
        return names + ([f"{self.topic_prefix}out"] if self.workload == "ctp" else [])

    def output_keys(self) -> list[str]:
        """ctp's output keys (``<prefix>out-<partition>``), else none."""
        if self.workload != "ctp":
            return []
        return [f"{self.topic_prefix}out-{p}" for p in range(self.partitions)]

    def layout(self) -> list[tuple[str, int, list[str]]]:
        """(name, node id, roles) per node process, as every runtime names
        them (``reference_impl.server.layout``): dedicated controllers by
        default (brokers n1.. with ids 1.., controllers c1.. with ids 101..),
        so broker faults leave the metadata quorum standing, as in production
        KRaft; ``combined`` puts the voters on the first brokers instead."""
        return layout(self.brokers, self.controllers, self.combined)

    def node_names(self) -> list[str]:
        return [n for n, _, _ in self.layout()]

    def has_nemesis(self) -> bool:
        return bool(self.nemesis or self.scenario or self.schedule)

    def stories(self) -> tuple[str, ...]:
        """The stories ``scenario`` tells as faults of the mix, at moments
        the schedule draws (``nemesis.stories``, ``nemesis.replay.told``)."""
        return replay.told(self.scenario or "", bool(self.nemesis))

    def script(self) -> str | None:
        """The scripted scenario this test plays instead of a mix, if any."""
        return self.scenario if self.scenario and not self.stories() else None

    def nemesis_plan(self, protocol: ProtocolConfig) -> NemesisPlan:
        """What the nemesis does, with the runtime's protocol timeouts: the
        mix drawn from, a scenario, or a recorded schedule replayed."""
        entries = self._replayed[0] if self._replayed else ()
        return NemesisPlan(self.faults(), self.nemesis_interval, self.nemesis_mode, self.script(),
                           protocol.replica_lag_time_max_ms, protocol.broker_session_timeout_ms, entries)

    def for_seed(self, seed: int) -> "TestConfig":
        """This test for one seed: with ``swarm`` the seed's own draw of
        faults and parameters (``nemesis.swarm``) from the mix it was given;
        a configuration already drawn (``swarm_of`` set) is kept."""
        if not self.swarm or self.swarm_of:
            return self
        mix = tuple(self.nemesis)
        return self.model_copy(update=swarm.draw(mix, seed).settings(self.rate, mix))

    def faults(self) -> tuple[FaultSpec, ...]:
        """Every fault the run may make: the stories told and the mix, or
        the replayed schedule's."""
        if self._replayed is not None:
            return self._replayed[1]
        return (*(FaultSpec("story", s) for s in self.stories()), *self.nemesis)

    def replaying(self, path: str, **update: Any) -> "TestConfig":
        """This test with the schedule recorded at ``path`` replayed instead
        of its own nemesis (and ``update``'s settings): what a search runs
        for each schedule it tries. The schedule is loaded here, as the
        validation of ``--schedule`` loads it."""
        out = self.model_copy(update={"schedule": path, "nemesis": [], "scenario": None, "swarm": False,
                                      "swarm_of": [], **update})
        try:
            out._replayed = load_schedule(path)
        except ValueError as e:
            raise UsageError(str(e)) from None
        why = out.placement_problem()  # a copy is not validated: a pin given in ``update`` is checked here
        if why:
            raise UsageError(why)
        return out

    def test_json(self) -> dict[str, Any]:
        """What a run directory's test.json says of the test (both runtimes):
        the settings, the keys and what the checkers read back."""
        return {"name": self.name, "runtime": self.backend, "txn": self.workload == "txn",
                "keys": self.keys(), **self.model_dump()}

    def node_count(self) -> int:
        if self.combined:
            return max(self.brokers, self.controllers)
        return self.brokers + self.controllers

    def idempotent_for_thread(self, thread: int) -> bool:
        """Whether the thread's producer is idempotent: ``idempotent`` and acks=all."""
        return bool(self.idempotent) and self.acks_for_thread(thread) == "all"

    def acks_for_thread(self, thread: int) -> str:
        """acks per process group: with ``mixed`` even worker threads use acks=all,
        odd ones acks=1, so both durability rows see the same faults."""
        if self.acks == "mixed":
            return "all" if thread % 2 == 0 else "1"
        return self.acks


def _client_consistent(cfg: "TestConfig") -> None:
    """Client settings that contradict each other or ``--safe``."""
    if cfg.safe:
        if cfg.acks != "all":
            raise ValueError(f"--safe means acks=all (Kafka's documented setting for no loss): drop --acks {cfg.acks}")
        if cfg.rf < 3 or cfg.min_isr < 2:
            raise ValueError("--safe means replication factor 3 or more and min.insync.replicas 2 or more")
        if cfg.variants.get("unclean_election") or any(
                # Kafka reads a boolean setting without regard to case
                kv.replace(" ", "").lower() == "unclean.leader.election.enable=true" for kv in cfg.kafka_config):
            raise ValueError("--safe means no unclean leader election: drop unclean_election")
        cfg.idempotent = True
    if cfg.retries == 0 and (cfg.idempotent or cfg.workload == "txn"):
        raise ValueError("an idempotent producer needs retries (librdkafka refuses retries=0 with "
                         "enable.idempotence): drop --retries 0")
    if cfg.backend == "sim":
        if cfg.acks == "0":
            raise ValueError("--acks 0 is for real clients: the simulator's producers wait for an answer")
        if cfg.auto_offset_reset != "error":
            raise ValueError("--auto-offset-reset is for real clients: the simulator's consumers never reset")


def _workload_consistent(cfg: "TestConfig") -> None:
    """Transactions need a transaction coordinator: the reference
    implementation models replication and answers a transactional producer
    as a broker that refuses transactions does, so ``--workload txn`` runs
    on real Kafka (or an external cluster) only."""
    if cfg.static_members and cfg.sub_via != "subscribe" and cfg.workload != "ctp":
        raise ValueError("--static-members is for consumer groups: add --sub-via subscribe (or --workload ctp)")
    if cfg.ctp_txn and cfg.workload != "ctp":
        raise ValueError("--ctp-txn is a setting of --workload ctp")
    if cfg.workload == "ctp":
        if cfg.ctp_txn and cfg.db == "reference":
            raise ValueError("--ctp-txn needs Kafka's transaction coordinator, which the reference "
                             "implementation does not model: use --db kafka (or drop --ctp-txn: at-least-once)")
        if cfg.acks != "all":
            raise ValueError("--workload ctp writes inputs and outputs with acks=all: drop --acks")
        if cfg.backend == "sim":
            raise ValueError("--workload ctp needs real clients (the simulator's have no output producer): "
                             "use a real backend")
    if cfg.workload == "txn":
        if cfg.sub_via == "subscribe":
            raise ValueError("--sub-via subscribe is a mode of --workload queue")
        if cfg.db == "reference":
            raise ValueError("--workload txn needs Kafka's transaction coordinator, which the reference "
                             "implementation does not model: use --db kafka")
        if cfg.acks != "all":
            raise ValueError("--workload txn: a transactional producer is idempotent, so acks=all: drop --acks")
        return
    for name in ("abort_probability", "max_txn_length"):
        if getattr(cfg, name) != TestConfig.model_fields[name].default:
            raise ValueError(f"--{name.replace('_', '-')} is a setting of --workload txn")


#: faults db kafka cannot make on the local backend, and why (one line each)
KAFKA_LOCAL_REFUSED = {
    "partition": "a Kafka broker advertises one address every peer dials, so the local backend's per-link "
                 "proxies cannot cut it link by link (partitions need kernel rules: a netns or docker backend)",
    "latency": "a Kafka broker advertises one address every peer dials, so the local backend's per-link "
               "proxies cannot delay its links (latency needs kernel rules: a netns, docker or ssh backend)",
    "lose-unfsynced": "losing un-fsynced writes of a JVM needs a filesystem that drops them (--storage lazyfs "
                      "on --backend netns)",
    "torn-write": "a torn write of a JVM's files needs a filesystem that tears them (--storage lazyfs on "
                  "--backend netns)",
}


def _kafka_consistent(cfg: "TestConfig") -> None:
    """What --db kafka cannot do: a variant setting the release cannot
    behave as (``harness.config.kafka.check_variants``), and faults the
    backend cannot make for a JVM (one line each, exit 2)."""
    try:
        check_variants(cfg.variants, cfg.kafka_version)
        parse_overrides(cfg.kafka_config)
    except UsageError as e:
        raise ValueError(str(e)) from None
    if cfg.backend == "local":
        for fault in cfg.nemesis:
            if fault.kind in KAFKA_LOCAL_REFUSED:
                raise ValueError(f"--nemesis {fault.name} on --db kafka: {KAFKA_LOCAL_REFUSED[fault.kind]}")
        if cfg.script():
            kinds = {s[0].split("-", 1)[1] for s in SCENARIOS[cfg.script()] if s[0] != "sleep"}
            for fault in sorted(kinds & set(KAFKA_LOCAL_REFUSED)):
                raise ValueError(f"--scenario {cfg.scenario} uses {fault} on --db kafka: {KAFKA_LOCAL_REFUSED[fault]}")


def parse_variants(items: tuple[str, ...] | list[str]) -> dict[str, bool]:
    """``NAME=on|off`` pairs -> dict; malformed input is a UsageError."""
    out: dict[str, bool] = {}
    for item in items:
        name, sep, val = item.partition("=")
        if not sep or val.lower() not in ("on", "off", "true", "false", "1", "0"):
            raise UsageError(f"--variant wants NAME=on|off, got {item!r}")
        out[name.strip()] = val.lower() in ("on", "true", "1")
    return out


def load_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise UsageError(f"config file {p} not found") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"config file {p}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"config file {p}: cannot read ({e.strerror})") from None
    except RecursionError:
        raise UsageError(f"config file {p}: nested too deeply") from None
    except yaml.YAMLError as e:
        raise UsageError(f"config file {p}: not valid YAML ({str(e).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"config file {p}: expected a mapping of settings")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def build_config(file_values: dict[str, Any] | None, flag_values: dict[str, Any]) -> TestConfig:
    """Merge a YAML file with CLI flags (flags win) and validate, turning the
    first pydantic error into a one-line :class:`UsageError`."""
    merged: dict[str, Any] = dict(file_values or {})
    for k, v in flag_values.items():
        if v is None:
            continue
        if k == "variants" and isinstance(v, dict):
            merged["variants"] = {**merged.get("variants", {}), **v}
        else:
            merged[k] = v
    try:
        return TestConfig(**merged)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        flag = f"--{loc.replace('_', '-')}: " if loc else ""
        raise UsageError(f"{flag}{msg}") from None
