"""The test's flags, shared by ``kraftwerk run`` and ``kraftwerk sim``: one
name per setting of :class:`harness.config.TestConfig` (the YAML key is the
flag without its dashes, ``min-isr`` or ``min_isr``). A setting one runtime
has no use for is refused by the configuration, not missing from a command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import click

from harness.config import TestConfig, build_config, load_yaml, parse_variants
from harness.errors import UsageError
from nemesis.faults import KINDS

_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML file of settings (flags win)."),
    click.option("--name", help="Test name (results/<name>/...)."),
    click.option("--hosts", type=click.Path(dir_okay=False),
                 help="Hosts file for --backend ssh (kraftwerk hosts up writes one)."),
    click.option("--ssh-accept-new", is_flag=True, default=None,
                 help="Trust a host key seen for the first time (default: known_hosts only)."),
    click.option("--net-cut", type=click.Choice(["drop", "reject"]),
                 help="Partitions drop packets (default) or refuse TCP with a reset (kernel backends)."),
    click.option("--db", type=click.Choice(["reference", "external", "kafka"]),
                 help="reference (bundled broker), kafka (real Apache Kafka, KRaft) or external."),
    click.option("--kafka-version", help="--db kafka: the Kafka release to fetch from Maven Central (default 4.4.0)."),
    click.option("--kafka-home", type=click.Path(file_okay=False),
                 help="--db kafka: use this Kafka binary distribution (its libs/)."),
    click.option("--kafka-config", "kafka_config", multiple=True, metavar="KEY=VALUE",
                 help="--db kafka: a server.properties override for every node (repeatable)."),
    click.option("--bootstrap", help="HOST:PORT[,...] of an external cluster (--db external)."),
    click.option("--brokers", type=int, help="Broker count (default 3)."),
    click.option("--controllers", type=int, help="KRaft voter count (default 3)."),
    click.option("--combined/--dedicated-controllers", default=None,
                 help="Real processes: voters on the first brokers (default: dedicated controller nodes)."),
    click.option("--topics", type=int, help="Topic count (default 1)."),
    click.option("--partitions", type=int, help="Partitions per topic (default 2)."),
    click.option("--rf", type=int, help="Replication factor (default 3)."),
    click.option("--min-isr", type=int, help="min.insync.replicas (default 2)."),
    click.option("--acks", type=click.Choice(["all", "1", "0", "mixed"]),
                 help="Producer acks: all, 1, 0 (real clients), or mixed (even worker threads all, odd 1)."),
    click.option("--idempotent", is_flag=True, default=None,
                 help="acks=all producers use enable.idempotence=true (acks=1 ones cannot). Default off."),
    click.option("--retries", type=int,
                 help="Producers' retries (default: 0, or librdkafka's default for idempotent producers)."),
    click.option("--auto-offset-reset", type=click.Choice(["error", "earliest", "latest"]),
                 help="Consumers' auto.offset.reset (default error: a truncated log is seen, not skipped)."),
    click.option("--safe", is_flag=True, default=None,
                 help="Kafka's documented no-loss settings: acks=all, idempotence, RF>=3, min ISR>=2, "
                      "no unclean election."),
    click.option("--workload", type=click.Choice(["queue", "txn", "ctp"]),
                 help="queue (sends and polls, default), txn (Kafka transactions of sends and polls; --db kafka) "
                      "or ctp (consume-transform-produce in a consumer group)."),
    click.option("--ctp-txn", is_flag=True, default=None,
                 help="--workload ctp: each round one transaction of outputs and offsets (exactly-once; --db kafka)."),
    click.option("--abort-probability", type=float,
                 help="--workload txn: probability a transaction is aborted instead of committed (default 0)."),
    click.option("--max-txn-length", type=int,
                 help="--workload txn: at most this many sends and polls per transaction (default 4)."),
    click.option("--isolation-level", type=click.Choice(["read_committed", "read_uncommitted"]),
                 help="Consumers' isolation.level (default read_committed)."),
    click.option("--sub-via", type=click.Choice(["assign", "subscribe"]),
                 help="Consumers assign partitions themselves (default) or subscribe as one consumer group."),
    click.option("--static-members", is_flag=True, default=None,
                 help="Subscribed consumers are static group members (group.instance.id per worker thread, KIP-345)."),
    click.option("--crash-clients", is_flag=True, default=None,
                 help="Kill a client mid-operation and replace it, about once per --crash-client-interval each."),
    click.option("--crash-client-interval", type=float,
                 help="Seconds between crashes of each client (default 30; Jepsen's)."),
    click.option("--variant", "variant", multiple=True, metavar="NAME=on|off", help="Protocol variant (repeatable)."),
    click.option("--protocol", "protocol", multiple=True, metavar="KEY=VALUE",
                 help="Protocol setting over the runtime's defaults, e.g. replica.lag.time.max.ms=3000 (repeatable)."),
    click.option("--nemesis", help=f"Comma-separated faults, each KIND or KIND:TARGET; kinds: {', '.join(KINDS)} "
                                   "(or all, none)."),
    click.option("--scenario", help="A seed's failure narrative: a script played instead of --nemesis "
                                    "(unclean-loss, last-replica-standing, acks1-leader-kill) or a story "
                                    "composite told at random moments, joining the --nemesis mix if one is "
                                    "given (leader-churn, last-replica-standing, isr-crash, expand-race)."),
    click.option("--schedule", type=click.Path(dir_okay=False),
                 help="Replay the fault schedule of a run's test.json (or a JSON list of nemesis ops)."),
    click.option("--swarm", is_flag=True, default=None,
                 help="Simulator: each seed draws its own subset of the --nemesis mix (default all) and its "
                      "interval, mode and rate, recorded in test.json."),
    click.option("--nemesis-mode", type=click.Choice(["sequential", "overlap"]),
                 help="One fault at a time (default) or every fault type on its own timetable, overlapping."),
    click.option("--nemesis-interval", type=float, help="Seconds between fault changes (default 5)."),
    click.option("--time-limit", type=float, help="Seconds of client operations (default 30)."),
    click.option("--rate", type=float, help="Client ops per second, all processes together (default 50)."),
    click.option("--concurrency", type=int, help="Client processes (default 4)."),
    click.option("--consumers", type=int, help="Simulator: consumer processes beside the producers (default 1)."),
    click.option("--seed", type=int, help="Seed for every random choice (recorded in test.json)."),
    click.option("--out", type=click.Path(file_okay=False), help="Results directory (default results)."),
    click.option("--base-port", type=int, help="Real processes: first port to use on 127.0.0.1 (default: free ports)."),
    click.option("--storage", type=click.Choice(["file", "pagecache", "lazyfs"]),
                 help="How power loss loses un-fsynced writes: never (file), the broker's emulation (pagecache), "
                      "or kraftwerk fs under each node (lazyfs: netns, docker, ssh; the default there for power-loss "
                      "faults)."),
    click.option("--torn-writes", is_flag=True, default=None,
                 help="With --storage lazyfs: a power loss keeps a random prefix of each file's un-fsynced writes."),
    click.option("--flush-messages", type=int,
                 help="log.flush.interval.messages: fsync every N messages (default 0: never)."),
    click.option("--op-timeout", type=float, help="Seconds before a client op is recorded as info (default 10)."),
    click.option("--liveness", type=click.Choice(["auto", "strict", "report"]),
                 help="A partition unavailable after the final heal fails the run when a replica that may lead "
                      "ran (auto, default), always (strict) or never (report)."),
    click.option("--link-latency-ms", type=int, help="Simulator: each message's minimum delay (default 1)."),
    click.option("--link-jitter-ms", type=float, help="Simulator: mean extra delay, exponential (default 2)."),
    click.option("--clock-drift", type=float, help="Simulator: clocks drift by up to this fraction (default 0)."),
    click.option("--json", "as_json", is_flag=True, help="Print the result object(s) on stdout."),
]


def test_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with every test flag."""
    for opt in reversed(_OPTIONS):
        fn = opt(fn)
    return fn


def parse_protocol(items: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--protocol wants KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def config_from_flags(backend: str | None, flags: dict[str, Any]) -> TestConfig:
    """The one configuration from a YAML file and flags (flags win).
    ``backend`` is the command's: ``sim`` for ``kraftwerk sim`` (a file's
    real backend is for ``kraftwerk run``: one file serves both commands),
    the ``--backend`` flag or None for ``kraftwerk run`` (the file's, else
    local)."""
    config_file = flags.pop("config_file", None)
    file_values = load_yaml(config_file) if config_file else {}
    variant, protocol = flags.pop("variant", ()), flags.pop("protocol", ())
    flags["kafka_config"] = list(flags.get("kafka_config") or ()) or None
    if variant:
        flags["variants"] = parse_variants(variant)
    if protocol:
        flags["protocol"] = {**file_values.get("protocol", {}), **parse_protocol(protocol)}
    schedule = flags.get("schedule") or file_values.get("schedule")
    if schedule:
        file_values = {**recorded_settings(schedule), **file_values}
    file_backend = file_values.pop("backend", None)
    if backend is None:
        backend = "local" if file_backend is None or file_backend == "sim" else file_backend
    return build_config(file_values, {**flags, "backend": backend})


#: settings a replay takes from the recorded run's test.json (the workload's
#: and the cluster's; not its runtime's, its output or its fault mix)
REPLAYED = ("name", "workload", "ctp_txn", "abort_probability", "max_txn_length", "isolation_level", "retries",
            "auto_offset_reset", "safe", "crash_clients", "crash_client_interval", "sub_via", "static_members",
            "brokers", "controllers", "topics", "topic_prefix", "partitions", "rf", "min_isr", "acks",
            "idempotent", "variants", "protocol", "nemesis_interval", "time_limit", "rate", "concurrency", "seed",
            "op_timeout", "final_read_timeout", "setup_timeout", "flush_messages", "liveness")


def recorded_settings(path: str) -> dict[str, Any]:
    """The settings of the run whose test.json ``path`` is (empty for a
    plain list of entries): a replay runs the same test (flags and a YAML
    file still win)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}  # the configuration's check of --schedule says what is wrong
    if not isinstance(data, dict):
        return {}
    return {k: data[k] for k in REPLAYED if k in data and data[k] is not None}
