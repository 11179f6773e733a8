"""``kraftwerk run`` and ``kraftwerk sim`` with the same seed and options
record the same fault schedule in test.json: the same faults in the same
order at the same nominal times, the same nodes where the seed draws them;
and on each runtime the schedule stays when the clients' rate and
concurrency change (the clients draw from a generator of their own). Real
runs are of the reference implementation on local processes, short: a
cluster, 6 s of load, the heal and the final reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli.options import config_from_flags
from harness.lifecycle.runner import run_seed
from tests.sim.test_seeded_schedule import drawn

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--nemesis", "kill:one,pause:minority,partition:halves,clock:majority", "--nemesis-interval", "1",
         "--time-limit", "6", "--seed", "14"]
LOADS = (("--rate", "20", "--concurrency", "2"), ("--rate", "60", "--concurrency", "5"))


def real_schedule(tmp_path: Path, load: tuple[str, ...]) -> list[dict[str, Any]]:
    out = tmp_path / "results"
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--out", str(out),
                        "--json", "--no-report", *FLAGS, *load], capture_output=True, text=True, timeout=400,
                       cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode in (0, 1), f"exit {r.returncode}: {r.stderr[-800:]}"
    run_dir = Path(json.loads(r.stdout)["run_dir"])
    return json.loads((run_dir / "test.json").read_text())["schedule"]


def sim_schedule(tmp_path: Path, load: tuple[str, ...]) -> list[dict[str, Any]]:
    flags = dict(zip([f[2:].replace("-", "_") for f in (FLAGS + list(load))[::2]], (FLAGS + list(load))[1::2]))
    cfg = config_from_flags("sim", {**flags, "out": str(tmp_path / "sim")})
    res = run_seed(cfg, cfg.seed, tmp_path / "sim")
    return json.loads((Path(res["run_dir"]) / "test.json").read_text())["schedule"]


def test_run_and_sim_record_the_same_fault_schedule_whatever_the_clients_rate(tmp_path: Path):
    real = [real_schedule(tmp_path / f"real{i}", load) for i, load in enumerate(LOADS)]
    sim = [sim_schedule(tmp_path / f"sim{i}", load) for i, load in enumerate(LOADS)]
    assert len(drawn(sim[0])) >= 4
    assert drawn(real[0]) == drawn(real[1]) == drawn(sim[0]) == drawn(sim[1])
    for e in real[0] + real[1]:  # each a little after its nominal time, at most
        assert e["nominal_ms"] <= e["at_ms"] < e["nominal_ms"] + 2000, e
