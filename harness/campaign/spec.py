"""A campaign file: a matrix of test parameters and the seeds to run in each cell.

```yaml
name: acks-under-faults          # the campaign's directory under --out/campaigns/
runtime: sim                     # sim | real (an axis too, if given as a list)
seeds: 1..12                     # a range A..B, or a count (seeds 1..N)
time-limit: 20                   # any setting given once applies to every cell
matrix:                          # each axis a list; the cells are the product
  variant: [faithful, kip101=off]
  nemesis: [partition, "kill,pause"]
  acks: [all, "1"]
  min.insync.replicas: [1, 2]    # Kafka's config name, or min-isr
```

Axis and setting names are the command line's (``min-isr``) or, where one
exists, Kafka's configuration key (``min.insync.replicas``,
``replication.factor``, ``enable.idempotence``,
``unclean.leader.election.enable``): any setting of the test
(``harness.config.settings``) but those the campaign owns (the name, the
output directory, the seeds), plus ``runtime``, ``variant`` and
``unclean_election``. ``kafka_version`` makes the Kafka release an axis
(``kafka_version: [3.6.2, 3.7.2]`` with ``db: kafka``); ``kafka_config``
takes one ``KEY=VALUE`` or a ``;``-separated list of them. ``cells:`` (a list
of mappings, each with a ``name``) holds groups of cells with settings of
their own; a list value in an entry is an axis of that entry only, and the
matrix applies to every entry. A name the campaign does not know is a
one-line error that names it (exit 2), before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.config.settings import BOTH, SETTINGS, TABLE
from harness.errors import UsageError
from reference_impl.core.config import VARIANT_NAMES

#: what a campaign names beside the test's settings: the runtime of its
#: cells, and protocol variants by name (``variant: kip101=off``, or Kafka's
#: ``unclean.leader.election.enable``)
CAMPAIGN_KEYS: dict[str, frozenset[str]] = {"runtime": BOTH, "variant": BOTH, "unclean_election": BOTH}

#: another name -> the canonical one (Kafka's configuration keys)
ALIASES: dict[str, str] = {
    **{alias: s.field for s in TABLE for alias in s.aliases},
    "unclean.leader.election.enable": "unclean_election",
}

#: the canonical names a campaign may vary or fix, and the runtimes that take them
KNOWN: dict[str, frozenset[str]] = {**CAMPAIGN_KEYS, **{s.field: s.runtimes for s in TABLE if s.campaign}}

#: the variants a cell may name (reference_impl.core.config.Variants)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def canonical(key: str) -> str:
    """The canonical name of a setting given by the file, or a UsageError."""
    k = ALIASES.get(key, key.replace("-", "_"))
    if k in SETTINGS and k not in KNOWN:
        raise UsageError(f"campaign: {key!r} is the campaign's own (its name, seeds and --out decide it)")
    if k not in KNOWN:
        raise UsageError(f"campaign: unknown setting {key!r} (known: {', '.join(sorted(KNOWN))}, "
                         f"or Kafka's {', '.join(sorted(ALIASES))})")
    return k


def parse_seeds(value: Any) -> list[int]:
    """``A..B`` (inclusive) or a count N (seeds 1..N)."""
    if isinstance(value, bool):
        raise UsageError(f"campaign: seeds must be A..B or a count, not {value!r}")
    if isinstance(value, int):
        if not 1 <= value <= 1_000_000:
            raise UsageError(f"campaign: seeds count {value} must be 1..1000000")
        return list(range(1, value + 1))
    m = re.fullmatch(r"\s*(\d+)\s*\.\.\s*(\d+)\s*", str(value))
    if not m or int(m.group(1)) > int(m.group(2)):
        raise UsageError(f"campaign: seeds must be A..B (A <= B) or a count, not {value!r}")
    return list(range(int(m.group(1)), int(m.group(2)) + 1))


def _check_variant(value: Any) -> None:
    for part in str(value).split(","):
        part = part.strip()
        if part in ("", "faithful"):
            continue
        name, _, state = part.partition("=")
        if name not in VARIANT_NAMES or state not in ("on", "off"):
            raise UsageError(f"campaign: variant {part!r} is not NAME=on|off with NAME one of {', '.join(VARIANT_NAMES)}")


def _check_value(key: str, value: Any) -> None:
    if isinstance(value, (dict, list)):
        raise UsageError(f"campaign: {key} takes a single value per cell, not {value!r}")
    if key == "runtime" and value not in ("sim", "real"):
        raise UsageError(f"campaign: runtime must be sim or real, not {value!r}")
    if key == "variant":
        _check_variant(value)


@dataclass(frozen=True)
class CampaignSpec:
    """A validated campaign file."""

    name: str
    seeds: list[int]
    fixed: dict[str, Any] = field(default_factory=dict)
    axes: dict[str, list[Any]] = field(default_factory=dict)  # in file order
    #: ``cells:`` entries: (name, their own fixed settings, their own axes);
    #: the matrix's axes apply to each
    groups: tuple[tuple[str, dict[str, Any], dict[str, list[Any]]], ...] = ()

    def runtimes(self) -> set[str]:
        found = set(map(str, self.axes.get("runtime", [self.fixed.get("runtime", "sim")])))
        for _name, fixed, axes in self.groups:
            found |= set(map(str, axes.get("runtime", [fixed.get("runtime", self.fixed.get("runtime", "sim"))])))
        return found


def load_spec(path: str | Path) -> CampaignSpec:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as e:
        raise UsageError(f"campaign: cannot read {p}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"campaign: {p} is not valid YAML{where}") from None
    return parse_spec(doc, default_name=p.stem)


def parse_spec(doc: Any, default_name: str = "campaign") -> CampaignSpec:
    if not isinstance(doc, dict):
        raise UsageError("campaign: the file must be a mapping of settings (see `kraftwerk campaign --help`)")
    doc = dict(doc)
    name = str(doc.pop("name", default_name))
    if not _NAME.fullmatch(name):
        raise UsageError(f"campaign: name {name!r} must be letters, digits, '.', '_' or '-' (at most 100)")
    seeds = parse_seeds(doc.pop("seeds", 1))
    doc_cells = doc.pop("cells", None)
    matrix = doc.pop("matrix", {}) or {}
    if not isinstance(matrix, dict):
        raise UsageError("campaign: matrix must be a mapping of setting -> list of values")
    axes: dict[str, list[Any]] = {}
    for key, values in matrix.items():
        k = canonical(str(key))
        vals = values if isinstance(values, list) else [values]
        if not vals:
            raise UsageError(f"campaign: matrix axis {key!r} has no values")
        for v in vals:
            _check_value(str(key), v)
        axes[k] = vals
    fixed: dict[str, Any] = {}
    for key, value in doc.items():
        k = canonical(str(key))
        if k in axes:
            raise UsageError(f"campaign: {key!r} is both a matrix axis and a fixed setting")
        _check_value(str(key), value)
        fixed[k] = value
    groups = _groups(doc_cells, axes, fixed)
    spec = CampaignSpec(name, seeds, fixed, axes, groups)
    for rt in spec.runtimes():
        for k in list(fixed) + list(axes) + [k for _n, f, a in groups for k in (*f, *a)]:
            if rt not in KNOWN[k]:
                raise UsageError(f"campaign: {k} has no meaning for runtime {rt}")
    return spec


def _groups(entries: Any, axes: dict[str, list[Any]],
            fixed: dict[str, Any]) -> tuple[tuple[str, dict[str, Any], dict[str, list[Any]]], ...]:
    """``cells:``: a list of named groups of settings, each its own cells
    (a list value is an axis of that group only), so one file holds runs
    that differ in more than a product of axes (a bug's trigger on the
    releases that have it and the one that fixed it, next to another's)."""
    if entries is None:
        return ()
    if not isinstance(entries, list) or not entries:
        raise UsageError("campaign: cells must be a non-empty list of mappings, each with a name")
    out = []
    names: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict) or not _NAME.fullmatch(str(entry.get("name", ""))):
            raise UsageError(f"campaign: each of cells needs a name (letters, digits, '.', '_', '-'), not {entry!r}")
        name = str(entry["name"])
        if name in names:
            raise UsageError(f"campaign: two cells entries are named {name!r}")
        names.add(name)
        own_fixed: dict[str, Any] = {}
        own_axes: dict[str, list[Any]] = {}
        for key, value in entry.items():
            if key == "name":
                continue
            k = canonical(str(key))
            if k in axes:
                raise UsageError(f"campaign: {key!r} of cells entry {name!r} is also a matrix axis")
            vals = value if isinstance(value, list) else [value]
            if not vals:
                raise UsageError(f"campaign: {key!r} of cells entry {name!r} has no values")
            for v in vals:
                _check_value(str(key), v)
            if isinstance(value, list):
                own_axes[k] = vals
            else:
                own_fixed[k] = value
        out.append((name, own_fixed, own_axes))
    return tuple(out)
