"""``kraftwerk compare``: one test on ``--db reference`` and ``--db kafka``
(same seed, fault schedule or scenario, workload, backend), side by side
(``harness.search.compare``). Takes ``kraftwerk run``'s options but ``--db`` and
``--test-count``; both configurations are validated before anything starts.
Exit status: the worse of the two runs' (0 both valid, 1 anomalies, ...).

Both sides must run the same rules: every protocol variant, defaults
included, must have a counterpart on the Kafka release
(``harness.config.kafka.VARIANT_MEANINGS``), or the comparison is refused
before anything starts; the mapping is printed first (and is ``variants``
in ``--json``).

A random schedule's timetable (which fault starts and stops when, and the
targets drawn rather than read from the cluster) is fixed by the seed alone,
in either mode, so both dbs get the same one. Targets chosen by protocol
state (a partition's leader) may still differ."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from harness.cli.options import config_from_flags
from harness.config.kafka import check_variants, mapping, mapping_lines
from harness.cli.run import run_cmd
from harness.errors import EXIT_HARNESS, exit_code_for_valid
from harness.lifecycle.runner import run_test
from harness.search import compare
from reference_impl.core.config import Variants

_SKIP = {"db", "test_count", "bootstrap", "as_json", "no_progress"}


def _compare(as_json: bool, **flags: Any) -> int:
    backend = flags.pop("backend", None)
    report = flags.pop("report", True)  # each side's HTML report, as kraftwerk run writes it
    cfgs = {db: config_from_flags(backend, {**flags, "db": db}) for db in compare.DBS}
    version = cfgs["kafka"].kafka_version
    variants = {**Variants().as_dict(), **cfgs["kafka"].variants}
    if not as_json:
        click.echo(f"variants, reference -> Kafka {version}:")
        for line in mapping_lines(variants, version):
            click.echo(f"  {line}")
    check_variants(variants, version)  # the defaults too: both sides run the same rules
    seed = cfgs["reference"].seed
    sides: dict[str, dict[str, Any]] = {}
    worst = 0
    for db in compare.DBS:
        cfg = cfgs[db].model_copy(update={"seed": seed, "name": f"{cfgs[db].name}-{db}"})
        o = run_test(cfg, progress=False, report=report)
        sides[db] = compare.summarize(o.run_dir, o.result)
        code = exit_code_for_valid(o.result.get("valid"))
        worst = max(worst, code) if code != EXIT_HARNESS else code
    if as_json:
        a, b = sides["reference"], sides["kafka"]
        sys.stdout.write(json.dumps({"seed": seed, "variants": mapping(variants, version), **sides,
                                     "agree": compare.agreement(a, b),
                                     "anomaly_diff": compare.anomaly_diff(a, b)}) + "\n")
    else:
        click.echo(f"seed {seed}")
        click.echo(compare.render(sides))
        for db in compare.DBS:
            click.echo(f"{db}: {sides[db]['run_dir']}")
    return worst


def _build() -> click.Command:
    params = [p for p in run_cmd.params if p.name not in _SKIP]
    params.append(click.Option(["--json", "as_json"], is_flag=True, help="Print both summaries as JSON."))
    return click.Command(
        "compare", callback=_compare, params=params,
        help="Run one test on the reference implementation and on real Kafka; print both side by side.\n\n"
             "\b\nExample:\n  kraftwerk compare --backend netns --scenario unclean-loss --variant kip966=off --seed 5",
    )


def register(group: click.Group) -> None:
    group.add_command(_build())
