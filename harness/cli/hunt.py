"""``kraftwerk hunt``: search fault schedules on the model (the simulator,
with the real db's timeouts), replay the promising ones on the real db from
their schedule files, and classify each pair (``harness.search.hunt``).

Exit codes: 0 every pair both valid, 1 a pair invalid on either side (a
finding or a disagreement), 2 bad input, 3 no such pair but some gave no
verdict. Interrupted, it resumes with the same flags and ``--out``.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import click

from harness import dbs
from harness.cli.options import config_from_flags, test_options
from harness.cli.sim import make_pool
from harness.config import TestConfig, build_config
from harness.config.settings import only_for
from harness.config.timings import kafka_mapped
from harness.errors import UsageError
from harness.search.explore import parse_budget
from harness.search.hunt import Hunt, table
from nemesis.faults import GENERIC, KINDS, MEMBERSHIP, FaultSpec, expand


def both_make(cfg: TestConfig) -> list[FaultSpec]:
    """The generic faults the real db can make on its backend (the
    simulator makes them all), reassign and decommission among them where
    a partition's replica can move to a broker outside its set (more
    brokers than ``--rf``; with as many, the configuration refuses them)."""
    have = dbs.capabilities(cfg)
    names = (*GENERIC, *(MEMBERSHIP if cfg.brokers > cfg.rf else ()))
    return [s for s in expand(names) if have is None or all(n in have for n in KINDS[s.kind].needs)]


def sim_config(real: TestConfig) -> TestConfig:
    """The real test as the simulator runs it: the settings both runtimes
    take, with the real db's timeouts mapped onto the model."""
    real_only = set(only_for("real")) | {"backend"}
    values = {k: v for k, v in real.model_dump().items() if k not in real_only and k not in ("schedule",)}
    return build_config(values, {"backend": "sim", "protocol": {**kafka_mapped(real.brokers), **real.protocol},
                                 "name": "hunt-sim"})


@click.command("hunt")
@test_options(command="run")
@click.option("--budget", default="30m", show_default=True, help="Wall time of the whole hunt: 90s, 10m, 1h.")
@click.option("--explore-share", type=float, default=0.3, show_default=True,
              help="Share of the budget spent searching on the model; the rest replays on the real db.")
@click.option("--jobs", type=int, default=1, show_default=True, help="Simulated runs in parallel worker processes.")
@click.option("--lock", type=click.Path(dir_okay=False), default=None,
              help="Hold this file's lock (flock) around each real run, released between them.")
def hunt_cmd(budget: str, explore_share: float, jobs: int, lock: str | None, as_json: bool, **flags: Any) -> int:
    """Search schedules on the model, confirm them on the real db, classify each pair.

    \b
    Examples:
      kraftwerk hunt --db kafka --budget 30m
      kraftwerk hunt --db kafka --budget 10m --acks all --time-limit 15 --out results/hunt1
    """
    if threading.current_thread() is threading.main_thread():
        # SIGTERM stops a hunt like Ctrl-C: the real run tears its cluster
        # down, the workers stop, hunt.json keeps what is done for a resume
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        budget_s = parse_budget(budget)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not 0 < explore_share < 1:
        raise UsageError(f"--explore-share must be between 0 and 1 (got {explore_share:g})")
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1 (got {jobs})")
    if flags.get("schedule") or flags.get("scenario") or flags.get("swarm"):
        raise UsageError("kraftwerk hunt draws its own schedules: drop --schedule, --scenario and --swarm")
    flags["db"] = flags.get("db") or "kafka"
    flags["time_limit"] = flags.get("time_limit") or 15
    flags["out"] = flags.get("out") or "results/hunt"
    if not flags.get("nemesis") and not flags.get("nemesis_mode"):
        flags["nemesis_mode"] = "overlap"  # every fault group on its own timetable, as --nemesis all
    real = config_from_flags(flags.pop("backend", None) or "netns", {**flags, "name": flags.get("name") or "hunt"})
    if real.backend == "sim":
        raise UsageError("kraftwerk hunt confirms on real processes: --backend netns (default), docker, ssh or local")
    if not real.nemesis:
        mix = both_make(real)
        real = real.model_copy(update={"nemesis": mix})
    sim = sim_config(real)
    hunt = Hunt(sim, real, budget_s, Path(real.out), explore_share, lock, click.echo)
    dbs.preflight(real)
    with make_pool(jobs) as pool:
        code = hunt.run(pool, jobs)
    counts = table(hunt.state["pairs"])
    click.echo("pairs: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    click.echo(f"page: {Path(real.out) / 'index.html'}")
    return code


def register(group: click.Group) -> None:
    group.add_command(hunt_cmd)
