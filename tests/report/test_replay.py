"""The replay command a run's page prints is the run's test: parsed by
``kraftwerk sim`` again, it gives the same configuration for the same
seed (a swarm seed's draw included), and names only what differs from
the defaults."""

from __future__ import annotations

import pytest

from harness.cli.options import config_from_flags
from harness.cli.sim import sim_cmd
from harness.config import TestConfig
from harness.report.replay import replay_args, replay_command
from reference_impl.core.config import Variants

CASES = {
    "story": {"variants": {"kip101": False}, "scenario": "leader-churn"},
    "all": {"nemesis": ["all"], "time_limit": 60.0},
    "swarm": {"swarm": True, "nemesis": ["kill", "pause", "partition"]},
    "settings": {"acks": "1", "partitions": 4, "min_isr": 1, "protocol": {"replica_lag_time_max_ms": "3000"},
                 "nemesis": ["kill:one", "clock"], "rate": 80.0, "name": "cell003"},
    "idempotent": {"idempotent": True, "retries": 5, "variants": {"unclean_election": True, "kip101": True}},
}
#: not settings of the run: where it was written, its recorded schedule, and
#: a swarm seed's marks (its draw is replayed as the plain settings it drew;
#: nothing but the draw reads them)
IGNORED = {"out", "schedule", "swarm", "swarm_of"}


def recorded(settings: dict, seed: int) -> dict:
    """A simulator run's test.json, as the lifecycle writes it."""
    cfg = TestConfig(**{**settings, "backend": "sim", "seed": seed}).for_seed(seed)
    return cfg.test_json()


def parsed(args: list[str]) -> dict:
    assert args[:2] == ["kraftwerk", "sim"]
    ctx = sim_cmd.make_context("sim", args[2:])
    flags = {k: v for k, v in ctx.params.items() if k not in ("seeds", "jobs", "as_json", "report")}
    seed = flags["seed"]
    return config_from_flags("sim", flags).for_seed(seed).test_json()


def effective(test: dict) -> dict:
    """The test less what a replay may write differently: an explicit
    variant at its default is the default."""
    out = {k: v for k, v in test.items() if k not in IGNORED}
    out["variants"] = Variants().with_overrides(test.get("variants") or {}).as_dict()
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_replay_parses_back_to_the_recorded_test(case):
    test = recorded(CASES[case], 11)
    assert effective(parsed(replay_args(test))) == effective(test)


def test_the_replay_names_only_what_differs_from_the_defaults():
    assert replay_command(recorded(CASES["story"], 6)) == \
        "kraftwerk sim --seed 6 --variant kip101=off --scenario leader-churn"
    assert replay_command(recorded(CASES["all"], 3)) == "kraftwerk sim --seed 3 --nemesis all --time-limit 60"
    assert "--variant kip101" not in replay_command(recorded(CASES["idempotent"], 1))  # on is the default


def test_a_real_run_replays_its_recorded_faults_and_settings():
    test = {**TestConfig(backend="netns", db="kafka", seed=4).test_json(), "schedule": []}
    assert replay_command(test, "results/queue/x") == \
        "kraftwerk run --schedule results/queue/x/test.json --backend netns --seed 4 --db kafka"


def test_the_replay_names_no_setting_that_has_no_flag_such_as_the_recorded_placement():
    """A run records its placement (and other YAML-only settings); the
    command a person types must parse, and a seed's simulator run places
    its replicas the same way again."""
    test = {**recorded(CASES["all"], 3), "placement": {"t0-0": ["n1", "n2", "n3"], "t0-1": ["n2", "n3", "n1"]},
            "final_read_timeout": 99.0}
    args = replay_args(test)
    assert "--placement" not in args and "--final-read-timeout" not in args
    assert replay_command(test) == "kraftwerk sim --seed 3 --nemesis all --time-limit 60"
    parsed(args)  # the flags parse
