"""A torture run: as many seeds as a time budget allows, held against expected verdicts.

Each expectation names a configuration and what must come of it:

* ``valid``: every run must be valid (the faithful protocol under faults);
  a single invalid run is a surprise, and its replay command is printed;
* ``caught``: some run must be invalid (a historical variant switched back
  on must be detected). Each has ``within``: the number of seeds in which
  it has always been caught so far (bench/sim_soak.py measures it). Not
  caught after that many seeds is a surprise; not caught in fewer, because
  the budget ran out first, is undecided (a skipped JUnit testcase that says
  how many seeds ran), never a pass.

The budget is shared out: half to the ``valid`` expectations (breadth: more
seeds, more confidence), half to the ``caught`` ones; an expectation that is
met early (caught) hands the rest of its share back. Seeds run a few at a
time as a campaign's cells run (:func:`harness.campaign.execute.run_unit`),
so each finding is a run directory and a command that replays it. The outcome is one JUnit
testcase per expectation.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable
from xml.etree import ElementTree as ET

import yaml

from harness.campaign.plan import Cell, done_seeds, replay_command
from harness.campaign.execute import run_unit
from harness.campaign.spec import canonical
from harness.errors import UsageError

#: the simulated test of bench/sim_soak.py's variant hunts (where ``within``
#: comes from): acks=all, 3 partitions, 8 clients, 100 ops/s, a fault every 10 s
HUNT: dict[str, Any] = {"acks": "all", "partitions": 3, "concurrency": 8, "rate": 100, "nemesis_interval": 10,
                        "time_limit": 60}

#: the expected-verdict table: the simulator for breadth; each variant with
#: the story that tells its seed's narrative (``--scenario``) among faults
#: that reach its failure (bench/sim_soak.py measures seeds to first
#: detection), the faithful protocol under all the generic faults.
DEFAULT_EXPECTATIONS: list[dict[str, Any]] = [
    {"name": "faithful-stays-valid", "expect": "valid", "runtime": "sim",
     "settings": {"nemesis": "all", "acks": "mixed", "time_limit": 30, "nemesis_interval": 5}},
    {"name": "kip101-off-is-caught", "expect": "caught", "runtime": "sim", "within": 10,
     "settings": {"variant": "kip101=off", "scenario": "leader-churn", "nemesis": "kill", "time_limit": 20,
                  "nemesis_interval": 3}},
    {"name": "kip966-off-is-caught", "expect": "caught", "runtime": "sim", "within": 20,
     "settings": {"variant": "kip966=off", "scenario": "last-replica-standing", "nemesis": "power-loss-one", **HUNT}},
    {"name": "unclean-election-on-is-caught", "expect": "caught", "runtime": "sim", "within": 20,
     "settings": {"variant": "unclean_election=on", "scenario": "isr-crash", "nemesis": "partition-leader", **HUNT}},
    {"name": "strict-isr-expand-off-is-caught", "expect": "caught", "runtime": "sim", "within": 200,
     "settings": {"variant": "strict_isr_expand=off", "scenario": "expand-race,leader-churn", **HUNT}},
]

#: the real-process expectation (--runtime real or both)
REAL_EXPECTATIONS: list[dict[str, Any]] = [
    {"name": "faithful-real-stays-valid", "expect": "valid", "runtime": "real",
     "settings": {"nemesis": "partition,kill", "acks": "all", "time_limit": 30}},
]


@dataclass
class Expectation:
    name: str
    expect: str  # "valid" | "caught"
    runtime: str
    settings: dict[str, Any]
    within: int = 1  # caught: seeds after which not being caught is a surprise
    seeds_run: int = 0
    invalid: list[tuple[int, str]] = field(default_factory=list)  # (seed, run dir)
    unknown: list[tuple[int, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @cached_property
    def cell(self) -> Cell:
        return Cell(0, {}, {**self.settings, "runtime": self.runtime}, name=self.name)

    def met(self) -> bool:
        if self.expect == "caught":
            return bool(self.invalid)
        return not self.invalid and not self.errors and self.seeds_run > 0

    def undecided(self) -> bool:
        """Not caught yet, but in fewer seeds than it takes: the budget ran out."""
        return self.expect == "caught" and not self.invalid and not self.errors and self.seeds_run < self.within

    def surprised(self) -> bool:
        return not self.met() and not self.undecided()

    def replay(self, seed: int) -> str:
        return replay_command(self.cell, seed)


def parse_expectations(doc: Any) -> list[Expectation]:
    """An expectations table (a YAML list of {name, expect, runtime, settings})."""
    if not isinstance(doc, list) or not doc:
        raise UsageError("torture: the expectations file must be a non-empty list")
    out = []
    for e in doc:
        if not isinstance(e, dict) or e.get("expect") not in ("valid", "caught"):
            raise UsageError(f"torture: an expectation needs expect: valid|caught ({e!r})")
        rt = e.get("runtime", "sim")
        if rt not in ("sim", "real"):
            raise UsageError(f"torture: runtime must be sim or real, not {rt!r}")
        settings = {canonical(str(k)): v for k, v in (e.get("settings") or {}).items()}
        within = e.get("within", 1)
        if not isinstance(within, int) or isinstance(within, bool) or within < 1:
            raise UsageError(f"torture: within must be a positive seed count ({e!r})")
        out.append(Expectation(str(e.get("name") or f"expectation-{len(out)}"), e["expect"], rt, settings, within))
    return out


def load_expectations(path: Path | None, runtime: str) -> list[Expectation]:
    if path is not None:
        try:
            return parse_expectations(yaml.safe_load(path.read_text()))
        except (OSError, yaml.YAMLError) as e:
            raise UsageError(f"torture: cannot read {path}: {e}") from None
    table = {"sim": DEFAULT_EXPECTATIONS, "real": REAL_EXPECTATIONS,
             "both": DEFAULT_EXPECTATIONS + REAL_EXPECTATIONS}[runtime]
    return parse_expectations(table)


def _run_round(e: Expectation, first_seed: int, seeds: int, out: Path) -> None:
    t0 = time.monotonic()
    cell_dir = out / e.name
    # simulated seeds side by side, each in its own process; real ones one cluster at a time
    with ThreadPoolExecutor(seeds if e.runtime == "sim" else 1) as pool:
        units = list(pool.map(lambda s: run_unit(e.cell, [s], out), range(first_seed, first_seed + seeds)))
    e.seconds += time.monotonic() - t0
    e.errors += [u["error"] for u in units if u["error"]]
    res = {"results": [r for u in units for r in u["results"]]}
    done = done_seeds(cell_dir)
    for s in range(first_seed, first_seed + seeds):
        d = done.get(s)
        if d is None:
            continue
        e.seeds_run += 1
        v = next((r.get("valid") for r in res["results"] if r.get("seed") == s), None)
        if v is None:
            v = json.loads((d / "results.json").read_text()).get("valid")
        if v is False:
            e.invalid.append((s, str(d)))
        elif v is not True:
            e.unknown.append((s, str(d)))


def torture(expectations: list[Expectation], budget_s: float, out: Path, jobs: int,
            on_round: Callable[[Expectation], None] = lambda e: None, first_seed: int = 1) -> list[Expectation]:
    """Run seeds for every expectation within ``budget_s`` seconds."""
    deadline = time.monotonic() + budget_s
    next_seed = {e.name: first_seed for e in expectations}
    valid_side = [e for e in expectations if e.expect == "valid"]
    caught_side = [e for e in expectations if e.expect == "caught"]
    # every expectation gets at least one round, then the budget decides
    while True:
        pending = [e for e in caught_side if not e.invalid and not e.errors and e.seeds_run < e.within] + \
                  [e for e in valid_side if not e.invalid and not e.errors]
        if not pending:
            break
        for e in pending:
            if e.seeds_run and time.monotonic() >= deadline:
                continue
            _run_round(e, next_seed[e.name], jobs, out)
            next_seed[e.name] += jobs
            on_round(e)
        if time.monotonic() >= deadline:
            break
    return expectations


def junit_xml(expectations: list[Expectation]) -> bytes:
    suite = ET.Element("testsuite", name="kraftwerk-torture", tests=str(len(expectations)),
                       failures=str(sum(e.surprised() for e in expectations)),
                       skipped=str(sum(e.undecided() for e in expectations)),
                       time=f"{sum(e.seconds for e in expectations):.1f}")
    for e in expectations:
        tc = ET.SubElement(suite, "testcase", classname=f"torture.{e.runtime}", name=e.name, time=f"{e.seconds:.1f}")
        ET.SubElement(tc, "system-out").text = summary_line(e)
        if e.undecided():
            ET.SubElement(tc, "skipped", message=f"undecided: not caught in {e.seeds_run} of the {e.within} "
                                                 f"seeds it can take; give a larger budget")
        elif not e.met():
            ET.SubElement(tc, "failure", message=surprise(e)).text = "\n".join(details(e))
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def summary_line(e: Expectation) -> str:
    return (f"{e.name}: expect {e.expect}; {e.seeds_run} seeds, {len(e.invalid)} invalid, "
            f"{len(e.unknown)} unknown, {e.seconds:.0f}s")


def surprise(e: Expectation) -> str:
    if e.errors:
        return f"{e.name}: a run failed to complete: {e.errors[0]}"
    if e.expect == "valid":
        if not e.seeds_run:
            return f"{e.name}: no run finished"
        s, d = e.invalid[0]
        return f"{e.name}: seed {s} is invalid ({d})"
    return f"{e.name}: not caught in {e.seeds_run} seeds"


def details(e: Expectation) -> list[str]:
    lines = [summary_line(e)]
    lines += [f"  replay: {e.replay(s)}   # {d}" for s, d in e.invalid[:5]]
    return lines
