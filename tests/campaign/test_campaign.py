"""`kraftwerk campaign`: the matrix is validated before anything runs (every
cell's test configuration too), every cell's seeds run its configuration as
a single run would, in a process of their own, a re-run resumes, the cells
are summed with intervals, and an invalid cell fails the campaign. The same
table comes from the inline and the Spark aggregation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.campaign.execute import isolated, run_unit
from harness.campaign.plan import cells, replay_command, seed_ranges
from harness.campaign.spec import parse_spec
from harness.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]

#: kip101=off under leader churn is caught (committed-truncated) in a few
#: simulated seconds; the faithful protocol stays valid under the same faults
MATRIX = """\
name: {name}
runtime: sim
seeds: 1..2
time-limit: 20
nemesis-interval: 3
scenario: leader-churn
nemesis: kill
matrix:
  variant: [faithful, kip101=off]
"""


def kraftwerk(*args: str, timeout: float = 600, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KRAFTWERK_DEBUG": ""}
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def comparable(cells_: list[dict]) -> list[dict]:
    """A cell table without what differs between two executions of the same
    seeds (run directory names carry the wall-clock time they started)."""
    return [{k: v for k, v in c.items() if k not in ("run_dirs", "invalid_runs")} for c in cells_]


def test_an_unknown_setting_is_one_line_naming_it_and_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("seeds: 2\nmatrix:\n  acks: [all]\n  min.insync.replica: [1, 2]\n")
    r = kraftwerk("campaign", str(f), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "'min.insync.replica'" in r.stderr
    assert not (tmp_path / "out" / "campaigns").exists()  # nothing started


@pytest.mark.parametrize("doc, needle", [
    ({"seeds": "5..2"}, "A..B"),
    ({"seeds": True}, "seeds"),
    ({"matrix": {"variant": ["kip102=off"]}}, "variant"),
    ({"matrix": {"acks": []}}, "no values"),
    ({"matrix": {"acks": ["all"]}, "acks": "1"}, "both"),
    ({"name": "../escape"}, "name"),
    ({"runtime": "sim", "backend": "netns"}, "runtime sim"),
    ([1, 2], "mapping"),
])
def test_bad_campaign_files_are_usage_errors(doc: object, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        parse_spec(doc)


def test_kafka_config_names_map_to_the_same_settings_as_flag_names() -> None:
    a = parse_spec({"matrix": {"min.insync.replicas": [1, 2], "replication.factor": [3]}})
    b = parse_spec({"matrix": {"min-isr": [1, 2], "rf": [3]}})
    assert a.axes == b.axes == {"min_isr": [1, 2], "rf": [3]}


def test_cells_are_the_product_of_the_axes_in_file_order() -> None:
    spec = parse_spec({"seeds": "3..4", "acks": "all",
                       "matrix": {"variant": ["faithful", "kip101=off"], "min.insync.replicas": [1, 2]}})
    cs = cells(spec)
    assert [c.id for c in cs] == ["variant=faithful,min_isr=1", "variant=faithful,min_isr=2",
                                  "variant=kip101=off,min_isr=1", "variant=kip101=off,min_isr=2"]
    cfg = cs[3].config
    assert (cfg.backend, cfg.min_isr, cfg.variants, cfg.acks, cfg.name) == ("sim", 2, {"kip101": False}, "all",
                                                                           "cell003")
    assert cs[0].config.min_isr == 1 and cs[0].config.variants == {}
    argv = replay_command(cs[2], 7).split()
    assert argv[:4] == ["kraftwerk", "sim", "--seed", "7"]
    assert ["--min-isr", "1"] == argv[argv.index("--min-isr"):argv.index("--min-isr") + 2]
    assert ["--variant", "kip101=off"] == argv[argv.index("--variant"):argv.index("--variant") + 2]


def test_a_cell_the_test_configuration_refuses_stops_the_campaign_before_it_runs(tmp_path: Path) -> None:
    spec = parse_spec({"runtime": "sim", "matrix": {"min-isr": [2, 4]}})
    with pytest.raises(UsageError, match="campaign: cell min_isr=4: --min-isr 4 exceeds --rf 3"):
        cells(spec)
    f = tmp_path / "c.yaml"
    f.write_text("runtime: sim\nseeds: 2\nmatrix:\n  min-isr: [2, 4]\n")
    r = kraftwerk("campaign", str(f), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "cell min_isr=4" in r.stderr
    assert not (tmp_path / "out").exists()  # nothing started


def _crash(code: int) -> None:
    os._exit(code)


def _hang() -> None:
    time.sleep(60)


def test_a_unit_whose_process_dies_or_hangs_is_an_error_line_not_the_campaigns_end() -> None:
    assert isolated(sorted, ([3, 1, 2],), 60) == ([1, 2, 3], "")
    assert isolated(_crash, (9,), 60) == (None, "the run's process died (exit 9)")
    assert isolated(int, ("x",), 60)[1].startswith("ValueError: invalid literal")
    value, err = isolated(_hang, (), 2)
    assert value is None and "no answer after 2s" in err


def test_a_unit_runs_the_cells_configuration_in_a_child_and_writes_its_run_directories(tmp_path: Path) -> None:
    spec = parse_spec({"runtime": "sim", "time-limit": 2, "nemesis": "kill", "nemesis-interval": 1,
                       "matrix": {"acks": ["1"]}})
    (cell,) = cells(spec)
    res = run_unit(cell, [5, 6], tmp_path)
    assert res["error"] == "" and [r["seed"] for r in res["results"]] == [5, 6]
    for r in res["results"]:
        test = json.loads((Path(r["run_dir"]) / "test.json").read_text())
        assert Path(r["run_dir"]).parent == tmp_path / "cell000"
        assert (test["acks"], test["nemesis"], test["seed"]) == ("1", ["kill"], r["seed"])


def test_seed_ranges_group_consecutive_seeds() -> None:
    assert seed_ranges([5, 1, 2, 3, 7, 8]) == [(1, 3), (5, 5), (7, 8)]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("campaign")
    f = tmp / "c.yaml"
    f.write_text(MATRIX.format(name="kip101"))
    r = kraftwerk("campaign", str(f), "--out", str(tmp / "out"), "--json", "--no-parquet")
    return tmp, r


def test_a_campaign_runs_every_cell_and_an_invalid_cell_fails_it(finished) -> None:
    tmp, r = finished
    assert r.returncode == 1, r.stderr[-2000:]
    camp = json.loads(r.stdout)
    assert camp["valid"] is False
    faithful, broken = camp["cells"]
    assert faithful["params"] == {"variant": "faithful"} and broken["params"] == {"variant": "kip101=off"}
    assert faithful["runs"] == broken["runs"] == 2
    assert faithful["valid"] == 2 and faithful["durability"]["acks=all"]["lost"] == 0
    assert faithful["durability"]["acks=all"]["acked"] > 400  # enough for the bound below (0 of n: about 3.7/n)
    lo, hi = faithful["durability"]["acks=all"]["lost_rate_ci95"]
    assert lo == 0.0 and 0 < hi < 0.01  # zero lost of hundreds acknowledged: a tight upper bound
    assert broken["invalid"] >= 1 and broken["invalid_runs"]
    d = Path(camp["campaign_dir"])
    for rel in broken["invalid_runs"]:
        assert json.loads((d / rel / "results.json").read_text())["valid"] is False
    assert (d / "campaign.json").is_file() and (d / "index.html").is_file()
    assert (d / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_rerun_skips_the_runs_already_done(finished) -> None:
    tmp, first = finished
    d = tmp / "out" / "campaigns" / "kip101"
    before = sorted(p.name for p in d.glob("cell*/*") if p.is_dir())
    r = kraftwerk("campaign", str(tmp / "c.yaml"), "--out", str(tmp / "out"), "--json", "--no-parquet")
    assert r.returncode == 1
    assert sorted(p.name for p in d.glob("cell*/*") if p.is_dir()) == before  # no new run directory
    assert comparable(json.loads(r.stdout)["cells"]) == comparable(json.loads(first.stdout)["cells"])


@pytest.mark.spark
def test_spark_aggregation_reads_the_run_directories_to_the_same_table(finished) -> None:
    """The executors open every run's results.json and the history again
    (--recheck): the table is the inline one, and Parquet is written."""
    tmp, first = finished
    r = kraftwerk("campaign", str(tmp / "c.yaml"), "--out", str(tmp / "out"), "--json",
                  "--engine", "spark", "--recheck")
    assert r.returncode == 1, r.stderr[-2000:]
    camp = json.loads(r.stdout)
    assert camp["engine"] == "spark"
    assert comparable(camp["cells"]) == comparable(json.loads(first.stdout)["cells"])
    d = tmp / "out" / "campaigns" / "kip101"
    assert list((d / "cells.parquet").glob("part-*.parquet")) and list((d / "runs.parquet").glob("part-*.parquet"))


def test_the_default_campaign_is_the_reference_broker_as_real_processes_under_both_acks() -> None:
    from harness.campaign.spec import load_spec
    from harness.cli.campaign import DEFAULT_CAMPAIGN

    spec = load_spec(DEFAULT_CAMPAIGN)
    assert spec.fixed["runtime"] == "real" and spec.fixed["nemesis"] == "partition,kill"
    assert [c.id for c in cells(spec)] == ["acks=all", "acks=1"]
