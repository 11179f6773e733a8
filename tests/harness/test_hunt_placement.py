"""The hunt's and the differential campaign's schedule files pin the
model's placement: each partition's replicas as the simulated run created
them go into the file (``placement``), and the real run the hunt starts
from it creates its topics with them, so a reassignment's or a
decommission's recorded moves meet the replicas they were drawn on rather
than the real db's own placement. A pin naming brokers the run lacks is
one line, exit 2. No real cluster here: the simulator alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.hunt import sim_config
from harness.cli.options import config_from_flags
from harness.config import TestConfig
from harness.errors import UsageError
from harness.search.hunt import Hunt, model_placement, recorded_placement, sim_one

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from differential_campaign import prepare  # noqa: E402

#: not the model's own round-robin (t0-0 n1,n2,n3; t0-1 n2,n3,n4), nor what Kafka's striping from one broker gives
PINNED = {"t0-0": ["n4", "n2", "n1"], "t0-1": ["n4", "n3", "n2"]}


def _real(**kw) -> TestConfig:
    return TestConfig(db="kafka", backend="netns", brokers=4, time_limit=3, acks="all", **kw)


def _hunt(tmp_path: Path, sim: TestConfig) -> Hunt:
    hunt = Hunt(sim, _real(), 600, tmp_path / "out", say=lambda _: None)
    hunt.load()
    return hunt


def _candidate(r: dict, i: int = 0) -> dict:
    return {"id": i, "seed": r["seed"], "near": r["near"], "new_states": [], "schedule": r["schedule"],
            "placement": r["placement"], "score": 1,
            "sim": {"valid": r["valid"], "run_dir": r["run_dir"], "error": r.get("error"), "summary": None}}


def test_a_simulated_run_hands_the_hunt_the_replicas_its_topics_were_created_with(tmp_path: Path) -> None:
    r = sim_one(sim_config(_real()), 7, None, str(tmp_path / "sim"))
    recorded = json.loads((Path(r["run_dir"]) / "test.json").read_text())["placement"]
    assert r["placement"] == recorded == {"t0-0": ["n1", "n2", "n3"], "t0-1": ["n2", "n3", "n4"]}


def test_the_hunts_schedule_file_carries_the_models_placement_and_the_real_run_pins_it(tmp_path: Path) -> None:
    sim = sim_config(_real()).model_copy(update={"placement": PINNED})  # a model run placed otherwise
    r = sim_one(sim, 7, None, str(tmp_path / "sim"))
    assert r["placement"] == PINNED
    hunt = _hunt(tmp_path, sim)
    f = hunt.schedule_file(_candidate(r))
    assert json.loads(f.read_text())["placement"] == PINNED
    assert hunt.real_cfg.placement is None  # the hunt's own settings pin nothing: the file does
    assert hunt.real_cfg.replaying(str(f), placement=recorded_placement(f)).placement == PINNED
    # the command the hunt's page prints takes it as a recorded setting too
    assert config_from_flags("netns", {"db": "kafka", "schedule": str(f)}).placement == PINNED


def test_a_hunt_saved_before_candidates_carried_a_placement_reads_it_from_the_simulated_run(tmp_path: Path) -> None:
    sim = sim_config(_real()).model_copy(update={"placement": PINNED})
    r = sim_one(sim, 7, None, str(tmp_path / "sim"))
    old = {k: v for k, v in _candidate(r).items() if k != "placement"}
    assert model_placement(old) == PINNED
    assert model_placement({**old, "sim": {"run_dir": None}}) is None  # a run the harness could not play


def test_the_campaigns_schedule_file_carries_the_models_placement(tmp_path: Path) -> None:
    sim = sim_config(_real()).model_copy(update={"placement": PINNED})
    hunt = _hunt(tmp_path, sim)
    prepare(hunt, range(7, 8))
    (c,) = hunt.state["candidates"]
    assert c["placement"] == PINNED
    assert json.loads(hunt.schedule_file(c).read_text())["placement"] == PINNED
    saved = json.loads((tmp_path / "out" / "hunt.json").read_text())
    assert saved["candidates"][0]["placement"] == PINNED  # a resumed campaign keeps it


def test_a_pin_naming_a_broker_the_run_lacks_is_refused_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"brokers": 4, "placement": PINNED, "schedule": []}))
    three = TestConfig(db="kafka", backend="netns", brokers=3, time_limit=3)
    with pytest.raises(UsageError) as e:
        three.replaying(str(f), placement=recorded_placement(f))
    assert "n4" in str(e.value) and "not a broker of this cluster" in str(e.value) and "\n" not in str(e.value)


def test_a_hunt_schedule_file_with_a_broker_the_run_lacks_exits_2_with_one_line(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"brokers": 4, "placement": {**PINNED, "t0-1": ["n9", "n3", "n2"]}, "schedule": []}))
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--db", "kafka",
                        "--schedule", str(f), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    err = p.stderr.strip()
    assert p.returncode == 2 and "n9" in err and "\n" not in err, err
    assert not (tmp_path / "o").exists()
