"""``kraftwerk run``: start a cluster, drive it with real clients while faults
fly, heal, read everything back, check, and write the report."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from harness.config import NEMESES, build_config, load_yaml, parse_variants
from harness.errors import EXIT_HARNESS, exit_code_for_valid


@click.command("run")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML file of settings (flags win).")
@click.option("--name", help="Test name (results/<name>/...).")
@click.option("--backend", type=click.Choice(["local", "netns", "docker", "ssh"]),
              help="Where nodes run: local processes behind proxies (default), network namespaces, containers, or ssh hosts.")
@click.option("--hosts", type=click.Path(dir_okay=False), help="Hosts file for --backend ssh (kraftwerk hosts up writes one).")
@click.option("--ssh-accept-new", is_flag=True, default=None, help="Trust a host key seen for the first time (default: known_hosts only).")
@click.option("--net-cut", type=click.Choice(["drop", "reject"]), help="Partitions drop packets (default) or refuse TCP with a reset (kernel backends).")
@click.option("--db", type=click.Choice(["reference", "external", "kafka"]),
              help="reference (bundled broker), kafka (real Apache Kafka, KRaft) or external.")
@click.option("--kafka-version", help="--db kafka: the Kafka release to fetch from Maven Central (default 4.4.0).")
@click.option("--kafka-home", type=click.Path(file_okay=False), help="--db kafka: use this Kafka binary distribution (its libs/).")
@click.option("--kafka-config", "kafka_config", multiple=True, metavar="KEY=VALUE",
              help="--db kafka: a server.properties override for every node (repeatable).")
@click.option("--bootstrap", help="HOST:PORT[,...] of an external cluster (--db external).")
@click.option("--brokers", type=int, help="Broker count (default 3).")
@click.option("--controllers", type=int, help="KRaft voter count: dedicated controller nodes c1.., or the first brokers with --combined (default 3).")
@click.option("--combined/--dedicated-controllers", default=None, help="Voters on the first brokers (default: dedicated controller nodes).")
@click.option("--topics", type=int, help="Topic count (default 1).")
@click.option("--partitions", type=int, help="Partitions per topic (default 2).")
@click.option("--rf", type=int, help="Replication factor (default 3).")
@click.option("--min-isr", type=int, help="min.insync.replicas (default 2).")
@click.option("--acks", type=click.Choice(["all", "1", "mixed"]), help="Producer acks; mixed = half the processes each.")
@click.option("--idempotent", is_flag=True, default=None,
              help="acks=all producers use enable.idempotence=true (acks=1 ones cannot). Default off.")
@click.option("--variant", "variant", multiple=True, metavar="NAME=on|off", help="Protocol variant (repeatable).")
@click.option("--nemesis", help=f"Comma-separated faults: {','.join(NEMESES)} (or none).")
@click.option("--scenario", help="A scripted fault schedule instead of --nemesis: unclean-loss, last-replica-standing, acks1-leader-kill.")
@click.option("--nemesis-mode", type=click.Choice(["sequential", "overlap"]), help="One fault at a time (default) or every fault type on its own timetable, overlapping.")
@click.option("--nemesis-interval", type=float, help="Seconds between fault changes (default 5).")
@click.option("--time-limit", type=float, help="Seconds of client operations (default 30).")
@click.option("--rate", type=float, help="Client ops per second, all processes together (default 50).")
@click.option("--concurrency", type=int, help="Client worker threads (default 4).")
@click.option("--seed", type=int, help="Seed for every random choice (default random, recorded in test.json).")
@click.option("--test-count", type=int, help="Run the test N times with seeds seed, seed+1, ...")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory (default results).")
@click.option("--base-port", type=int, help="First port to use on 127.0.0.1 (default: free ports).")
@click.option("--storage", type=click.Choice(["file", "pagecache", "lazyfs"]),
              help="How power loss loses un-fsynced writes: never (file), the broker's emulation (pagecache), "
                   "or kraftwerk fs under each node (lazyfs, netns; the default there for power-loss faults).")
@click.option("--torn-writes", is_flag=True, default=None,
              help="With --storage lazyfs: a power loss keeps a random prefix of each file's un-fsynced writes.")
@click.option("--flush-messages", type=int, help="log.flush.interval.messages: fsync every N messages (default 0: never).")
@click.option("--op-timeout", type=float, help="Seconds before a client op is recorded as info (default 10).")
@click.option("--json", "as_json", is_flag=True, help="Print the result object(s) on stdout.")
@click.option("--no-progress", is_flag=True, help="No live progress display.")
def run_cmd(config_file: str | None, variant: tuple[str, ...], as_json: bool, no_progress: bool, **flags: Any) -> int:
    """Run a campaign against a cluster on this machine.

    \b
    Example:
      kraftwerk run --nemesis partition,kill --time-limit 60 --acks mixed
    """
    import signal
    import threading

    from harness.runner import run_test, summary_line

    if threading.current_thread() is threading.main_thread():
        # SIGTERM tears the cluster down like Ctrl-C (a SIGKILL needs `kraftwerk cleanup`)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    file_values = load_yaml(config_file) if config_file else None
    flags["kafka_config"] = list(flags.get("kafka_config") or ()) or None
    if variant:
        flags["variants"] = parse_variants(variant)
    cfg = build_config(file_values, flags)
    outcomes = []
    worst = 0
    assert cfg.seed is not None
    for i in range(cfg.test_count):
        c = cfg.model_copy(update={"seed": cfg.seed + i})
        o = run_test(c, progress=False if (no_progress or as_json) else None)
        outcomes.append(o)
        code = exit_code_for_valid(o.result.get("valid"))
        worst = max(worst, code) if code != EXIT_HARNESS else code
        if not as_json:
            click.echo(summary_line(o))
            click.echo(f"report: {o.run_dir / 'index.html'}")
    if as_json:
        objs = [{"run_dir": str(o.run_dir), **o.result} for o in outcomes]
        sys.stdout.write(json.dumps(objs[0] if len(objs) == 1 else objs, default=str) + "\n")
    return worst


def register(group: click.Group) -> None:
    group.add_command(run_cmd)
