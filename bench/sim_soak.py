"""Soak the reference implementation in the simulator.

Baseline: many seeds with every fault except power loss, default variants,
acks=all, RF 3, min ISR 2; report lost acknowledged writes and invariant
violations (target: zero across 2,000 seeds).

Variants: for each historical behaviour switched back on, the number of seeds
(<= 200, with a nemesis mix chosen to provoke it) until the harness detects a
violation, and that the finding seed replays to the same history and verdict.

Detection: for every variant, the generic search as a new user runs it,
the same command for each (only the variant differs): ``kraftwerk sim
--seeds 1..N --nemesis all`` with the defaults, the same with ``--swarm``,
and ``kraftwerk explore`` with a wall-time budget. Prints the seeds to the
first detection and the detection rate (invalid seeds / seeds) per variant,
and the faithful protocol's rate over the same seeds.

    .venv/bin/python bench/sim_soak.py baseline --seeds 2000 --jobs 2
    .venv/bin/python bench/sim_soak.py variants --max-seeds 200 --jobs 2
    .venv/bin/python bench/sim_soak.py detect --seeds 50 --explore-budget 300 --jobs 2

Faithful: the protocol's defaults under every fault the simulator makes
(``--nemesis all``, with ``--swarm`` each seed its own subset, interval,
mode and rate), acks=all or mixed; one table row per batch and at the end:
seeds, acknowledged and lost writes per acks level, invalid seeds split into
losses by design (every failing anomaly follows from an election Kafka 4.4
makes the same way: results.json ``loss_by_design``, ``checkers.expected_loss``)
and the rest (model bugs until shown otherwise; they alone fail the soak),
unknown seeds by cause, partitions unavailable after the final heal by
cause (``checkers.availability``: down by design, or stuck), and the seed
whose slowest partition took its first acks=all write after the heal
closest to the run's availability bound (how much room the bound left)::

    .venv/bin/python bench/sim_soak.py faithful --seeds 10000 --swarm --acks all --jobs 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cli.sim import make_pool, run_seeds  # noqa: E402
from harness.config import build_config  # noqa: E402
from harness.errors import UsageError  # noqa: E402

#: variant -> (variants, nemesis mix, extra options: the story composites
#: that tell the variant's seed narrative come as ``scenario``)
VARIANT_HUNTS: dict[str, tuple[dict[str, bool], tuple[str, ...], dict[str, Any]]] = {
    "kip101=off": ({"kip101": False}, ("kill",), {"scenario": "leader-churn"}),
    "kip966=off": ({"kip966": False}, ("power-loss-one",), {"scenario": "last-replica-standing"}),
    "unclean_election=on": ({"unclean_election": True}, ("partition-leader",), {"scenario": "isr-crash"}),
    "strict_isr_expand=off": ({"strict_isr_expand": False}, (), {"scenario": "expand-race,leader-churn"}),
}

BASELINE_NEMESIS = ("all",)  # every generic fault, power loss of one node or a minority included

#: every historical variant, switched back on
DETECT: dict[str, dict[str, bool]] = {
    "faithful": {},
    "kip101=off": {"kip101": False},
    "kip966=off": {"kip966": False},
    "min_isr_hw_gate=off": {"min_isr_hw_gate": False},
    "unclean_election=on": {"unclean_election": True},
    "strict_isr_expand=off": {"strict_isr_expand": False},
    "maximal_isr=off": {"maximal_isr": False},
}

#: the simulated test every hunt runs (the simulator's workload of old:
#: 8 producers, 3 partitions, acks=all)
SIM: dict[str, Any] = {"backend": "sim", "acks": "all", "rf": 3, "min_isr": 2, "partitions": 3, "concurrency": 8}


def _mix(nem: tuple[str, ...], extra: dict[str, Any]) -> str:
    story = f"scenario {extra['scenario']}" if extra.get("scenario") else ""
    return ", ".join(x for x in (story, f"nemesis {','.join(nem)}" if nem else "") if x)


def _brief(r: dict[str, Any]) -> str:
    d = r.get("durability") or {}
    inv = (r.get("invariants") or {}).get("counts", {})
    return (f"seed {r.get('seed')}: valid={r.get('valid')} acks=all lost={d.get('acks=all', {}).get('lost')} "
            f"violations={inv} anomalies={r.get('anomaly_types')} {r.get('error') or ''}")


def baseline(a: argparse.Namespace) -> int:
    opts = build_config({}, dict(SIM, name="soak", nemesis=list(BASELINE_NEMESIS), time_limit=a.time_limit,
                                 rate=a.rate, nemesis_interval=a.interval))
    seeds = list(range(a.start, a.start + a.seeds))
    t0 = time.perf_counter()
    lost = acked = viol = 0
    bad: list[dict[str, Any]] = []
    unknown: list[int] = []
    errors = 0
    pool = make_pool(a.jobs)
    for i in range(0, len(seeds), a.chunk):
        for r in run_seeds(opts, seeds[i:i + a.chunk], a.out, a.jobs, pool=pool):
            d = (r.get("durability") or {}).get("acks=all", {})
            acked += d.get("acked") or 0
            lost += d.get("lost") or 0
            viol += sum(((r.get("invariants") or {}).get("counts") or {}).values())
            errors += bool(r.get("error"))
            if r.get("valid") is False or r.get("error"):
                bad.append(r)
                print("INVALID " + _brief(r), flush=True)
            elif r.get("valid") is not True:
                unknown.append(r.get("seed"))
                print("UNKNOWN " + _brief(r), flush=True)
        done = min(len(seeds), i + a.chunk)
        print(f"{done}/{len(seeds)} seeds, {time.perf_counter() - t0:.0f}s wall: acked {acked}, lost {lost}, "
              f"violations {viol}, invalid seeds {len(bad)}, unknown {len(unknown)}, errors {errors}", flush=True)
    pool.shutdown()
    print(f"BASELINE: {len(seeds)} seeds ({a.time_limit:g} simulated s each, nemesis all but power loss, acks=all, "
          f"RF 3, min ISR 2): acks=all acked {acked}, lost {lost}; invariant violations {viol}; "
          f"invalid seeds {[r.get('seed') for r in bad][:50]}; unknown (final read incomplete) {unknown[:50]}; "
          f"harness errors {errors}")
    return 0 if not bad else 1


def _causes(r: dict[str, Any]) -> list[str]:
    """The availability checker's findings of a seed, as ``kind`` words
    (``no-eligible-leader``, ``quorum-leaderless``, ...)."""
    av = (r.get("checkers") or {}).get("availability") or {}
    return [str(d.get("kind")) for d in av.get("unavailable") or () if isinstance(d, dict)]


def _slowest(r: dict[str, Any]) -> tuple[float, int, int] | None:
    """The seed's slowest partition after the final heal as (share of the
    bound, first acks=all write after the heal in ms, the bound in ms): how
    close an available run came to being called unavailable. None when no
    partition took a write after the heal or the run had no bound."""
    av = (r.get("checkers") or {}).get("availability") or {}
    bound = (av.get("bound") or {}).get("total_ms")
    waits = [p.get("write_after_ms") for p in (av.get("partitions") or {}).values() if isinstance(p, dict)]
    waits = [w for w in waits if isinstance(w, (int, float))]
    if not bound or not waits:
        return None
    return max(waits) / bound, int(max(waits)), int(bound)


def faithful(a: argparse.Namespace) -> int:
    opts = build_config({}, {"backend": "sim", "name": "soak-faithful", "nemesis": ["all"], "swarm": a.swarm,
                             "acks": a.acks, "rf": 3, "min_isr": 2, "time_limit": a.time_limit})
    seeds = list(range(a.start, a.start + a.seeds))
    t0 = time.perf_counter()
    acked = {"acks=all": 0, "acks=1": 0}
    lost = {"acks=all": 0, "acks=1": 0}
    invalid: list[int] = []
    by_design: list[int] = []
    unknown: dict[str, list[int]] = {}
    unavailable: dict[str, list[int]] = {}
    closest: tuple[float, int, int, int] = (0.0, 0, 0, 0)  # share of the bound, wait ms, bound ms, seed
    pool = make_pool(a.jobs)
    for i in range(0, len(seeds), a.chunk):
        for r in run_seeds(opts, seeds[i:i + a.chunk], None, a.jobs, pool=pool):
            slow = _slowest(r)
            if slow is not None and slow[0] > closest[0]:
                closest = (*slow, int(r.get("seed") or 0))
            for mode in acked:
                d = (r.get("durability") or {}).get(mode) or {}
                acked[mode] += d.get("acked") or 0
                lost[mode] += d.get("lost") or 0
            for kind in _causes(r):
                unavailable.setdefault(kind, []).append(r.get("seed"))
            if r.get("valid") is False and not r.get("error") and (r.get("loss_by_design") or {}).get("explained"):
                by_design.append(r.get("seed"))
                print("INVALID BY DESIGN " + _brief(r) + f" cause: {r.get('cause')}", flush=True)
            elif r.get("valid") is False or r.get("error"):
                invalid.append(r.get("seed"))
                print("INVALID " + _brief(r) + f" cause: {r.get('cause')}", flush=True)
            elif r.get("valid") is not True:
                unknown.setdefault(str(r.get("cause") or "no cause given")[:120], []).append(r.get("seed"))
                print(f"UNKNOWN seed {r.get('seed')}: {r.get('cause')}", flush=True)
        done = min(len(seeds), i + a.chunk)
        print(f"{done}/{len(seeds)} seeds, {time.perf_counter() - t0:.0f}s wall: acks=all {acked['acks=all']} acked "
              f"{lost['acks=all']} lost; acks=1 {acked['acks=1']} acked {lost['acks=1']} lost; invalid {len(invalid)}, "
              f"lost by design {len(by_design)}; unknown {sum(map(len, unknown.values()))}; unavailable "
              f"{ {k: len(v) for k, v in unavailable.items()} }", flush=True)
    pool.shutdown()
    print(f"FAITHFUL: {len(seeds)} seeds (kraftwerk sim --nemesis all{' --swarm' if a.swarm else ''} --acks {a.acks} "
          f"--rf 3 --min-isr 2 --time-limit {a.time_limit:g}): acks=all {acked['acks=all']} acked, "
          f"{lost['acks=all']} lost; acks=1 {acked['acks=1']} acked, {lost['acks=1']} lost; invalid {invalid[:50]}; "
          f"invalid, lost by design {by_design[:50]}")
    for cause, ss in sorted(unknown.items(), key=lambda kv: -len(kv[1])):
        print(f"  unknown x{len(ss)} (seeds {ss[:10]}): {cause}")
    for kind, ss in sorted(unavailable.items(), key=lambda kv: -len(kv[1])):
        print(f"  unavailable after the heal, {kind}: x{len(ss)} (seeds {ss[:10]})")
    print(f"  closest to the availability bound: seed {closest[3]}, first acks=all write {closest[1] / 1000:.1f} s "
          f"after the heal of a bound of {closest[2] / 1000:.1f} s ({100 * closest[0]:.0f}%)")
    return 0 if not invalid else 1


def variants(a: argparse.Namespace) -> int:
    worst = 0
    names = a.only.split(",") if a.only else list(VARIANT_HUNTS)
    pool = make_pool(a.jobs)
    step = a.jobs * 2
    for name in names:
        vs, nem, extra = VARIANT_HUNTS[name]
        if a.mix:  # the whole mix, without the hunt's story
            nem, extra = tuple(a.mix.split(",")), {k: v for k, v in extra.items() if k != "scenario"}
        opts = build_config({}, dict(SIM, name=f"hunt-{name.replace('=', '-')}", nemesis=list(nem),
                                     time_limit=a.time_limit, rate=a.rate, nemesis_interval=a.interval,
                                     variants=vs, **extra))
        t0 = time.perf_counter()
        found = None
        tried = 0
        for i in range(0, a.max_seeds, step):
            batch = list(range(i, min(a.max_seeds, i + step)))
            rs = run_seeds(opts, batch, a.out, a.jobs, pool=pool)
            tried = batch[-1] + 1
            hits = [r for r in rs if r.get("valid") is False]
            if hits:
                found = hits[0]
                tried = found["seed"] + 1
                break
        wall = time.perf_counter() - t0
        if found is None:
            print(f"{name}: NOT detected in {tried} seeds ({wall:.0f}s wall, {_mix(nem, extra)})", flush=True)
            worst = 1
            continue
        replay = run_seeds(opts, [found["seed"]], a.out, 1, pool=pool)[0]
        same = (replay["stats"]["history_sha256"] == found["stats"]["history_sha256"]
                and replay.get("anomaly_types") == found.get("anomaly_types"))
        print(f"{name}: detected at seed {found['seed']} ({tried} seeds, {wall:.0f}s wall, {_mix(nem, extra)}); "
              f"{_brief(found)}; replay identical: {same}", flush=True)
        if not same:
            worst = 1
    pool.shutdown()
    return worst


def _rate(rs: list[dict[str, Any]]) -> tuple[int | None, int, int]:
    """(seeds to the first invalid one, invalid count, unknown count)."""
    bad = [i for i, r in enumerate(rs) if r.get("valid") is False]
    unknown = sum(1 for r in rs if r.get("valid") not in (True, False))
    return (bad[0] + 1 if bad else None), len(bad), unknown


def detect(a: argparse.Namespace) -> int:
    """Seeds to first detection and detection rate, per variant, for
    ``--nemesis all``, for ``--swarm`` and for ``kraftwerk explore``."""
    from harness.search.explore import Search

    seeds = list(range(1, a.seeds + 1))
    pool = make_pool(a.jobs)
    names = a.only.split(",") if a.only else list(DETECT)
    rows: list[str] = []
    for name in names:
        vs = DETECT.get(name, {})
        for mode in [m for m in ("all", "swarm") if m in a.modes.split(",")]:
            cfg = build_config({}, {"backend": "sim", "name": "detect", "nemesis": ["all"], "variants": vs,
                                    "swarm": mode == "swarm"})
            t0 = time.perf_counter()
            rs = run_seeds(cfg, seeds, None, a.jobs, pool=pool)
            first, bad, unknown = _rate(rs)
            line = (f"{name:22s} {mode:8s} first detection at seed {first if first else '-':>4} of {len(seeds)}; "
                    f"detection rate {bad}/{len(seeds)} ({100 * bad / len(seeds):.0f}%); unknown {unknown}; "
                    f"{time.perf_counter() - t0:.0f}s wall")
            print(line, flush=True)
            rows.append(line)
        if name == "faithful" or a.explore_budget <= 0 or "explore" not in a.modes.split(","):
            continue
        cfg = build_config({}, {"backend": "sim", "name": "detect-explore", "nemesis": ["all"], "variants": vs})
        import tempfile

        with tempfile.TemporaryDirectory() as keep:
            t0 = time.perf_counter()
            search = Search(cfg, a.explore_budget, keep, first_seed=1)
            found = search.run(pool, a.jobs, lambda _line: None)
            wall = time.perf_counter() - t0
        line = (f"{name:22s} explore  " + (f"first detection at seed {found.seed} after {search.tried} runs"
                                           if found else f"NOT detected in {search.tried} runs")
                + f"; states covered {len(search.seen)}; {wall:.0f}s wall (budget {a.explore_budget:g}s)")
        print(line, flush=True)
        rows.append(line)
    pool.shutdown()
    print("\nSUMMARY (kraftwerk sim --seeds 1..%d --nemesis all [--swarm] --variant V, defaults otherwise)" % a.seeds)
    for line in rows:
        print(line)
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("detect")
    d.add_argument("--jobs", type=int, default=2)
    d.add_argument("--seeds", type=int, default=50)
    d.add_argument("--explore-budget", type=float, default=300.0, help="wall seconds of explore per variant (0: none)")
    d.add_argument("--only", default="", help="comma list of variants: " + ",".join(DETECT))
    d.add_argument("--modes", default="all,swarm,explore", help="comma list of: all, swarm, explore")
    f = sub.add_parser("faithful")
    f.add_argument("--jobs", type=int, default=2)
    f.add_argument("--seeds", type=int, default=10000)
    f.add_argument("--start", type=int, default=1)
    f.add_argument("--chunk", type=int, default=50)
    f.add_argument("--swarm", action="store_true")
    f.add_argument("--acks", choices=("all", "mixed"), default="all")
    f.add_argument("--time-limit", type=float, default=30.0, help="simulated seconds of workload per seed")
    for name in ("baseline", "variants"):
        p = sub.add_parser(name)
        p.add_argument("--jobs", type=int, default=2)
        p.add_argument("--time-limit", type=float, default=45.0, help="simulated seconds of workload per seed")
        p.add_argument("--rate", type=float, default=100.0)
        p.add_argument("--interval", type=float, default=10.0, help="nemesis interval, simulated seconds")
        p.add_argument("--out", default=None, help="write run directories here (default: keep nothing)")
        if name == "baseline":
            p.add_argument("--seeds", type=int, default=2000)
            p.add_argument("--start", type=int, default=0)
            p.add_argument("--chunk", type=int, default=20)
        else:
            p.add_argument("--max-seeds", type=int, default=200)
            p.add_argument("--only", default="", help="comma list of variant hunts: " + ",".join(VARIANT_HUNTS))
            p.add_argument("--mix", default="", help="override every hunt's nemesis mix (e.g. all)")
    a = ap.parse_args()
    known = DETECT if a.cmd == "detect" else VARIANT_HUNTS
    unknown = [n for n in (getattr(a, "only", "") or "").split(",") if n and n not in known]
    if unknown:
        what = "variant" if a.cmd == "detect" else "variant hunt"
        ap.error(f"unknown {what} {unknown[0]!r} (known: {', '.join(known)})")
    for name in ("jobs", "seeds", "max_seeds", "chunk"):
        if getattr(a, name, 1) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(a, name)})")
    try:
        sys.exit({"baseline": baseline, "variants": variants, "detect": detect, "faithful": faithful}[a.cmd](a))
    except UsageError as e:  # the options, checked before any seed runs
        ap.error(str(e))


if __name__ == "__main__":
    main()
