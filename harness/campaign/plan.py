"""From a campaign spec to cells and the commands that run their seeds.

A cell is one point of the matrix. Its seeds run through the same command a
person would type (``kraftwerk sim`` or ``kraftwerk run``), as a child
process, so a campaign exercises exactly the code of a single run, and a
cell's run can be replayed by hand with the command printed for it.

Resuming: a seed whose run directory already holds results.json is done; a
re-run of the campaign skips it.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.campaign.spec import CampaignSpec

#: canonical setting -> the flag that carries it (both runtimes' commands)
FLAGS: dict[str, str] = {
    "nemesis": "--nemesis",
    "scenario": "--scenario",
    "nemesis_interval": "--nemesis-interval",
    "acks": "--acks",
    "rf": "--rf",
    "min_isr": "--min-isr",
    "partitions": "--partitions",
    "topics": "--topics",
    "brokers": "--brokers",
    "controllers": "--controllers",
    "time_limit": "--time-limit",
    "rate": "--rate",
    "concurrency": "--concurrency",
    "db": "--db",
    "backend": "--backend",
    "kafka_version": "--kafka-version",
    "storage": "--storage",
    "workload": "--workload",
    "nemesis_mode": "--nemesis-mode",
}


@dataclass(frozen=True)
class Cell:
    index: int
    params: dict[str, Any]  # the matrix axes' values, in axis order
    settings: dict[str, Any]  # fixed settings and params together
    name: str = ""  # the runs' test name, if not cellNNN

    @property
    def id(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.params.items()) or "all"

    @property
    def runtime(self) -> str:
        return str(self.settings.get("runtime", "sim"))

    @property
    def test_name(self) -> str:
        """The cell's directory under the campaign (a safe name: ids hold '=' and ',')."""
        return self.name or f"cell{self.index:03d}"


def cells(spec: CampaignSpec) -> list[Cell]:
    """The product of the matrix's axes; with ``cells:`` entries, that
    product within each entry (its name first in the cell's parameters)."""
    out: list[Cell] = []
    for name, fixed, own in spec.groups or (("", {}, {}),):
        axes = {**own, **spec.axes}
        keys = list(axes)
        for combo in itertools.product(*(axes[k] for k in keys)):
            params = dict(zip(keys, combo))
            out.append(Cell(len(out), {**({"cell": name} if name else {}), **params},
                            {**spec.fixed, **fixed, **params}))
    return out


def _variant_args(settings: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for part in str(settings.get("variant", "")).split(","):
        part = part.strip()
        if part and part != "faithful":
            args += ["--variant", part]
    if "unclean_election" in settings:
        on = str(settings["unclean_election"]).lower() in ("true", "on", "1", "yes")
        args += ["--variant", f"unclean_election={'on' if on else 'off'}"]
    return args


def cell_args(cell: Cell) -> list[str]:
    """The settings of a cell as flags of its runtime's command."""
    args: list[str] = []
    for key, flag in FLAGS.items():
        if key in cell.settings:
            args += [flag, str(cell.settings[key])]
    if str(cell.settings.get("idempotent", "")).lower() in ("true", "on", "1", "yes"):
        args.append("--idempotent")
    if "combined" in cell.settings:
        on = str(cell.settings["combined"]).lower() in ("true", "on", "1", "yes")
        args.append("--combined" if on else "--dedicated-controllers")
    for kv in str(cell.settings.get("kafka_config", "")).split(";"):
        if kv.strip():
            args += ["--kafka-config", kv.strip()]
    return args + _variant_args(cell.settings)


def seed_ranges(seeds: list[int]) -> list[tuple[int, int]]:
    """Consecutive seeds as (first, last) ranges, so one command runs many."""
    out: list[tuple[int, int]] = []
    for s in sorted(seeds):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def command(cell: Cell, first: int, last: int, out: Path, jobs: int = 1) -> list[str]:
    """The command that runs seeds first..last of ``cell`` into ``out``."""
    base = [sys.executable, "-c", "from harness.cli import main; main()"]
    common = ["--name", cell.test_name, "--out", str(out), "--json", *cell_args(cell)]
    if cell.runtime == "sim":
        return [*base, "sim", "--seeds", f"{first}..{last}", "--jobs", str(jobs), "--no-report", *common]
    return [*base, "run", "--seed", str(first), "--test-count", str(last - first + 1), *common]


def done_seeds(cell_dir: Path) -> dict[int, Path]:
    """Seeds of a cell that finished (a run directory with results.json)."""
    done: dict[int, Path] = {}
    if cell_dir.is_dir():
        for d in cell_dir.iterdir():
            stamp, _, seed = d.name.rpartition("-")
            if stamp and seed.isdigit() and (d / "results.json").is_file():
                done[int(seed)] = d
    return done
