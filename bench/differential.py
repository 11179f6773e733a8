"""Differential check: every scripted scenario, and a few random fault
schedules, on the reference implementation and on real Kafka, with one seed
each (``kraftwerk compare``), and an agreement table.

Runs on ``--backend netns`` (root): real Kafka can be cut link by link only
by kernel rules. A row Kafka cannot run (power loss) is printed with the
reason. Each row takes ~3 minutes (two clusters, the schedule, recovery,
final reads); ``--quick`` runs the scenarios only.

    sudo .venv/bin/python bench/differential.py [--backend netns] [--random 2] [--quick] [--json FILE]
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

from nemesis.scenarios import SCENARIOS  # noqa: E402

#: extra settings per scenario: the story each tells (nemesis/scenarios.py)
SCENARIO_ROWS: list[tuple[str, list[str]]] = [
    ("unclean-loss", ["--variant", "kip966=off", "--variant", "unclean_election=on"]),
    ("unclean-loss", ["--variant", "kip966=off"]),
    ("unclean-loss", []),
    ("acks1-leader-kill", ["--acks", "mixed"]),
    ("last-replica-standing", ["--variant", "kip966=off"]),
    ("last-replica-standing", []),
]
RANDOM_FAULTS = "partition,kill,pause,clock"


def rows(n_random: int, quick: bool) -> list[tuple[str, list[str]]]:
    out = [(f"{s} {' '.join(a[1::2]) if a else '(defaults)'}", ["--scenario", s, *a]) for s, a in SCENARIO_ROWS]
    assert {s for s, _ in SCENARIO_ROWS} == set(SCENARIOS), "a scenario has no row"
    if not quick:
        for i in range(n_random):
            out.append((f"random {RANDOM_FAULTS} #{i + 1}",
                        ["--nemesis", RANDOM_FAULTS, "--nemesis-interval", "6", "--time-limit", "40",
                         "--acks", "mixed", "--nemesis-mode", "overlap"]))
    return out


def compare(args: list[str], backend: str, seed: int, out: Path) -> dict:
    argv = [sys.executable, "-c", "from harness.cli import main; main()", "compare", "--backend", backend,
            "--seed", str(seed), "--out", str(out), "--json", *args]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=1800,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    res: dict = {"exit": p.returncode, "seconds": round(time.monotonic() - t0)}
    if p.stdout.strip():
        try:
            res.update(json.loads(p.stdout))
        except ValueError:
            res["error"] = p.stdout.strip().splitlines()[-1][:200]
    if p.returncode in (2, 4) and "reference" not in res:
        res["error"] = (p.stderr.strip().splitlines() or ["?"])[-1][:200]
    return res


def cell(side: dict | None) -> str:
    if not side:
        return "-"
    v = {True: "valid", False: "INVALID"}.get(side.get("valid"), str(side.get("valid")))
    lost = ", ".join(f"{m}:{d.get('lost')}/{d.get('acked')}" for m, d in sorted(side["durability"].items()))
    return f"{v} [{lost}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="netns")
    ap.add_argument("--random", type=int, default=2, help="random schedules (default 2)")
    ap.add_argument("--quick", action="store_true", help="scenarios only")
    ap.add_argument("--random-only", action="store_true", help="the random schedules only")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", default=None, help="results directory (default: a temporary one, removed)")
    ap.add_argument("--json", dest="json_out", default=None)
    a = ap.parse_args()
    tmp = None if a.out else tempfile.TemporaryDirectory(prefix="kraftwerk-differential-")
    out = Path(a.out or tmp.name)  # type: ignore[union-attr]
    table = []
    todo = list(enumerate(rows(a.random, a.quick)))
    if a.random_only:
        todo = todo[len(SCENARIO_ROWS):]
    for i, (label, args) in todo:
        res = compare(args, a.backend, a.seed + i, out)
        agree = res.get("agree")
        verdict = ("agree" if agree and all(agree.values()) else
                   "DISAGREE: " + ", ".join(k for k, v in (agree or {}).items() if not v) if agree else
                   "not run: " + res.get("error", f"exit {res['exit']}"))
        diff = {k: v for k, v in (res.get("anomaly_diff") or {}).items() if v}
        table.append({"row": label, "seed": a.seed + i, **res, "verdict": verdict})
        print(f"{label:<48} seed {a.seed + i:<4} ref {cell(res.get('reference')):<40} "
              f"kafka {cell(res.get('kafka')):<40} {verdict}  ({res['seconds']}s)"
              + (f"  [{'; '.join(f'{k}: {chr(44).join(v)}' for k, v in diff.items())}]" if diff else ""), flush=True)
    n = sum(1 for r in table if r["verdict"] == "agree")
    ran = sum(1 for r in table if not r["verdict"].startswith("not run"))
    print(f"agreement: {n} of {ran} rows run ({len(table) - ran} not runnable on both)")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(table, indent=1, default=str))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
