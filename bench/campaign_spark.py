"""The same campaign on local[*] and on a Spark standalone cluster, side by side.

Runs a campaign file (default bench/campaigns/acks.yaml: 4 cells x 12
simulator seeds) twice into fresh directories: once with its seeds as local
processes summed by the embedded local[*] session, once with its seeds as
Spark tasks on a standalone cluster (a master and a worker started from the
installed PySpark) summed by that cluster's executors. Prints each cell's
runs, invalid runs, lost/acked per acks level with the 95% interval, whether
the two tables are equal, and the wall time of each.

    .venv/bin/python bench/campaign_spark.py [--file bench/campaigns/acks.yaml] [--cores 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkers.spark_standalone import StandaloneCluster  # noqa: E402


def campaign(file: Path, out: Path, *extra: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "campaign", str(file),
                        "--out", str(out), "--json", *extra], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    if r.returncode not in (0, 1):
        sys.exit(f"campaign_spark: campaign failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout), time.perf_counter() - t0


def table(c: dict) -> list[tuple]:
    rows = []
    for cell in c["cells"]:
        d = cell["durability"]
        rows.append((cell["id"], cell["runs"], cell["invalid"],
                     *[(d.get(lv) or {}).get("lost", 0) for lv in ("acks=all", "acks=1")],
                     *[(d.get(lv) or {}).get("acked", 0) for lv in ("acks=all", "acks=1")],
                     tuple(round(x, 5) for x in ((d.get("acks=all") or {}).get("lost_rate_ci95") or (0, 0))),
                     tuple(round(x, 5) for x in ((d.get("acks=1") or {}).get("lost_rate_ci95") or (0, 0)))))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=ROOT / "bench" / "campaigns" / "acks.yaml")
    ap.add_argument("--cores", type=int, default=2)
    a = ap.parse_args()
    if not a.file.is_file():
        print(f"campaign_spark: no such campaign file: {a.file}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kraftwerk-bench-campaign-") as tmp:
        local, t_local = campaign(a.file, Path(tmp) / "local", "--engine", "spark", "--no-parquet")
        with StandaloneCluster(workers=1, cores=a.cores) as url:
            dist, t_dist = campaign(a.file, Path(tmp) / "dist", "--runs-on", "spark", "--engine", "spark",
                                    "--spark-master", url, "--no-parquet")
    print(f"{'cell':<34} {'runs':>4} {'inv':>4} {'all lost/acked':>15} {'acks=1 lost/acked':>18}  acks=all 95% CI / acks=1 95% CI")
    for row in table(local):
        cid, runs, inv, la, l1, aa, a1, ci_all, ci_1 = row
        print(f"{cid:<34} {runs:>4} {inv:>4} {f'{la}/{aa}':>15} {f'{l1}/{a1}':>18}  {ci_all} / {ci_1}")
    same = table(local) == table(dist)
    print(f"local[*] (seeds as local processes): {t_local:.1f}s wall; standalone cluster (seeds as Spark tasks): "
          f"{t_dist:.1f}s wall; tables {'identical' if same else 'DIFFER'}; exit status {1 if any(c['invalid'] for c in local['cells']) else 0}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
