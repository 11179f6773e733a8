"""The model's switches against the Kafka releases they stand for: each real
Kafka run given (a run directory of ``kraftwerk run --db kafka``) is replayed
in the simulator with its own schedule and seed (``kraftwerk sim --schedule``)
on the model variant that stands for the run's release, and the two are put
side by side: the verdict, acks=all acknowledged/lost, and whether a
partition's HW rose while its ISR was below min ISR (on Kafka the observer's
``hw-advanced-under-min-isr``; in the model the same rule on the leaders' own
trace, ``checkers.observed.hw_under_min_isr_in_trace``).

Which variant stands for which release: ``kip966=off`` for every release
without ELR (3.3 .. 3.9; it also lets the HW advance under min ISR, which only
3.3 .. 3.6 do: KAFKA-15583, fixed in 3.7.0, so on 3.7 .. 3.9 the HW column is
expected to differ), the model's defaults (ELR, strict min ISR) for 4.0+.

    .venv/bin/python bench/kafka_model_vs_release.py RUN_DIR... [--out /tmp/kraftwerk-model-vs-release]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkers.invariants import iter_trace_dir  # noqa: E402
from checkers.observed import HW_UNDER_MIN_ISR, hw_under_min_isr_in_trace  # noqa: E402
from harness.dbs.kafka.releases import ELR_NONE, release_for  # noqa: E402


def variant_for(version: str) -> list[str]:
    return ["--variant", "kip966=off"] if release_for(version, home=True).elr == ELR_NONE else []


def row(res: dict, hw_found: int) -> dict:
    allowed = set(((res.get("checkers") or {}).get("queue") or {}).get("allowed_anomaly_types") or [])
    d = (res.get("durability") or {}).get("acks=all") or {}
    return {"valid": res.get("valid"), "acked": d.get("acked"), "lost": d.get("lost") or 0, "hw": hw_found,
            "types": [t for t in res.get("anomaly_types") or [] if t not in allowed]}


def kafka_side(run: Path) -> tuple[dict, dict]:
    test = json.loads((run / "test.json").read_text())
    res = json.loads((run / "results.json").read_text())
    counts = (res.get("invariants") or {}).get("counts") or {}
    return test, row(res, int(counts.get(HW_UNDER_MIN_ISR, 0)))


def model_side(run: Path, test: dict, out: Path) -> dict:
    argv = [sys.executable, "-c", "from harness.cli import main; main()", "sim", "--schedule", str(run / "test.json"),
            "--seed", str(test.get("seed") or 1), "--out", str(out), "--name", f"{run.parent.name}-{run.name}",
            "--json", "--no-report", *variant_for(test["kafka_version"])]
    p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=900)
    try:
        res = json.loads(p.stdout)
    except ValueError:
        raise SystemExit(f"{run}: the simulator failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    res = res[0] if isinstance(res, list) else res
    found = hw_under_min_isr_in_trace(iter_trace_dir(res["run_dir"]), int(test.get("min_isr") or 1))
    return row(res, len(found))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("/tmp/kraftwerk-model-vs-release"))
    args = ap.parse_args()
    print(f"{'release':<8}{'seed':<6}{'model':<12}{'Kafka: valid lost/acked HW':<30}"
          f"{'model: valid lost/acked HW':<30}{'agree':<7}run")
    for run in args.runs:
        test, k = kafka_side(run)
        m = model_side(run, test, args.out)
        agree = ((k["lost"] > 0) == (m["lost"] > 0) and (k["hw"] > 0) == (m["hw"] > 0))
        model = " ".join(variant_for(test["kafka_version"])[1:]) or "defaults"
        cell = lambda r: f"{str(r['valid']):<6}{r['lost']}/{r['acked']} {r['hw']}"  # noqa: E731
        print(f"{test['kafka_version']:<8}{test.get('seed')!s:<6}{model:<12}{cell(k):<30}{cell(m):<30}"
              f"{'yes' if agree else 'NO':<7}{run}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
