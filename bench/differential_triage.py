"""Triage of a differential campaign's acks=1 disagreements: was it the
roles, or the model? (And of its verdict disagreements: what only one side
showed.)

A schedule names nodes (``n2``, a ring of six, halves), but which node is
the active controller and which broker leads which partition is not in the
schedule: the model draws its first KRaft leader from the seed and places
replicas round-robin from n1, Kafka elects its first controller by
randomised election timeouts and places replicas from a random start. A
pinned fault (halves, one, a minority, a ring) then cuts, kills or pauses
a partition leader on one side and a follower on the other, and only the
first loses acks=1 writes.

For each pair this replays on the model (no real cluster, no lock) the
schedule *as Kafka played it* (its test.json: Kafka's times): as Kafka did
it (Kafka's node names, its targets as it resolved them); with every
pinned node renamed to the model's node of the same first role (the first
active controller to the model's, each broker to the model's broker of
the same replica position) and the targets the protocol's state names
(the controller, a leader, the ISR targets) named again from the model's
state; that moved by up to 300 ms; and that with each restarted process
coming up as late as Kafka's did here (``start_delay_ms``). If a replay
loses acks=1 writes exactly when Kafka did, it explains the disagreement;
if none does but the moved replays go both ways (a race), the export ships
the smallest move that loses exactly when Kafka did; otherwise the pair is
read by hand.

    .venv/bin/python bench/differential_triage.py --campaign /tmp/kdiff [--all] [--json OUT]
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

from harness.cli.hunt import both_make, sim_config  # noqa: E402
from harness.config import build_config  # noqa: E402
from harness.lifecycle.runner import run_seed  # noqa: E402
from harness.search import compare  # noqa: E402


def node_name(node_id: int) -> str:
    """A trace's node id as the schedule names it (controllers are 101..)."""
    return f"c{node_id - 100}" if node_id > 100 else f"n{node_id}"


def _events(files: list[Path]) -> list[dict[str, Any]]:
    out = []
    for f in files:
        with f.open() as fh:
            out += [json.loads(line) for line in fh if '"raft_state"' in line or '"partition_metadata"' in line]
    return sorted(out, key=lambda e: e["t"])


def roles(run_dir: str | Path, model: bool) -> dict[str, Any]:
    """The first active controller and each partition's first replica list
    (leader first): from the controllers' traces on the model, from the
    observer's on Kafka."""
    d = Path(run_dir) / "nodes"
    files = sorted(d.glob("c*/trace.jsonl")) if model else [d / "observer" / "trace.jsonl"]
    ctl, replicas = None, {}
    for e in _events(files):
        if e["kind"] == "raft_state" and e.get("role") == "leader" and ctl is None:
            ctl = node_name(int(e["leader"]))
        elif e["kind"] == "partition_metadata" and e["tp"] not in replicas and e.get("leader", -1) >= 0:
            reps = [int(r) for r in e["replicas"]]
            lead = int(e["leader"])
            replicas[e["tp"]] = [node_name(r) for r in [lead] + [r for r in reps if r != lead]]
    return {"controller": ctl, "replicas": replicas}


def relabel(kafka: dict[str, Any], model: dict[str, Any]) -> tuple[dict[str, str], bool]:
    """Kafka's node -> the model's node of the same role. Brokers by replica
    position, the first partition first (``exact``: every partition's list
    maps the same way); controllers: the active one to the model's, the
    others in name order."""
    m: dict[str, str] = {}
    exact = True
    for tp in sorted(kafka["replicas"]):
        for k, v in zip(kafka["replicas"][tp], model["replicas"].get(tp, [])):
            if k not in m and v not in m.values():
                m[k] = v
            elif m.get(k) != v:
                exact = False
    brokers = sorted({n for r in kafka["replicas"].values() for n in r})
    rest = [b for b in brokers if b not in m.values()]
    for b in brokers:
        m.setdefault(b, rest.pop(0) if rest else b)
    kc, mc = kafka["controller"], model["controller"]
    ctls = sorted({f"c{i}" for i in range(1, 4)} | {c for c in (kc, mc) if c})
    if kc and mc:
        m[kc] = mc
    left = [c for c in ctls if c not in m.values()]
    for c in ctls:
        if c not in m:
            m[c] = left.pop(0)
    return m, exact


def rename(obj: Any, m: dict[str, str]) -> Any:
    """Every node name in a schedule entry (nodes, cuts, clock offsets' keys,
    the informational minority/ring lists) renamed by ``m``."""
    if isinstance(obj, str):
        return m.get(obj, obj)
    if isinstance(obj, list):
        return [rename(x, m) for x in obj]
    if isinstance(obj, dict):
        return {rename(k, m) if isinstance(k, str) else k: rename(v, m) for k, v in obj.items()}
    return obj


def replay(sim_cfg: Any, seed: int, entries: list[dict[str, Any]], out: Path, tag: str,
           targets: str) -> dict[str, Any]:
    """The model's run of ``entries``, targets named by state resolved again
    on the model (``resolve``) or applied to the recorded nodes."""
    f = out / f"{seed}-{tag}.json"
    f.write_text(json.dumps({"targets": targets, "schedule": entries}))
    res = run_seed(sim_cfg.replaying(str(f)), seed, out / tag)
    s = compare.summarize(res["run_dir"], res)
    return {"valid": s["valid"], "acks=1": s["durability"].get("acks=1"), "acks=all": s["durability"].get("acks=all"),
            "run_dir": s["run_dir"]}


def triage(pair: dict[str, Any], sim_cfg: Any, out: Path) -> dict[str, Any]:
    """One pair: the roles on each side, and the model's replays of Kafka's played schedule."""
    real_dir = pair["real"]["run_dir"]
    played = json.loads((Path(real_dir) / "test.json").read_text()).get("schedule") or []
    mr, kr = roles(pair["sim"]["run_dir"], True), roles(real_dir, False)
    m, exact = relabel(kr, mr)
    lost = {"model": pair["sim"]["durability"]["acks=1"]["lost"], "kafka": pair["real"]["durability"]["acks=1"]["lost"]}
    row = {"id": pair["id"], "seed": pair["seed"], "lost": lost, "late_ms": pair.get("late_ms"),
           "roles": {"model": mr, "kafka": kr}, "renaming": {k: v for k, v in m.items() if k != v},
           "placement_relabels": exact}
    row["kafka_names"] = replay(sim_cfg, pair["seed"], played, out, "kafka-names", "as-recorded")
    renamed = rename(played, m)
    row["model_roles"] = replay(sim_cfg, pair["seed"], renamed, out, "model-roles", "resolve")
    row["shifted"] = {d: lost_of(replay(sim_cfg, pair["seed"], shifted(renamed, d), out, f"shift{d}", "resolve"))
                      for d in SHIFTS_MS if d}
    slow = sim_cfg.model_copy(update={"start_delay_ms": START_DELAY_MS})
    row["slow_start"] = replay(slow, pair["seed"], renamed, out, "slow-start", "resolve")
    row["only"] = only_one_side(pair)
    acks1_differs = (lost["model"] > 0) != (lost["kafka"] > 0)
    row["verdict"] = cause(lost["kafka"], row) if acks1_differs else verdict_cause(row["only"])
    row["moved_ms"] = agreeing_shift(lost["kafka"], row["shifted"]) if row["verdict"] == "race" else None
    return row


def only_one_side(pair: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """The anomaly types one side showed and the other did not: trace
    invariants (the model's glass-box trace, Kafka's observer) apart from
    what the clients' history shows."""
    out: dict[str, dict[str, list[str]]] = {}
    for side, other in (("sim", "real"), ("real", "sim")):
        a, b = pair[side], pair[other]
        hist = set(a.get("history_anomalies", a.get("anomaly_types") or []))
        types = set(a.get("anomaly_types") or []) - set(b.get("anomaly_types") or [])
        out["model" if side == "sim" else "kafka"] = {"history": sorted(types & hist),
                                                       "invariants": sorted(types - hist)}
    return out


def verdict_cause(only: dict[str, dict[str, list[str]]]) -> str:
    """A pair whose verdicts differ while acks=1 loss agrees: ``invariant``
    when what only one side showed is trace invariants alone (a rule of the
    protocol's state the two implementations keep differently: read by
    hand against Kafka's source), else ``open``."""
    shown = [v for side in only.values() for v in side["history"]]
    return "invariant" if not shown and any(side["invariants"] for side in only.values()) else "open"


def agreeing_shift(kafka_lost: int, moved: dict[Any, int]) -> int | None:
    """The smallest move (ms) of the renamed schedule at which the model
    loses acks=1 writes exactly when Kafka did: a race's replay that
    reproduces Kafka's outcome (the earlier move on a tie)."""
    agree = [int(d) for d, n in moved.items() if (n > 0) == (kafka_lost > 0)]
    return min(agree, key=lambda d: (abs(d), d)) if agree else None


#: how long a Kafka broker or controller took to start again on this
#: machine (the median of the campaign's measured restarts, ms): the
#: model's ``start_delay_ms`` in replay 4
START_DELAY_MS = 6400

#: how far the renamed schedule is moved, every fault at once: the
#: millisecond race an acks=1 loss is decided by, tried on the model itself
SHIFTS_MS = (-300, -200, -100, -50, 0, 50, 100, 200, 300)


def shifted(entries: list[dict[str, Any]], d: int) -> list[dict[str, Any]]:
    return [{**e, "at_ms": max(0, int(e["at_ms"]) + d)} for e in entries]


def lost_of(r: dict[str, Any]) -> int:
    return int((r["acks=1"] or {}).get("lost") or 0)


def cause(kafka_lost: int, row: dict[str, Any]) -> str:
    """What the replays say: ``played`` (the model agrees with Kafka once it
    plays the faults when and on what Kafka did), ``roles`` (and once each
    pinned node has the model's role of Kafka's), ``start-time`` (and once
    a restarted process comes up as late as Kafka's did), ``race`` (none, but the
    model itself goes both ways when every fault moves by up to 300 ms: a
    race of milliseconds decides it on both runtimes), or ``open`` (the
    model disagrees however the faults move: a model rule or a timer, read
    by hand)."""
    if (lost_of(row["kafka_names"]) > 0) == (kafka_lost > 0):
        return "played"
    if (lost_of(row["model_roles"]) > 0) == (kafka_lost > 0):
        return "roles"
    if (lost_of(row["slow_start"]) > 0) == (kafka_lost > 0):
        return "start-time"
    outcomes = {n > 0 for n in [lost_of(row["model_roles"]), *row["shifted"].values()]}
    return "race" if len(outcomes) == 2 else "open"


def line(r: dict[str, Any]) -> str:
    ren = ",".join(f"{k}->{v}" for k, v in sorted(r["renaming"].items())) or "none"
    a, b = r["kafka_names"]["acks=1"] or {}, r["model_roles"]["acks=1"] or {}
    return (f"| {r['id']} | {r['seed']} | {r['lost']['model']} | {r['lost']['kafka']} | {r['late_ms']} | "
            f"{r['roles']['model']['controller']} / {r['roles']['kafka']['controller']} | {ren} | "
            f"{a.get('lost')} / {a.get('acked')} | {b.get('lost')} / {b.get('acked')} | "
            f"{sum(1 for n in r['shifted'].values() if n)} of {len(r['shifted'])} | "
            f"{lost_of(r['slow_start'])} | {r['verdict']} |")


#: the model's side of a pair from the command line: the simulator with Kafka's timeouts (``kraftwerk hunt``'s mapping)
SIM = ("kraftwerk sim --schedule {f} --seeds {seed} --protocol replica.lag.time.max.ms=3000 "
       "--protocol request.timeout.ms=5000")
KAFKA = "kraftwerk run --db kafka --backend netns --schedule {f}"


def export(rows: list[dict[str, Any]], pairs: dict[int, dict[str, Any]], campaign: Path, dest: Path,
           storage: str | None = None) -> None:
    """Each triaged pair as files anyone can replay: the campaign's schedule
    (on Kafka and on the model), and Kafka's played schedule as Kafka did it
    and with the model's roles (on the model: what reproduces Kafka's
    outcome), with a summary merged into ``dest``'s triage.json by pair id."""
    dest.mkdir(parents=True, exist_ok=True)
    summary = []
    for r in rows:
        pair = pairs[r["id"]]
        src = Path(pair["schedule_file"])
        if not src.is_absolute() or not src.exists():
            src = campaign / "schedules" / src.name
        settings = json.loads(src.read_text())
        own = dest / f"{r['id']:04d}-seed{r['seed']}.json"
        own.write_text(json.dumps(settings, indent=1) + "\n")
        played = json.loads((Path(pair["real"]["run_dir"]) / "test.json").read_text()).get("schedule") or []
        as_kafka = dest / f"{r['id']:04d}-seed{r['seed']}-kafka-played.json"
        as_kafka.write_text(json.dumps({**settings, "targets": "as-recorded", "schedule": played}, indent=1) + "\n")
        as_roles = dest / f"{r['id']:04d}-seed{r['seed']}-kafka-played-model-roles.json"
        as_roles.write_text(json.dumps({**settings, "schedule": rename(played, r["renaming"])}, indent=1) + "\n")
        rel = Path("docs/findings") / dest.name
        moved = r.get("moved_ms")
        extra: dict[str, Any] = {}
        if moved is not None:  # a race: the move at which the model's outcome is Kafka's
            as_moved = dest / f"{r['id']:04d}-seed{r['seed']}-kafka-played-model-roles-moved{moved}.json"
            as_moved.write_text(json.dumps({**settings, "schedule": shifted(rename(played, r["renaming"]), moved)},
                                           indent=1) + "\n")
            extra = {"moved_ms": moved, "model as kafka played, model's roles, moved":
                     SIM.format(f=rel / as_moved.name, seed=r["seed"])}
        summary.append({
            "id": r["id"], "seed": r["seed"], "acks=1 lost": r["lost"], "late_ms": r["late_ms"],
            "controller": {k: v["controller"] for k, v in r["roles"].items()},
            "first leaders": {k: {tp: reps[0] for tp, reps in v["replicas"].items()} for k, v in r["roles"].items()},
            "kafka to model names": r["renaming"],
            "model, as Kafka played it": lost_of(r["kafka_names"]),
            "model, as Kafka played it, model's roles": lost_of(r["model_roles"]),
            "model, moved -300..300 ms, runs that lose": f"{sum(1 for n in r['shifted'].values() if n)} of {len(r['shifted'])}",
            "model, model's roles, restarts 6.4 s late": lost_of(r["slow_start"]),
            "cause": r["verdict"],
            **({"only one side showed": r["only"]} if r.get("only") and r["verdict"] == "invariant" else {}),
            "kafka": KAFKA.format(f=rel / own.name) + (f" --storage {storage}" if storage else ""),
            "model": SIM.format(f=rel / own.name, seed=r["seed"]),
            "model as kafka played": SIM.format(f=rel / as_kafka.name, seed=r["seed"]),
            "model as kafka played, model's roles": SIM.format(f=rel / as_roles.name, seed=r["seed"]),
            "model as kafka played, model's roles, slow restarts":
                SIM.format(f=rel / as_roles.name, seed=r["seed"]) + f" --start-delay-ms {START_DELAY_MS}",
            **extra,
        })
    merged = {r["id"]: r for r in _prior(dest / "triage.json")} | {r["id"]: r for r in summary}
    (dest / "triage.json").write_text(json.dumps([merged[i] for i in sorted(merged)], indent=1) + "\n")


def _prior(f: Path) -> list[dict[str, Any]]:
    """The rows an earlier export wrote: a later batch's pairs (``--ids``)
    are added to them, a pair triaged again replaces its row."""
    return json.loads(f.read_text()) if f.exists() else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", required=True, help="the campaign's --out (its hunt.json)")
    ap.add_argument("--all", action="store_true", help="every pair, not only the acks=1 disagreements")
    ap.add_argument("--ids", default="", help="only these pair ids (comma-separated)")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--keep", default=None, help="keep the model's run directories here (default: removed)")
    ap.add_argument("--export", default=None, help="write each pair's schedule files and triage.json here")
    ap.add_argument("--storage", choices=["os", "lazyfs"], default=None,
                    help="the campaign's --storage: the exported Kafka commands say it (lazyfs: power loss)")
    a = ap.parse_args()
    try:
        state = json.loads((Path(a.campaign) / "hunt.json").read_text())
        pairs, brokers = state["pairs"], int(state["settings"]["real"].get("brokers", 3))
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"--campaign {a.campaign}: no campaign's hunt.json there ({type(e).__name__})")
    try:
        ids = {int(i) for i in a.ids.split(",") if i}
    except ValueError:
        ap.error(f"--ids wants pair ids separated by commas, not {a.ids!r}")
    pick = [p for p in pairs if (a.all or (p.get("agree") or {}).get("acks=1 loss") is False
                                 or p["class"] in ("real-only", "model-only"))
            and (not ids or p["id"] in ids) and (p.get("real") or {}).get("run_dir")]
    # the campaign's cluster: a schedule names its brokers (a 4th one for reassign and decommission)
    real = build_config({}, {"db": "kafka", "backend": "netns", "time_limit": 15, "acks": "mixed",
                             "nemesis_mode": "overlap", "name": "diff", "brokers": brokers})
    sim_cfg = sim_config(real.model_copy(update={"nemesis": both_make(real)}))
    print("| id | seed | model lost | Kafka lost | late ms | controller model / Kafka | Kafka -> model names "
          "| model, Kafka's schedule: lost / acked | same, roles renamed | shifted runs that lose | roles, restarts 6.4 s late: lost | cause |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kw-triage-") as tmp:
        out = Path(a.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        for p in pick:
            rows.append(triage(p, sim_cfg, out))
            print(line(rows[-1]), flush=True)
    if a.export:
        export(rows, {p["id"]: p for p in pairs}, Path(a.campaign), Path(a.export), a.storage)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1, default=str))
    print(", ".join(f"{k} {n}" for k, n in Counter(r["verdict"] for r in rows).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
