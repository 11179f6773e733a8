"""A differential campaign's model side again, on the model as it is now.

The agreement table of a campaign (bench/differential_campaign.py) was
drawn by the model of its day; the model changes after it (a rule fixed,
a connection modelled). This re-simulates every pair's seed with the
campaign's own settings (its hunt.json) and prints, beside the recorded
agreement, the one the current model gives with the recorded Kafka run,
and each pair whose model outcome (verdict, or whether each acks level
lost a write) changed. Kafka is not run again: its side is the record.

    .venv/bin/python bench/differential_resim.py --campaign /tmp/kdiff
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.cli.hunt import sim_config  # noqa: E402
from harness.config import TestConfig  # noqa: E402
from harness.search.compare import agreement  # noqa: E402
from harness.search.hunt import sim_one  # noqa: E402


def lost(durability: dict[str, Any]) -> dict[str, bool]:
    return {mode: ((d or {}).get("lost") or 0) > 0 for mode, d in durability.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", required=True, help="the campaign's --out (its hunt.json)")
    a = ap.parse_args()
    try:
        state = json.loads((Path(a.campaign) / "hunt.json").read_text())
        pairs, real = state["pairs"], TestConfig.model_validate(state["settings"]["real"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"--campaign {a.campaign}: no campaign's hunt.json there ({type(e).__name__})")
    cfg = sim_config(real)
    was: Counter[tuple[str, bool]] = Counter()
    now: Counter[tuple[str, bool]] = Counter()
    with tempfile.TemporaryDirectory(prefix="kw-resim-") as tmp:
        for p in pairs:
            r = sim_one(cfg, p["seed"], None, tmp)
            if r.get("error"):
                print(f"pair {p['id']} (seed {p['seed']}): the model could not play it: {r['error']}", flush=True)
                continue
            s = r["summary"]
            agree = agreement(s, p["real"])
            was.update(p["agree"].items())
            now.update(agree.items())
            if r["valid"] != p["sim"]["valid"] or lost(s["durability"]) != lost(p["sim"]["durability"]):
                print(f"pair {p['id']} (seed {p['seed']}): model was valid={p['sim']['valid']} lost "
                      + ", ".join(f"{m} {d.get('lost', 0)}/{d.get('acked', 0)}" for m, d in p["sim"]["durability"].items())
                      + f"; now valid={r['valid']} lost "
                      + ", ".join(f"{m} {d.get('lost', 0)}/{d.get('acked', 0)}" for m, d in s["durability"].items())
                      + "; agrees with Kafka on " + ", ".join(k for k, v in agree.items() if v), flush=True)
    print("| agreement with the recorded Kafka runs | recorded model | current model |")
    print("| --- | --- | --- |")
    for key in sorted({k for k, _ in was} | {k for k, _ in now}):
        print(f"| {key} | {was[(key, True)]} of {was[(key, True)] + was[(key, False)]} "
              f"| {now[(key, True)]} of {now[(key, True)] + now[(key, False)]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
