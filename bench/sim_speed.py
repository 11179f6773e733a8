"""Simulator speed: simulated seconds per wall-clock second.

3 brokers + 3 controllers, one topic of 3 partitions (RF 3, min ISR 2),
acks=all producers at 500 simulated ops/s, no faults (and, with --nemesis,
the given faults). Target: >= 100x real time.

    .venv/bin/python bench/sim_speed.py [--time-limit 60] [--seeds 3] [--nemesis none]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference_impl.sim.options import SimOptions  # noqa: E402
from reference_impl.sim.runner import SimRun  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="simulated seconds of workload per seed")
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--nemesis", default="none")
    ap.add_argument("--producers", type=int, default=32)
    a = ap.parse_args()
    opts = SimOptions(brokers=3, controllers=3, partitions=3, rf=3, min_isr=2, acks="all", rate=a.rate,
                      time_limit_s=a.time_limit, nemesis=tuple(a.nemesis.split(",")), producers=a.producers).validate()
    tot_sim = tot_wall = 0.0
    for seed in range(a.seeds):
        t0 = time.perf_counter()
        run = SimRun(opts, seed)
        res = run.run()
        wall = time.perf_counter() - t0
        sim_s = run.sim.now / 1000.0
        tot_sim += sim_s
        tot_wall += wall
        st = res["stats"]
        oks = st["completions"].get("send:ok", 0)
        print(f"seed {seed}: {sim_s:7.1f} simulated s in {wall:6.2f} wall s = {sim_s / wall:7.1f}x  "
              f"(send ok {oks}, {oks / max(1e-9, st['workload_ms'] / 1000):.0f}/s achieved, steps {st['steps']}, "
              f"messages {st['messages']['sent']}, valid {res['valid']})")
    print(f"TOTAL: {tot_sim:.1f} simulated s in {tot_wall:.2f} wall s = {tot_sim / tot_wall:.1f}x real time "
          f"(target >= 100x)")


if __name__ == "__main__":
    main()
