"""The same campaign on a real Spark standalone cluster (a master and a
worker started from the installed PySpark, separate JVM processes): its
seeds run as Spark tasks on the worker's executors, which write the run
directories and then read them back to sum the cells. The table equals the
one of the same seeds run and summed locally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.spark_standalone import StandaloneCluster
from tests.campaign.test_campaign import comparable, kraftwerk

SPEC = """\
name: standalone
runtime: sim
seeds: 1..2
time-limit: 6
nemesis: kill
nemesis-interval: 2
matrix:
  acks: [all, "1"]
"""


@pytest.mark.spark
def test_seeds_as_spark_tasks_on_a_standalone_cluster_give_the_local_table(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(SPEC)
    local = kraftwerk("campaign", str(f), "--out", str(tmp_path / "local"), "--json", "--no-parquet")
    assert local.returncode == 0, local.stderr[-2000:]
    with StandaloneCluster(workers=1, cores=2, memory="1g") as url:
        dist = kraftwerk("campaign", str(f), "--out", str(tmp_path / "dist"), "--json",
                         "--runs-on", "spark", "--engine", "spark", "--spark-master", url)
    assert dist.returncode == 0, dist.stderr[-2000:]
    a, b = json.loads(local.stdout), json.loads(dist.stdout)
    assert b["engine"] == "spark"
    assert comparable(a["cells"]) == comparable(b["cells"])
    assert [c["runs"] for c in b["cells"]] == [2, 2]
    assert b["cells"][1]["durability"]["acks=1"]["acked"] > 0  # the acks=1 cell really ran acks=1
    runs = list((tmp_path / "dist" / "campaigns" / "standalone").glob("cell*/*/history.jsonl"))
    assert len(runs) == 4  # written by the executors
