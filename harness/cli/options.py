"""The test's flags, shared by ``kraftwerk run`` and ``kraftwerk sim``: one
per setting of the settings table (``harness.config.settings``), typed from
its :class:`harness.config.TestConfig` field (the YAML key is the flag
without its dashes, ``min-isr`` or ``min_isr``). A setting one runtime has
no use for is refused by the configuration, not missing from a command.
"""

from __future__ import annotations

from types import UnionType
from typing import Any, Callable, Literal, Union, get_args, get_origin

import click

from harness.config import TestConfig, build_config, load_yaml, parse_variants
from harness.config.settings import REPLAYED, TABLE, Setting
from harness.errors import UsageError
from nemesis import replay
from nemesis.faults import FaultSpec


def _base(annotation: Any) -> Any:
    """A field's type without ``| None``."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if get_origin(annotation) in (Union, UnionType) and len(args) == 1 else annotation


def _click_type(s: Setting, annotation: Any) -> dict[str, Any]:
    """The option's type, from the field's: choices from a Literal, a flag
    from a bool, a repeatable KEY=VALUE from a mapping or a list of strings,
    one comma list from a nemesis mix."""
    t = _base(annotation)
    if get_origin(t) is Literal:
        return {"type": click.Choice(list(s.choices or (str(a) for a in get_args(t))))}
    if t is bool:
        return {"default": None} if s.declaration else {"is_flag": True, "default": None}
    if t in (int, float):
        return {"type": t}
    if get_origin(t) is dict or t == list[str]:
        return {"multiple": True, "metavar": s.metavar}
    if t == list[FaultSpec]:
        return {}
    if s.path is not None:
        return {"type": click.Path(dir_okay=s.path != "file", file_okay=s.path != "dir")}
    return {}


def _option(s: Setting) -> Callable[[Any], Any]:
    """The click option of a setting (its parameter name is the field's,
    or ``variant`` for the repeatable ``--variant``)."""
    param = "variant" if s.field == "variants" else s.field
    kwargs = _click_type(s, TestConfig.model_fields[s.field].annotation)
    return click.option(s.declaration or s.flag_name, param, help=s.help, **kwargs)


def test_options(fn: Callable[..., Any] | None = None, *, command: str = "sim") -> Any:
    """Decorate a command with every test flag of ``command`` (``run`` or
    ``sim``; explore takes the simulator's), from the settings table, and
    the YAML file and ``--json``."""
    options = [
        click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="YAML file of settings (flags win)."),
        *(_option(s) for s in TABLE if s.flag and command in s.commands),
        click.option("--json", "as_json", is_flag=True, help="Print the result object(s) on stdout."),
    ]

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed(options):
            f = opt(f)
        return f

    return decorate(fn) if fn is not None else decorate


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


def recorded_settings(path: str) -> dict[str, Any]:
    """The settings of the run whose test.json ``path`` is (empty for a
    plain list of entries): a replay runs the same test (flags and a YAML
    file still win)."""
    try:
        data = replay.read_json(path)  # a regular file, bounded: never waits on a FIFO
    except replay.ScheduleError:
        return {}  # the configuration's check of --schedule says what is wrong
    if not isinstance(data, dict):
        return {}
    return {k: data[k] for k in REPLAYED if k in data and data[k] is not None}
