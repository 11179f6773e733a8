"""Every KRaft-era release, 3.3 .. 4.4 (the latest patch of each minor),
starts, serves the queue workload and survives 60 s of partitions and kills
on the netns backend (acks=all, RF 3, min ISR 2): valid, or invalid only
with findings a known bug of that release explains
(``harness.dbs.kafka.releases.BUGS``). About 2-3 minutes a release, so
``slow``: ``bench/kafka_releases.py --pytest`` runs them, and
``bench/kafka_releases.py`` prints a row per release."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.dbs.kafka.releases import MATRIX, explained

pytestmark = [pytest.mark.slow, pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--db", "kafka", "--backend", "netns", "--nemesis", "partition,kill", "--nemesis-interval", "10",
         "--time-limit", "60", "--acks", "all", "--rf", "3", "--min-isr", "2"]


@pytest.fixture(autouse=True)
def _root():
    if os.geteuid() != 0:
        pytest.skip("the netns backend needs root")


@pytest.mark.parametrize("version", MATRIX)
def test_every_release_survives_a_partition_and_kill_campaign(tmp_path, version):
    out = tmp_path / "results"
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", *FLAGS,
                        "--kafka-version", version, "--seed", "1", "--out", str(out), "--json", "--no-progress"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode in (0, 1), f"exit {r.returncode}: {r.stderr[-800:]}"
    assert not list((out / ".state").glob("*.json")), "state file left behind"
    res = json.loads(r.stdout)
    assert res["durability"]["acks=all"]["acked"] > 100, "the release did not serve the workload"
    test = json.loads((Path(res["run_dir"]) / "test.json").read_text())
    assert test["kafka_version"] == version
    if res["valid"] is not True:
        allowed = set(res["checkers"]["queue"]["allowed_anomaly_types"])
        left, bugs = explained(version, [t for t in res["anomaly_types"] if t not in allowed], FLAGS)
        assert res["valid"] is False and not left and bugs, (res["valid"], left)
