"""bench/differential_triage.py: the renaming that gives each of Kafka's
nodes the model's node of the same role, and the shipped triage of the
differential campaign (docs/findings/differential/): each pair's schedule
as Kafka played it, with the model's roles (moved, for a race) or the edit
by-hand.json names,
makes the model lose acks=1 writes exactly when Kafka did."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from differential_triage import START_DELAY_MS, agreeing_shift, export, relabel, rename  # noqa: E402

from harness.cli.hunt import sim_config  # noqa: E402
from harness.config import build_config  # noqa: E402
from harness.lifecycle.runner import run_seed  # noqa: E402

SHIPPED = ROOT / "docs" / "findings" / "differential"
#: every exported triage: the main campaign's, and each later campaign's (its ids its own: differential-rd, ...)
TRIAGES = sorted(d for d in (ROOT / "docs" / "findings").glob("differential*") if (d / "triage.json").exists())


def test_kafkas_nodes_are_renamed_to_the_model_node_of_the_same_role() -> None:
    kafka = {"controller": "c2", "replicas": {"t0-0": ["n3", "n1", "n2"], "t0-1": ["n1", "n2", "n3"]}}
    model = {"controller": "c3", "replicas": {"t0-0": ["n1", "n2", "n3"], "t0-1": ["n2", "n3", "n1"]}}
    m, exact = relabel(kafka, model)
    assert exact
    assert {k: m[k] for k in ("n1", "n2", "n3")} == {"n3": "n1", "n1": "n2", "n2": "n3"}
    assert m["c2"] == "c3" and sorted(m.values()) == ["c1", "c2", "c3", "n1", "n2", "n3"]


def test_renaming_reaches_every_node_an_entry_names_and_nothing_else() -> None:
    e = {"at_ms": 5, "fault": "partition:halves", "target": "halves", "key": "t0-0", "cut": [["n1", "c2"]],
         "offsets_ms": {"n1": -30}, "nodes": ["n1"]}
    got = rename(e, {"n1": "n3", "c2": "c1"})
    assert got == {**e, "cut": [["n3", "c1"]], "offsets_ms": {"n3": -30}, "nodes": ["n3"]}


def test_a_race_ships_the_smallest_move_at_which_the_model_agrees_with_kafka() -> None:
    moved = {"-300": 0, "-100": 0, "-50": 1, "50": 2, "200": 1}
    assert agreeing_shift(3, moved) == -50
    assert agreeing_shift(0, moved) == -100
    assert agreeing_shift(3, {"50": 0, "100": 0}) is None


def _lost(file: Path, seed: int, tmp: Path, start_delay_ms: int = 0) -> int:
    brokers = json.loads(file.read_text()).get("brokers", 3)  # a reassign/decommission campaign's 4th broker
    real = build_config({}, {"db": "kafka", "backend": "netns", "time_limit": 15, "acks": "mixed", "brokers": brokers})
    cfg = sim_config(real).model_copy(update={"start_delay_ms": start_delay_ms})
    res = run_seed(cfg.replaying(str(file)), seed, tmp)
    return int(res["durability"]["acks=1"]["lost"])


def _shipped() -> list[tuple[Path, int, int, int]]:
    """(file, seed, Kafka's acks=1 losses, the model's start delay) of each
    pair the triage explains on the model."""
    out: list[tuple[Path, int, int, int]] = []
    files = {"played": "kafka-played", "roles": "kafka-played-model-roles", "start-time": "kafka-played-model-roles"}
    for d in TRIAGES:
        rows = json.loads((d / "triage.json").read_text())
        out += [(d / f"{r['id']:04d}-seed{r['seed']}-{files[r['cause']]}.json", r["seed"], r["acks=1 lost"]["kafka"],
                 START_DELAY_MS if r["cause"] == "start-time" else 0) for r in rows if r["cause"] in files]
        out += [(d / f"{r['id']:04d}-seed{r['seed']}-kafka-played-model-roles-moved{r['moved_ms']}.json", r["seed"],
                 r["acks=1 lost"]["kafka"], 0) for r in rows if r["cause"] == "race" and r.get("moved_ms") is not None]
        if (d / "by-hand.json").exists():
            out += [(d / r["file"], r["seed"], r["acks=1 lost"]["kafka"], 0)
                    for r in json.loads((d / "by-hand.json").read_text())]
    return out


@pytest.mark.parametrize("file,seed,kafka_lost,start_delay_ms", _shipped(),
                         ids=lambda v: f"{v.parent.name}/{v.name}" if isinstance(v, Path) else None)
def test_each_explained_pair_makes_the_model_lose_acks1_writes_when_kafka_did(
        tmp_path: Path, file: Path, seed: int, kafka_lost: int, start_delay_ms: int) -> None:
    assert (_lost(file, seed, tmp_path, start_delay_ms) > 0) == (kafka_lost > 0)


def test_a_missing_campaign_is_one_line_and_exit_2(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "differential_triage.py"), "--campaign",
                        str(tmp_path / "none")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "no campaign's hunt.json" in p.stderr.strip().splitlines()[-1]


def _row(pair_id: int, seed: int) -> dict:
    """A triage row as ``triage()`` makes it, with the figures an export reads."""
    none = {"acks=1": {"lost": 0, "acked": 1}}
    return {"id": pair_id, "seed": seed, "lost": {"model": 1, "kafka": 0}, "late_ms": 0,
            "roles": {"model": {"controller": "c1", "replicas": {}}, "kafka": {"controller": "c2", "replicas": {}}},
            "renaming": {"c2": "c1"}, "kafka_names": none, "model_roles": none, "shifted": {50: 0},
            "slow_start": none, "verdict": "played"}


def test_an_export_of_later_pairs_keeps_the_rows_of_earlier_ones(tmp_path: Path) -> None:
    pairs = {}
    for i in (1, 2):
        run = tmp_path / f"run{i}"
        run.mkdir()
        (run / "test.json").write_text(json.dumps({"schedule": [{"at_ms": 5, "fault": "kill:one", "nodes": ["c2"]}]}))
        sched = tmp_path / f"s{i}.json"
        sched.write_text(json.dumps({"time_limit": 15, "schedule": []}))
        pairs[i] = {"id": i, "schedule_file": str(sched), "real": {"run_dir": str(run)}}
    dest = tmp_path / "differential"
    export([_row(1, 1001)], pairs, tmp_path, dest)
    export([_row(2, 1002)], pairs, tmp_path, dest)
    rows = json.loads((dest / "triage.json").read_text())
    assert [(r["id"], r["seed"]) for r in rows] == [(1, 1001), (2, 1002)]
    export([{**_row(1, 1001), "verdict": "roles"}], pairs, tmp_path, dest)
    assert [r["cause"] for r in json.loads((dest / "triage.json").read_text())] == ["roles", "played"]
    played = json.loads((dest / "0002-seed1002-kafka-played-model-roles.json").read_text())
    assert played["schedule"][0]["nodes"] == ["c1"]
