"""The command that replays a run, from its test.json: what a person types
to see the failure again.

A simulator run is deterministic: the same seed and settings give the same
history, byte for byte, so the replay is ``kraftwerk sim --seed S`` with
every setting that differs from the default as its flag (a YAML key is the
flag's name, docs/architecture.md "Campaigns"). A swarm seed's draw is
recorded in test.json, so its drawn faults, interval, mode and rate are
given as plain flags. A real run cannot be replayed exactly; its command
reruns the same settings and replays the faults it recorded
(``--schedule RUN/test.json``).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from harness.config import TestConfig
from harness.config.settings import SETTINGS
from nemesis.faults import GROUPS, expand
from reference_impl.core.config import Variants

#: settings no flag carries, or that a replay must not repeat (the
#: recorded schedule, the results directory, a swarm's own draw marks)
NOT_FLAGS = frozenset({"swarm", "swarm_of", "schedule", "out", "test_count", "seed", "backend"}
                      | {name for name, s in SETTINGS.items() if not s.flag})
#: a real replay's settings beside the ones its recorded schedule brings
REAL_ONLY = ("db", "kafka_version", "kafka_home", "kafka_config", "hosts", "net_cut", "storage", "torn_writes")
#: boolean settings given as a bare flag (on) or left out (off)
SWITCHES = frozenset({"idempotent", "safe", "ctp_txn", "static_members", "crash_clients", "torn_writes",
                      "ssh_accept_new"})


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _value(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _grouped(names: list[str]) -> list[str]:
    """A recorded (expanded) fault mix as the groups it was likely asked
    by (``all``, ``kill``), when they expand to exactly the same list."""
    def names_of(mix: list[str]) -> list[str]:
        return [s.name for s in expand(mix)]

    groups = sorted(GROUPS, key=lambda g: -len(expand([g])))
    out: list[str] = []
    i = 0
    while i < len(names):
        for g in groups:
            exp = names_of([g])
            if len(exp) > 1 and names[i:i + len(exp)] == exp:
                out.append(g)
                i += len(exp)
                break
        else:
            out.append(names[i])
            i += 1
    return out if names_of(out) == names else names


def _implied(test: dict[str, Any], args: dict[str, Any]) -> set[str]:
    """Settings the configuration resolves by itself from the others
    (``storage`` from the faults, ``nemesis_mode`` overlap for ``all``):
    left out of the command when it would resolve them the same way."""
    names = {"storage", "nemesis_mode"} & set(args)
    try:
        again = TestConfig(**{k: v for k, v in args.items() if k not in names})
    except Exception:  # noqa: BLE001 - then every one of them stays in the command
        return set()
    return {n for n in names if getattr(again, n) == test.get(n)}


def setting_args(test: dict[str, Any]) -> list[str]:
    """Every recorded setting that differs from its default, as flags, in
    the order the configuration lists them; settings the configuration
    would resolve the same way from the others are left out."""
    fields = TestConfig.model_fields
    differ = {k: test[k] for k in fields if k in test and k not in NOT_FLAGS and test[k] is not None
              and (k == "variants" or test[k] != fields[k].get_default(call_default_factory=True))}
    if differ.get("nemesis"):
        differ["nemesis"] = _grouped([str(x) for x in differ["nemesis"]])
    if is_sim(test):
        differ["backend"] = "sim"
    implied = _implied(test, differ)
    differ.pop("backend", None)
    return _args({k: v for k, v in differ.items() if k not in implied})


def _args(settings: dict[str, Any]) -> list[str]:
    args: list[str] = []
    base_variants = Variants().as_dict()
    for name, v in settings.items():
        if name == "variants":
            for k, on in sorted((v or {}).items()):
                if base_variants.get(k) != bool(on):
                    args += ["--variant", f"{k}={'on' if on else 'off'}"]
            continue
        if name in SWITCHES:
            args += [_flag(name)] if v else []
        elif name == "combined":
            args.append("--combined" if v else "--dedicated-controllers")
        elif name == "nemesis":
            args += ["--nemesis", ",".join(map(str, v))]
        elif name == "kafka_config":
            for item in v:
                args += ["--kafka-config", str(item)]
        elif name == "protocol":
            for k, x in sorted(v.items()):
                args += ["--protocol", f"{k}={x}"]
        else:
            args += [_flag(name), _value(v)]
    return args


def is_sim(test: dict[str, Any]) -> bool:
    return test.get("runtime") == "sim" or test.get("backend") == "sim" or test.get("kraftwerk") == "sim"


def replay_args(test: dict[str, Any], run_dir: str | Path | None = None) -> list[str]:
    """The replay's argv (``kraftwerk sim --seed 6 --variant kip101=off ...``)."""
    seed = test.get("seed")
    if is_sim(test):
        return ["kraftwerk", "sim", *(["--seed", str(seed)] if seed is not None else []), *setting_args(test)]
    args = ["kraftwerk", "run"]
    if run_dir is not None:
        args += ["--schedule", str(Path(run_dir) / "test.json")]
    if test.get("backend") not in (None, "local"):
        args += ["--backend", str(test["backend"])]
    if seed is not None:
        args += ["--seed", str(seed)]
    # the schedule brings the workload's and the cluster's settings; where
    # the run ran is given here
    where = {k: test[k] for k in REAL_ONLY if k in test}
    return args + setting_args(where)


def replay_command(test: dict[str, Any], run_dir: str | Path | None = None) -> str:
    return shlex.join(replay_args(test, run_dir))


def shrink_command(test: dict[str, Any], run_dir: str | Path, valid: Any) -> str | None:
    """``kraftwerk shrink RUN`` for an invalid simulator run (the only kind
    shrink takes), else None."""
    if valid is False and is_sim(test) and isinstance(test.get("schedule"), list):
        return shlex.join(["kraftwerk", "shrink", str(run_dir)])
    return None
