"""The test's flags, shared by ``kraftwerk run`` and ``kraftwerk sim``: one
name per setting of :class:`harness.config.TestConfig` (the YAML key is the
flag without its dashes, ``min-isr`` or ``min_isr``). A setting one runtime
has no use for is refused by the configuration, not missing from a command.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from harness.config import TestConfig, build_config, load_yaml, parse_variants
from harness.errors import UsageError
from nemesis.faults import KINDS

_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML file of settings (flags win)."),
    click.option("--name", help="Test name (results/<name>/...)."),
    click.option("--db", type=click.Choice(["reference", "external"]), help="reference (bundled broker) or external."),
    click.option("--bootstrap", help="HOST:PORT[,...] of an external cluster (--db external)."),
    click.option("--brokers", type=int, help="Broker count (default 3)."),
    click.option("--controllers", type=int, help="KRaft voter count (default 3)."),
    click.option("--combined/--dedicated-controllers", default=None,
                 help="Real processes: voters on the first brokers (default: dedicated controller nodes)."),
    click.option("--topics", type=int, help="Topic count (default 1)."),
    click.option("--partitions", type=int, help="Partitions per topic (default 2)."),
    click.option("--rf", type=int, help="Replication factor (default 3)."),
    click.option("--min-isr", type=int, help="min.insync.replicas (default 2)."),
    click.option("--acks", type=click.Choice(["all", "1", "mixed"]),
                 help="Producer acks: all, 1, or mixed (half the processes each)."),
    click.option("--idempotent", is_flag=True, default=None,
                 help="acks=all producers use enable.idempotence=true (acks=1 ones cannot). Default off."),
    click.option("--variant", "variant", multiple=True, metavar="NAME=on|off", help="Protocol variant (repeatable)."),
    click.option("--protocol", "protocol", multiple=True, metavar="KEY=VALUE",
                 help="Protocol setting over the runtime's defaults, e.g. replica.lag.time.max.ms=3000 (repeatable)."),
    click.option("--nemesis", help=f"Comma-separated faults, each KIND or KIND:TARGET; kinds: {', '.join(KINDS)} "
                                   "(or all, none)."),
    click.option("--scenario", help="A scripted fault schedule instead of --nemesis: unclean-loss, "
                                    "last-replica-standing, acks1-leader-kill."),
    click.option("--schedule", type=click.Path(dir_okay=False),
                 help="Replay the fault schedule of a run's test.json (or a JSON list of nemesis ops)."),
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
    click.option("--op-timeout", type=float, help="Seconds before a client op is recorded as info (default 10)."),
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


def config_from_flags(backend: str, flags: dict[str, Any]) -> TestConfig:
    """The one configuration from a YAML file and flags (flags win)."""
    config_file = flags.pop("config_file", None)
    file_values = load_yaml(config_file) if config_file else {}
    variant, protocol = flags.pop("variant", ()), flags.pop("protocol", ())
    if variant:
        flags["variants"] = parse_variants(variant)
    if protocol:
        flags["protocol"] = {**file_values.get("protocol", {}), **parse_protocol(protocol)}
    file_values.pop("backend", None)  # the command is the runtime: one file runs on both
    return build_config(file_values, {**flags, "backend": backend})
