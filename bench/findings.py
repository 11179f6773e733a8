"""Replay each finding of docs/analysis-kafka-4.4.md from its shipped
schedule file (docs/findings/findings.json; a scripted scenario's finding
from its command: the script names each step's nodes from the cluster's
state, which a recorded schedule would pin) on real Kafka, several times,
and print each finding's verdicts and its acknowledged / lost figures as a
range: a finding reproduces when every replay gets its verdict class.

Real clusters (netns: root): run it under the machine's heavy lock, a
finding or two at a time, each run ~1-2 minutes.

    flock /tmp/kw-heavy.lock .venv/bin/python bench/findings.py --replays 3 --only 9,10 --json /tmp/f.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs" / "findings"


def command(f: dict, backend: str) -> list[str]:
    """The finding's replay: its schedule file brings the settings and the faults."""
    sched = ["--schedule", f"docs/findings/{f['file']}"] if f["file"] else []  # else a scripted scenario
    return ["kraftwerk", "run", "--db", "kafka", "--backend", backend, *f["flags"], *sched]


def replay(f: dict, backend: str, out: str) -> dict:
    args = [sys.executable, "-c", "from harness.cli import main; main()", *command(f, backend)[1:],
            "--out", out, "--json", "--no-report"]
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"valid": "error", "error": (p.stderr.strip().splitlines() or ["?"])[-1], "durability": {}}
    dur = {m: {"acked": d.get("acked"), "lost": d.get("lost")} for m, d in (res.get("durability") or {}).items()
           if isinstance(d, dict) and d.get("acked")}
    return {"valid": res.get("valid"), "durability": dur, "anomaly_types": res.get("anomaly_types") or [],
            "run_dir": res.get("run_dir")}


def ranges(runs: list[dict]) -> dict[str, str]:
    """Per acks level, lost / acknowledged as min-max ranges."""
    out = {}
    for mode in sorted({m for r in runs for m in r["durability"]}):
        rows = [r["durability"][mode] for r in runs if mode in r["durability"]]
        lost, acked = [d["lost"] or 0 for d in rows], [d["acked"] or 0 for d in rows]
        span = lambda xs: f"{min(xs)}" if min(xs) == max(xs) else f"{min(xs)}-{max(xs)}"  # noqa: E731
        out[mode] = f"{span(lost)} / {span(acked)}"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--only", default="", help="comma list of finding numbers")
    ap.add_argument("--backend", default="netns")
    ap.add_argument("--json", default=None, help="append each finding's replays to this JSON file")
    a = ap.parse_args()
    only = {int(x) for x in a.only.split(",") if x}
    table = json.loads((FINDINGS / "findings.json").read_text())
    bad = 0
    for f in table:
        if only and f["finding"] not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="kw-findings-") as out:
            runs = [replay(f, a.backend, out) for _ in range(a.replays)]
        verdicts = ["valid" if r["valid"] is True else "invalid" if r["valid"] is False else str(r["valid"])
                    for r in runs]
        same = sum(1 for v in verdicts if v == f["expect"])
        bad += same != len(runs)
        print(f"finding {f['finding']}: expect {f['expect']}, got {same} of {len(runs)} "
              f"({', '.join(verdicts)}); lost / acked {ranges(runs)}", flush=True)
        for r in runs:
            if r.get("error"):
                print(f"  error: {r['error']}", flush=True)
        if a.json:
            p = Path(a.json)
            prior = json.loads(p.read_text()) if p.exists() else []
            p.write_text(json.dumps(prior + [{**f, "runs": runs, "ranges": ranges(runs)}], indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
