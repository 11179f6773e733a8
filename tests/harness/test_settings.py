"""One settings table (harness/config/settings.py) for the test's fields:
the flags of ``kraftwerk run`` and ``sim``, a campaign file's names and a
replay's recorded settings all read it, and it covers TestConfig."""

from __future__ import annotations

import click
import pytest

from harness.campaign.spec import ALIASES, KNOWN, canonical
from harness.cli.options import config_from_flags
from harness.cli.run import run_cmd
from harness.cli.sim import sim_cmd
from harness.config import TestConfig
from harness.config.settings import REPLAYED, SETTINGS, TABLE, command_line, only_for
from harness.errors import UsageError


def _flags(cmd: click.Command) -> dict[str, click.Parameter]:
    return {p.opts[0]: p for p in cmd.params if isinstance(p, click.Option)}


def test_the_table_names_every_field_of_the_test_configuration_once():
    assert [s.field for s in TABLE] == list(SETTINGS)
    assert set(SETTINGS) == set(TestConfig.model_fields)


@pytest.mark.parametrize("cmd,name", [(run_cmd, "run"), (sim_cmd, "sim")])
def test_each_commands_test_flags_are_the_tables(cmd: click.Command, name: str):
    flags = _flags(cmd)
    table = {s.flag_name for s in TABLE if s.flag and name in s.commands}
    assert table <= set(flags)
    assert {f for f in flags if f.startswith("--") and f not in table} <= {"--config", "--json", "--seeds", "--jobs",
                                                                          "--report", "--no-progress"}
    assert list(flags["--acks"].type.choices) == ["all", "1", "0", "mixed"]  # the Literal's values
    assert flags["--min-isr"].type.name == "integer" and flags["--variant"].multiple


def test_only_kraftwerk_run_chooses_a_backend_and_the_simulator_is_not_one():
    assert "--backend" not in _flags(sim_cmd)
    assert list(_flags(run_cmd)["--backend"].type.choices) == ["local", "netns", "docker", "ssh"]


def test_a_runtime_refuses_the_settings_the_table_gives_the_other():
    for name in only_for("sim"):
        value = 0.5 if name == "clock_drift" else 7
        with pytest.raises(UsageError, match=f"{SETTINGS[name].flag_name} is for the simulator"):
            config_from_flags("local", {name: value})
    with pytest.raises(UsageError, match="--base-port is for real processes"):
        config_from_flags("sim", {"base_port": 20000})


def test_a_campaign_knows_every_setting_by_its_flag_and_kafkas_names():
    for s in TABLE:
        if s.campaign:
            assert canonical(s.flag_name.lstrip("-")) == s.field and KNOWN[s.field] == s.runtimes
        for alias in s.aliases:
            assert ALIASES[alias] == s.field == canonical(alias)
    with pytest.raises(UsageError, match="campaign's own"):
        canonical("seed")


def test_a_replay_takes_the_recorded_settings_the_table_marks():
    assert set(REPLAYED) == {s.field for s in TABLE if s.replayed}
    assert {"brokers", "min_isr", "variants", "protocol", "seed"} <= set(REPLAYED)
    assert not {"nemesis", "schedule", "out", "backend", "scenario"} & set(REPLAYED)


@pytest.mark.parametrize("command,backend,settings", [
    ("sim", "sim", {"nemesis": "leader-kill,pause", "min_isr": 1, "variants": {"kip101": False}, "concurrency": 2,
                    "protocol": {"replica.lag.time.max.ms": "9000"}, "idempotent": True, "time_limit": 12.5}),
    ("run", "netns", {"combined": True, "acks": "mixed", "net_cut": "reject", "nemesis": "power-loss-one"}),
])
def test_the_flags_a_configuration_prints_give_it_back(command: str, backend: str, settings: dict):
    cfg = config_from_flags(backend, {**{k: v for k, v in settings.items() if k not in ("variants", "protocol")},
                                      "variant": tuple(f"{k}={'on' if v else 'off'}"
                                                       for k, v in settings.get("variants", {}).items()),
                                      "protocol": tuple(f"{k}={v}" for k, v in settings.get("protocol", {}).items()),
                                      "seed": 4})
    argv = command_line(cfg, command)
    again = run_cmd if command == "run" else sim_cmd
    ctx = again.make_context(command, [*argv, "--seed", "4"])
    flags = {k: v for k, v in ctx.params.items() if k not in ("as_json", "seeds", "jobs", "report", "no_progress")}
    assert ("--backend" in argv) == (backend == "netns")
    again_cfg = config_from_flags("sim" if command == "sim" else flags.pop("backend"), flags)
    assert again_cfg.model_dump() == cfg.model_dump() and again_cfg.backend == backend
