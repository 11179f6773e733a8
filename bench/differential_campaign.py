"""A differential campaign: seeded fault schedules drawn on the model (the
simulator with Kafka's timeouts, ``kraftwerk hunt``'s mapping), each
replayed on real Kafka from its schedule file, every pair classified as a
hunt classifies it (``harness.search.hunt``): both valid, both invalid,
model only, Kafka only, and whether each acks level lost acknowledged
writes on both sides.

Unlike a hunt, nothing is ranked: seeds in order, over every generic fault
both dbs make (netns: partitions of every shape and role, kill, terminate,
pause, clock, clock strobe, leader, controller and ISR-state targets), at
``--acks mixed`` (even worker threads acks=all, odd acks=1); with
``--brokers`` above the replication factor, reassign and decommission too
(a broker to move a replica to), and ``--kinds`` keeps only the faults of
the kinds it names. Real clusters:
run it under the machine's heavy lock, one batch at a time (``--batch``
seconds of Kafka runs); each run resumes the campaign in ``--out``, and a
larger ``--seeds`` than it was started with draws the further seeds on the
model first (``--batch 0`` draws them without a real run, outside the lock).

    flock /tmp/kw-heavy.lock .venv/bin/python bench/differential_campaign.py --out /tmp/kdiff --batch 780
    flock /tmp/kw-heavy.lock .venv/bin/python bench/differential_campaign.py --out /tmp/kdiff-pl --storage lazyfs --first-seed 2000 --seeds 20 --batch 780
    flock /tmp/kw-heavy.lock .venv/bin/python bench/differential_campaign.py --out /tmp/kdiff-rd --brokers 4 --kinds reassign,decommission,partition,kill --first-seed 3000 --seeds 20 --batch 600
    .venv/bin/python bench/differential_campaign.py --out /tmp/kdiff --table
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.cli.hunt import both_make, sim_config  # noqa: E402
from harness.config import TestConfig, build_config  # noqa: E402
from harness.errors import UsageError  # noqa: E402
from harness.search.hunt import Hunt, sim_one, table  # noqa: E402
from nemesis.faults import KINDS, MEMBERSHIP, FaultSpec  # noqa: E402


def campaign_mix(real: TestConfig, kinds: str | None) -> list[FaultSpec]:
    """The faults both dbs make on this cluster (``both_make``), only those
    of ``kinds`` if given; a kind neither makes here is refused (why: the
    kind is unknown, or it needs a capability or a spare broker)."""
    mix = both_make(real)
    if kinds is None:
        return mix
    want = [k.strip() for k in kinds.split(",") if k.strip()]
    made = {s.kind for s in mix}
    for k in want:
        if k not in KINDS:
            raise UsageError(f"--kinds: unknown fault kind {k!r} (kinds: {', '.join(KINDS)})")
        if k not in made:
            spare = " (it needs more --brokers than --rf)" if k in MEMBERSHIP else ""
            raise UsageError(f"--kinds: {k} is not a fault both dbs make on this cluster{spare}")
    if not want:
        raise UsageError("--kinds names no fault kind")
    return [s for s in mix if s.kind in want]


def prepare(hunt: Hunt, seeds: range, first_id: int = 0) -> None:
    """Every seed simulated once, each a candidate in seed order (ids from
    ``first_id``: a resumed campaign grown by ``--seeds``)."""
    st = hunt.state
    for i, seed in enumerate(seeds, start=first_id):
        r = sim_one(hunt.sim_cfg, seed, None, str(hunt.out / "sim"))
        c = {"id": i, "seed": seed, "near": r["near"], "new_states": [], "schedule": r["schedule"],
             "placement": r.get("placement") or {}, "sim": {"valid": r["valid"], "anomalies": r.get("anomalies") or [], "run_dir": r["run_dir"],
                     "error": r.get("error"), "summary": r.get("summary")}}
        c["score"] = 0 if r.get("error") else 1
        st["candidates"].append(c)
    st.update(phase="confirm", tried=len(st["candidates"]))
    hunt.save()
    print(f"simulated {len(seeds)} seeds: model " + ", ".join(
        f"{k} {n}" for k, n in Counter(str(c["sim"]["valid"]) for c in st["candidates"]).items()), flush=True)


def markdown(pairs: list[dict]) -> str:
    """The agreement table: classes, then loss agreement per acks level and per fault kind."""
    lines = ["| class | pairs |", "| --- | --- |"] + [f"| {k} | {n} |" for k, n in table(pairs).items()]
    modes = sorted({m for p in pairs for m in p.get("agree") or {} if m != "verdict"})
    lines += ["", "| acks level | loss agrees | disagrees |", "| --- | --- | --- |"]
    for m in modes:
        ok = sum(1 for p in pairs if (p.get("agree") or {}).get(m) is True)
        no = sum(1 for p in pairs if (p.get("agree") or {}).get(m) is False)
        lines.append(f"| {m.replace(' loss', '')} | {ok} | {no} |")
    kinds = Counter(k for p in pairs for k in {f.split(":")[0] for f in p["faults"]})
    lines += ["", "| fault kind | schedules with it | disagreements among them |", "| --- | --- | --- |"]
    for k, n in sorted(kinds.items()):
        bad = sum(1 for p in pairs if any(f.split(":")[0] == k for f in p["faults"])
                  and (p["class"] in ("model-only", "real-only") or not all((p.get("agree") or {}).values())))
        lines.append(f"| {k} | {n} | {bad} |")
    return "\n".join(lines)


def _reason(entry: dict) -> str:
    """A power-loss start's outcome: applied, or why it was skipped (its
    sentence up to the colon that names nodes)."""
    return "applied" if entry.get("nodes") and "skipped" not in entry else str(entry.get("skipped", "no node")).split(":")[0]


def power_draws(state: dict) -> str:
    """Power-loss starts (``lose-unfsynced``) on each side, applied or
    skipped and why: the model's from each schedule as drawn, Kafka's from
    each run's history as it played the schedule (``--ids`` of pairs)."""
    model: Counter = Counter()
    kafka: Counter = Counter()
    paired = {p["id"]: p for p in state["pairs"]}
    for c in state["candidates"]:
        if c["id"] not in paired:
            continue
        model.update(_reason(e) for e in c["schedule"] if e.get("f") == "start-lose-unfsynced")
        run = (paired[c["id"]].get("real") or {}).get("run_dir")
        hist = Path(run) / "history.jsonl" if run else None
        if hist is not None and hist.exists():
            for line in hist.open():
                if '"start-lose-unfsynced"' in line:
                    op = json.loads(line)
                    if op.get("process") == "nemesis" and "target" in (op.get("value") or {}):
                        kafka[_reason(op["value"])] += 1
    keys = ["applied"] + sorted((set(model) | set(kafka)) - {"applied"})
    lines = ["| power-loss draw | model | Kafka |", "| --- | --- | --- |"]
    lines += [f"| {k} | {model[k]} | {kafka[k]} |" for k in keys]
    lines.append(f"| all | {sum(model.values())} | {sum(kafka.values())} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, default=120)
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--time-limit", type=float, default=15)
    ap.add_argument("--batch", type=float, default=780, help="seconds of real runs in this batch")
    ap.add_argument("--table", action="store_true", help="print the agreement table and stop")
    ap.add_argument("--ids", default="", help="with --table: only these pairs (first-last)")
    ap.add_argument("--storage", choices=["os", "lazyfs"], default=None,
                    help="lazyfs: Kafka's logs on kraftwerk fs, so power loss (lose-unfsynced) joins the faults")
    ap.add_argument("--brokers", type=int, default=None,
                    help="brokers (default 3); above --rf 3, reassign and decommission join the faults")
    ap.add_argument("--kinds", default=None,
                    help="only the faults of these kinds, comma-separated (e.g. reassign,decommission,partition,kill)")
    a = ap.parse_args()
    out = Path(a.out)
    if a.table:
        try:
            state = json.loads((out / "hunt.json").read_text())
        except (OSError, ValueError) as e:
            ap.error(f"--out {out}: no campaign's hunt.json there ({type(e).__name__})")
        if a.ids:
            try:
                lo, _, hi = a.ids.partition("-")
                keep = range(int(lo), int(hi or lo) + 1)
            except ValueError:
                ap.error(f"--ids wants FIRST-LAST, not {a.ids!r}")
            state["pairs"] = [p for p in state["pairs"] if p["id"] in keep]
        print(markdown(state["pairs"]))
        if any(e.get("f") == "start-lose-unfsynced" for c in state["candidates"] for e in c["schedule"]):
            print("\n" + power_draws(state))
        return 0
    try:
        real = build_config({}, {"db": "kafka", "backend": "netns", "time_limit": a.time_limit, "acks": "mixed",
                                 "nemesis_mode": "overlap", "out": str(out / "runs"), "name": "diff",
                                 **({"storage": a.storage} if a.storage else {}),
                                 **({"brokers": a.brokers} if a.brokers is not None else {})})
        real = real.model_copy(update={"nemesis": campaign_mix(real, a.kinds)})
    except (UsageError, ValueError) as e:
        ap.error(str(e).splitlines()[0])
    hunt = Hunt(sim_config(real), real, 86_400, out)
    if not hunt.load():
        prepare(hunt, range(a.first_seed, a.first_seed + a.seeds))
    elif len(hunt.state["candidates"]) < a.seeds:  # grown: the seeds after those drawn, on the model as it is now
        drawn = len(hunt.state["candidates"])
        prepare(hunt, range(a.first_seed + drawn, a.first_seed + a.seeds), first_id=drawn)
    hunt.confirm(a.batch)
    print("pairs so far: " + ", ".join(f"{k} {n}" for k, n in table(hunt.state["pairs"]).items())
          + f"; {len(hunt.ranked())} schedules left", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
