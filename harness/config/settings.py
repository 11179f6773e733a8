"""The test's settings as one table: for each field of :class:`TestConfig`,
what a person reads about it and where it may be given.

Three readers take it and keep no list of their own: the command line (each
setting's flag, its type and choices derived from the field,
``harness.cli.options``), a campaign file (which settings a matrix may vary,
by their flag name or Kafka's configuration key, ``harness.campaign.spec``)
and a replay (which settings a ``--schedule test.json`` takes from the
recorded run). The configuration itself reads which runtime refuses which
setting (``TestConfig``'s validation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from nemesis.faults import KINDS

#: the runtimes a campaign or a command names: the simulator, or real processes
Runtime = Literal["sim", "real"]
BOTH: Final[frozenset[str]] = frozenset({"sim", "real"})
REAL: Final[frozenset[str]] = frozenset({"real"})
SIM: Final[frozenset[str]] = frozenset({"sim"})


@dataclass(frozen=True)
class Setting:
    """One field of :class:`~harness.config.TestConfig`, as people give it."""

    field: str
    #: the flag's help (one line, the default in parentheses)
    help: str = ""
    #: the runtimes that take it: the other refuses a value other than the default
    runtimes: frozenset[str] = BOTH
    #: other names a campaign file may use for it (Kafka's configuration keys)
    aliases: tuple[str, ...] = ()
    #: a ``--schedule test.json`` replay takes it from the recorded run
    replayed: bool = False
    #: a flag of ``kraftwerk run`` and ``kraftwerk sim`` (False: YAML only)
    flag: bool = True
    #: the commands whose flag it is, when not both (``run``: real processes)
    commands: tuple[str, ...] = ("run", "sim")
    #: a campaign file may set it (the campaign itself owns name, out, seed)
    campaign: bool = True
    #: the flag's declaration when not ``--<field>`` (a boolean pair, a singular)
    declaration: str | None = None
    #: a path flag: "file" or "dir"
    path: str | None = None
    metavar: str | None = None
    #: the flag's choices when fewer than the field's (``--backend`` of ``run``)
    choices: tuple[str, ...] | None = None

    @property
    def flag_name(self) -> str:
        """The flag a person types, ``--min-isr`` for ``min_isr``."""
        if self.declaration:
            return self.declaration.split("/")[0]
        return "--" + self.field.replace("_", "-")


S = Setting

#: every setting of a test, in the order ``--help`` lists them
TABLE: Final[tuple[Setting, ...]] = (
    S("name", "Test name (results/<name>/...).", replayed=True, campaign=False),
    S("hosts", "Hosts file for --backend ssh (kraftwerk hosts up writes one).", path="file"),
    S("ssh_accept_new", "Trust a host key seen for the first time (default: known_hosts only)."),
    S("net_cut", "Partitions drop packets (default) or refuse TCP with a reset (kernel backends)."),
    S("db", "reference (bundled broker), kafka (real Apache Kafka, KRaft) or external.", runtimes=REAL),
    S("kafka_version", "--db kafka: the Kafka release to fetch from Maven Central (default 4.4.0)."),
    S("kafka_home", "--db kafka: use this Kafka binary distribution (its libs/).", path="dir"),
    S("kafka_config", "--db kafka: a server.properties override for every node (repeatable).", metavar="KEY=VALUE"),
    S("bootstrap", "HOST:PORT[,...] of an external cluster (--db external)."),
    S("brokers", "Broker count (default 3).", replayed=True),
    S("controllers", "KRaft voter count (default 3).", replayed=True),
    S("combined", "Real processes: voters on the first brokers (default: dedicated controller nodes).",
      runtimes=REAL, declaration="--combined/--dedicated-controllers"),
    S("topics", "Topic count (default 1).", replayed=True),
    S("topic_prefix", replayed=True, flag=False),
    S("partitions", "Partitions per topic (default 2).", replayed=True, aliases=("num.partitions",)),
    S("placement", "Each partition's replicas as created (a replay pins the recorded run's).", replayed=True,
      flag=False, campaign=False),
    S("rf", "Replication factor (default 3).", replayed=True,
      aliases=("replication.factor", "default.replication.factor")),
    S("min_isr", "min.insync.replicas (default 2).", replayed=True, aliases=("min.insync.replicas",)),
    S("acks", "Producer acks: all, 1, 0 (real clients), or mixed (even worker threads all, odd 1).", replayed=True),
    S("idempotent", "acks=all producers use enable.idempotence=true (acks=1 ones cannot). Default off.",
      replayed=True, aliases=("enable.idempotence", "idempotence")),
    S("retries", "Producers' retries (default: 0, or librdkafka's default for idempotent producers).",
      replayed=True),
    S("auto_offset_reset", "Consumers' auto.offset.reset (default error: a truncated log is seen, not skipped).",
      replayed=True),
    S("safe", "Kafka's documented no-loss settings: acks=all, idempotence, RF>=3, min ISR>=2, no unclean election.",
      replayed=True),
    S("workload", "queue (sends and polls, default), txn (Kafka transactions of sends and polls; --db kafka) "
                  "or ctp (consume-transform-produce in a consumer group).", replayed=True),
    S("ctp_txn", "--workload ctp: each round one transaction of outputs and offsets (exactly-once; --db kafka).",
      replayed=True),
    S("abort_probability", "--workload txn: probability a transaction is aborted instead of committed (default 0).",
      replayed=True),
    S("max_txn_length", "--workload txn: at most this many sends and polls per transaction (default 4).",
      replayed=True),
    S("isolation_level", "Consumers' isolation.level (default read_committed).", replayed=True),
    S("sub_via", "Consumers assign partitions themselves (default) or subscribe as one consumer group.",
      replayed=True),
    S("static_members", "Subscribed consumers are static group members (group.instance.id per worker thread, "
                        "KIP-345).", replayed=True),
    S("crash_clients", "Kill a client mid-operation and replace it, about once per --crash-client-interval each.",
      replayed=True),
    S("crash_client_interval", "Seconds between crashes of each client (default 30; Jepsen's).", replayed=True),
    S("variants", "Protocol variant (repeatable).", replayed=True, declaration="--variant", metavar="NAME=on|off",
      campaign=False),
    S("protocol", "Protocol setting over the runtime's defaults, e.g. replica.lag.time.max.ms=3000 (repeatable).",
      replayed=True, metavar="KEY=VALUE", campaign=False),
    S("nemesis", f"Comma-separated faults, each KIND or KIND:TARGET; kinds: {', '.join(KINDS)} (or all, none)."),
    S("scenario", "A seed's failure narrative: a script played instead of --nemesis (unclean-loss, "
                  "last-replica-standing, acks1-leader-kill) or a story composite told at random moments, joining "
                  "the --nemesis mix if one is given (leader-churn, last-replica-standing, isr-crash, expand-race)."),
    S("schedule", "Replay the fault schedule of a run's test.json (or a JSON list of nemesis ops).", path="file",
      campaign=False),
    S("swarm", "Simulator: each seed draws its own subset of the --nemesis mix (default all) and its interval, "
               "mode and rate, recorded in test.json."),
    S("swarm_of", flag=False, campaign=False),
    S("nemesis_mode", "One fault at a time (default) or every fault type on its own timetable, overlapping."),
    S("nemesis_interval", "Seconds between fault changes (default 5).", replayed=True),
    S("time_limit", "Seconds of client operations (default 30).", replayed=True),
    S("rate", "Client ops per second, all processes together (default 50).", replayed=True),
    S("concurrency", "Client processes: worker threads, each sending and polling (default 4).", replayed=True),
    S("seed", "Seed for every random choice (recorded in test.json).", replayed=True, campaign=False),
    S("out", "Results directory (default results).", path="dir", campaign=False),
    S("base_port", "Real processes: first port to use on 127.0.0.1 (default: free ports).", runtimes=REAL),
    S("storage", "How power loss loses un-fsynced writes: never (file), the broker's emulation (pagecache), or "
                 "kraftwerk fs under each node (lazyfs: netns, docker, ssh; the default there for power-loss "
                 "faults).", runtimes=REAL),
    S("torn_writes", "With --storage lazyfs: a power loss keeps a random prefix of each file's un-fsynced writes."),
    S("flush_messages", "log.flush.interval.messages: fsync every N messages (default 0: never).", replayed=True),
    S("op_timeout", "Seconds before a client op is recorded as info (default 10).", replayed=True),
    S("liveness", "A partition unavailable after the final heal fails the run when a replica that may lead ran "
                  "(auto, default), always (strict) or never (report).", replayed=True),
    S("final_read_timeout", replayed=True, flag=False),
    S("setup_timeout", replayed=True, flag=False),
    S("checker_engine", flag=False),
    S("history_fsync_every", flag=False),
    S("record_history", flag=False),
    S("link_latency_ms", "Simulator: each message's minimum delay (default 1).", runtimes=SIM),
    S("link_jitter_ms", "Simulator: mean extra delay, exponential (default 2).", runtimes=SIM),
    S("clock_drift", "Simulator: clocks drift by up to this fraction (default 0).", runtimes=SIM),
    S("start_delay_ms", "Simulator: a restarted node's process comes up this many ms later, as a JVM's start "
                        "does on real hosts (default 0: at once).", runtimes=SIM),
    S("backend", "Where nodes run: local processes behind proxies (default), network namespaces, containers, or "
                 "ssh hosts.", runtimes=REAL, commands=("run",), choices=("local", "netns", "docker", "ssh")),
    S("test_count", "Run the test N times with seeds seed, seed+1, ...", commands=("run",), campaign=False),
)

#: the table by field name
SETTINGS: Final[dict[str, Setting]] = {s.field: s for s in TABLE}

#: settings a replay takes from the recorded run's test.json (the workload's
#: and the cluster's; not its runtime's, its output or its fault mix)
REPLAYED: Final[tuple[str, ...]] = tuple(s.field for s in TABLE if s.replayed)


def only_for(runtime: str) -> tuple[str, ...]:
    """The settings only ``runtime`` takes (the other refuses them)."""
    return tuple(s.field for s in TABLE if s.runtimes == frozenset({runtime}))


#: what a run's place decides, not its test: where it goes, what it is called, its seed
PLACED: Final = ("name", "out", "seed", "test_count")


def command_line(cfg: Any, command: str) -> list[str]:
    """The flags that give ``cfg`` (a :class:`~harness.config.TestConfig`)
    to ``kraftwerk <command>``: each setting of the command that differs
    from its default, but those a run's place decides (name, output, seed)
    and those the command's runtime refuses. For people: a command to
    replay a campaign's cell by hand."""
    runtime = "sim" if command == "sim" else "real"
    out: list[str] = []
    for s in TABLE:
        if not s.flag or s.field in PLACED or command not in s.commands or runtime not in s.runtimes:
            continue
        value, default = getattr(cfg, s.field), type(cfg).model_fields[s.field].get_default(call_default_factory=True)
        if value == default or value is None:
            continue
        if isinstance(value, bool):
            pair = (s.declaration or s.flag_name).split("/")
            out.append(pair[0] if value else pair[-1])
        elif isinstance(value, dict):
            out += [x for k, v in value.items() for x in (s.flag_name, f"{k}={_word(v)}")]
        elif isinstance(value, list):
            names = [getattr(v, "name", v) for v in value]
            out += [s.flag_name, ",".join(names)] if s.field == "nemesis" else \
                [x for v in names for x in (s.flag_name, str(v))]
        else:
            out += [s.flag_name, str(value)]
    return out


def _word(v: Any) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)
