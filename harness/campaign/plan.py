"""From a campaign spec to cells, each a validated test configuration.

A cell is one point of the matrix: its settings become one
:class:`~harness.config.TestConfig` when the campaign is loaded (a cell the
configuration refuses is a one-line error before anything runs), and its
seeds run that configuration (:mod:`.execute`), as ``kraftwerk sim`` or
``kraftwerk run`` would with the flags :func:`replay_command` prints.

Resuming: a seed whose run directory already holds results.json is done; a
re-run of the campaign skips it.
"""

from __future__ import annotations

import itertools
import shlex
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.campaign.spec import CAMPAIGN_KEYS, CampaignSpec
from harness.config import TestConfig, build_config
from harness.config.settings import command_line
from harness.errors import UsageError


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

    @cached_property
    def config(self) -> TestConfig:
        """The cell's test, validated as the command line's would be; a
        setting the test refuses is a one-line UsageError naming the cell."""
        values: dict[str, Any] = {k: v if isinstance(v, bool) else str(v)
                                  for k, v in self.settings.items() if k not in CAMPAIGN_KEYS}
        backend = "sim" if self.runtime == "sim" else values.pop("backend", "local")
        if "kafka_config" in values:  # one KEY=VALUE, or several separated by ';'
            values["kafka_config"] = [kv.strip() for kv in str(values["kafka_config"]).split(";") if kv.strip()]
        try:
            return build_config(None, {**values, "variants": variants(self.settings), "backend": backend,
                                       "name": self.test_name})
        except UsageError as e:
            raise UsageError(f"campaign: cell {self.id}: {e}") from None


def variants(settings: dict[str, Any]) -> dict[str, bool]:
    """A cell's protocol variants: ``variant`` (``faithful``, or a comma list
    of NAME=on|off) and ``unclean_election`` (Kafka's
    ``unclean.leader.election.enable``)."""
    out: dict[str, bool] = {}
    for part in str(settings.get("variant", "")).split(","):
        name, _, state = part.strip().partition("=")
        if name and name != "faithful":
            out[name] = state == "on"
    if "unclean_election" in settings:
        out["unclean_election"] = str(settings["unclean_election"]).lower() in ("true", "on", "1", "yes")
    return out


def cells(spec: CampaignSpec) -> list[Cell]:
    """The matrix's cells, in file order, each with its configuration
    validated (so a bad cell stops the campaign before anything runs); with
    ``cells:`` entries, the product of the axes within each entry (its name
    first in the cell's parameters)."""
    out: list[Cell] = []
    for name, fixed, own in spec.groups or (("", {}, {}),):
        axes = {**own, **spec.axes}
        keys = list(axes)
        for combo in itertools.product(*(axes[k] for k in keys)):
            params = dict(zip(keys, combo))
            cell = Cell(len(out), {**({"cell": name} if name else {}), **params},
                        {**spec.fixed, **fixed, **params})
            cell.config  # noqa: B018  validated now
            out.append(cell)
    return out


def replay_command(cell: Cell, seed: int) -> str:
    """The command a person types to run one seed of the cell again."""
    sub = "sim" if cell.runtime == "sim" else "run"
    return shlex.join(["kraftwerk", sub, "--seed", str(seed), *command_line(cell.config, sub)])


def seed_ranges(seeds: list[int]) -> list[tuple[int, int]]:
    """Consecutive seeds as (first, last) ranges, so one unit runs many."""
    out: list[tuple[int, int]] = []
    for s in sorted(seeds):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def done_seeds(cell_dir: Path) -> dict[int, Path]:
    """Seeds of a cell that finished (a run directory with results.json)."""
    done: dict[int, Path] = {}
    if cell_dir.is_dir():
        for d in cell_dir.iterdir():
            stamp, _, seed = d.name.rpartition("-")
            if stamp and seed.isdigit() and (d / "results.json").is_file():
                done[int(seed)] = d
    return done
