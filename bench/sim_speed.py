"""Simulator speed: simulated seconds per wall-clock second.

3 brokers + 3 controllers, one topic of 3 partitions (RF 3, min ISR 2),
the queue workload at 500 simulated ops/s over ``--producers`` worker
threads (each sends with acks=all and polls, 3:1, as on real processes:
the test's generator played by the virtual-time interpreter), no faults
(and, with --nemesis, the given faults). Targets (issue 35): the whole
simulation >= 250x real time at that rate, with its checkers >= 150x.
Prints, per seed and in total, wall-clock and CPU figures for three spans,
since a seed is more than its busy part and the machine is shared:

* the workload phase: ``--time-limit`` simulated seconds at ``--rate``, from
  the operations' start to the time limit: the busy part alone.
* the whole simulation, issue 35's figure: also the cluster's start, the
  heal and the final reads (~2 simulated s more per seed; the final reads
  read every record once more, so this figure is lower than the workload
  phase's).
* each seed with its checkers (``SimRun.results``, partly compiled), as
  ``kraftwerk sim`` runs a seed; and, with ``--jobs N``, ``kraftwerk sim``'s
  worker pool running the seeds N at a time.

    .venv/bin/python bench/sim_speed.py [--time-limit 60] [--seeds 3] [--nemesis none] [--jobs 2] [--before COMMIT]

``--before COMMIT`` first runs this bench as it was at COMMIT in a temporary
``git worktree`` of it (its own accelerator built there when this tree runs
compiled), then this tree's, and prints both TOTAL lines together: a
refactoring is measured against the code it replaced in one run, under the
same load.

Since one driver plays the test's generator on both runtimes, a seed's load
is the queue workload's, not open-loop sends with one poller: each of the
32 threads polls every key from its own positions, so a 60 s seed completes
~22k sends and ~7.4k polls reading over 20 times the records one poller
read, and the generator is asked and the interpreter records on every op.

Where it stands, after the eighth cut (two runs, ``--before 0001b9d``,
the code before it; CPU equal to wall): whole simulation 0.95x and 0.98x
the CPU (1.43 s -> 1.36 s, 1.33 s -> 1.31 s: 129.9x -> 136.7x and 139.4x
-> 141.7x real time), each seed with its checkers 106.2x -> 110.7x and
112.3x -> 113.8x (checkers 0.32 CPU s); with the pasted pairs' check
below, 133.1x -> 139.4x and 108.1x -> 112.7x. Under callgrind the event loop of
a 10 s seed went from 851 M (52a3d67) through 634.8 M (a5d6f84), 602.5 M
(25565f4) and 565.0 M (cf48c40) to 538.4 M, 547.9 M with the check
that a poll's pasted pairs are the ones at their offsets. Issue 35's targets (250x,
150x with checkers) stay ~1.8x and ~1.3x away by these runs' figures: the
cost is per operation and per record read, spread thin over the cluster's
messages, the clients, the recorder and the checkers, and mostly
CPython's own object churn under the compiled code (a profile-guided build
of that code, and other allocators, gained nothing worth keeping).
docs/architecture.md, "Simulator speed, measured", keeps the
record of every change with its command and figures.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.lifecycle.runner import sim_run  # noqa: E402
from harness.config import TestConfig, build_config  # noqa: E402
from harness.errors import UsageError  # noqa: E402
from reference_impl import accel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="simulated seconds of workload per seed")
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--nemesis", default="none")
    ap.add_argument("--producers", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=1,
                    help="also run the seeds N at a time in worker processes (kraftwerk sim --jobs) "
                         "and print the aggregate simulated seconds per wall second")
    ap.add_argument("--before", metavar="COMMIT",
                    help="first run this bench as it was at COMMIT, in a temporary checkout of it (compiled too if "
                         "this tree is), and print its figures beside these")
    a = ap.parse_args()
    for name in ("seeds", "jobs", "producers"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1 (got {getattr(a, name)})")
    if not a.rate > 0:
        ap.error(f"--rate must be positive (got {a.rate:g})")
    try:
        opts = build_config({}, {"backend": "sim", "brokers": 3, "controllers": 3, "partitions": 3, "rf": 3,
                                 "min_isr": 2, "acks": "all", "rate": a.rate, "time_limit": a.time_limit,
                                 "nemesis": a.nemesis, "concurrency": a.producers, "seed": 0})
    except UsageError as e:
        ap.error(str(e))
    before = run_before(a.before, sys.argv[1:]) if a.before else None
    print(f"core and simulator: {accel.status()}; interpreter {sys.executable} "
          f"(Python {platform.python_version()}, {platform.python_compiler()})")
    # one short untimed seed first: the imports (the checkers bring networkx)
    # are paid once per process, not per seed, as kraftwerk sim's workers do
    sim_run(opts.model_copy(update={"time_limit": 1.0}), a.seeds).run(release=True)
    tot_sim = tot_wall = tot_cpu = tot_check = tot_check_wall = 0.0
    tot_w_sim = tot_w_wall = tot_w_cpu = 0.0
    early: list[int] = []  # seeds whose workload ended before the time limit
    for seed in range(a.seeds):
        t0 = time.perf_counter()
        c0 = time.process_time()
        run = sim_run(opts, seed)
        check = [0.0, 0.0]  # the per-seed checkers' CPU and wall time
        results = run.results
        # the workload phase alone (--rate ops/s for --time-limit from the
        # operations' start), apart from the cluster's start and the final
        # heal and reads, whose simulated seconds are mostly idle and cheap:
        # marked as the loop starts the operations and as it reaches the
        # time limit (an event of its own, which does nothing else)
        marks: dict[str, tuple[float, float, int]] = {}
        play = run.play

        def mark(name: str) -> None:
            marks[name] = (time.perf_counter(), time.process_time(), run.sim.now)

        def marked_play(*args, **kw):
            mark("w0")
            run.sim.at(run.sim.now + int(opts.time_limit * 1000), mark, "w1")
            try:
                return play(*args, **kw)
            finally:
                if "w1" not in marks:
                    # at a low rate the generator knows no operation fits
                    # before the time limit and ends early: the loop stopped
                    # (final reads done) before the mark, so the phase ends here
                    mark("w1")
                    early.append(seed)

        run.play = marked_play

        def timed_results(*args, **kw):  # the per-seed checkers' share, measured apart
            c, w = time.process_time(), time.perf_counter()
            try:
                return results(*args, **kw)
            finally:
                check[0] += time.process_time() - c
                check[1] += time.perf_counter() - w

        run.results = timed_results
        res = run.run(release=True)  # as kraftwerk sim's run_seed does
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        sim_s = run.sim.now / 1000.0
        tot_sim += sim_s
        tot_wall += wall
        tot_cpu += cpu
        tot_check += check[0]
        tot_check_wall += check[1]
        (w0, c0w, v0), (w1, c1w, v1) = marks["w0"], marks["w1"]
        w_sim, w_wall, w_cpu = (v1 - v0) / 1000.0, w1 - w0, c1w - c0w
        tot_w_sim += w_sim
        tot_w_wall += w_wall
        tot_w_cpu += w_cpu
        st = res["stats"]
        oks = st["completions"].get("send:ok", 0)
        print(f"seed {seed}: workload {w_sim:5.1f} simulated s in {w_wall:5.2f} wall s = {w_sim / w_wall:6.1f}x; "
              f"whole simulation {sim_s:5.1f} s in {wall - check[1]:5.2f} wall s = {sim_s / (wall - check[1]):6.1f}x; "
              f"with its checkers {wall:5.2f} wall s = {sim_s / wall:6.1f}x  (send ok {oks}, "
              f"poll ok {st['completions'].get('poll:ok', 0)}, "
              f"{oks / max(1e-9, st['workload_ms'] / 1000):.0f}/s achieved, steps {st['steps']}, "
              f"messages {st['messages']['sent']}, valid {res['valid']})")
    sim_wall, sim_cpu = tot_wall - tot_check_wall, tot_cpu - tot_check
    if early:
        print(f"note: seeds {early} ended their workload and final reads before the {a.time_limit:g} s time limit "
              f"(no operation fitted in what was left of it at {a.rate:g} ops/s): their workload phase runs to the end")
    totals = [
        f"TOTAL, workload phase at {a.rate:g} ops/s, one process: {tot_w_sim:.1f} simulated s in {tot_w_wall:.2f} "
        f"wall s = {tot_w_sim / tot_w_wall:.1f}x real time; CPU {tot_w_cpu:.2f} s = {tot_w_sim / tot_w_cpu:.1f}x",
        f"TOTAL, whole simulation (cluster start and final reads included), one process: {tot_sim:.1f} simulated s "
        f"in {sim_wall:.2f} wall s = {tot_sim / sim_wall:.1f}x; CPU {sim_cpu:.2f} s = {tot_sim / sim_cpu:.1f}x",
        f"TOTAL, each seed with its checkers, one process: {tot_wall:.2f} wall s = {tot_sim / tot_wall:.1f}x "
        f"(checkers {tot_check_wall:.2f} wall s, {tot_check:.2f} CPU s)",
    ]
    for line in totals:
        print(line)
    if a.jobs > 1:
        parallel(opts, a.seeds, a.jobs)
    if before is not None:
        # the same lines, side by side: every TOTAL of both trees
        print(f"BEFORE ({a.before}) and AFTER (this tree), same arguments, one after the other:")
        for line in before:
            print(f"  before: {line}")
        for line in totals:
            print(f"  after:  {line}")


def run_before(commit: str, argv: list[str]) -> list[str]:
    """This bench at ``commit``, run in a temporary ``git worktree`` of it
    (built with the accelerator when this tree runs compiled, since the
    comparison is of like with like); its TOTAL lines. The checkout is
    removed afterwards, whatever happens."""
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-before-"))
    args = [x for i, x in enumerate(argv) if x != "--before" and (i == 0 or argv[i - 1] != "--before")]
    try:
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(tmp / "tree"), commit],
                       check=True, capture_output=True, text=True)
        tree = tmp / "tree"
        if accel.status().startswith("compiled"):
            subprocess.run([sys.executable, "-m", "reference_impl.accel", "build"], cwd=tree, check=True,
                           capture_output=True, text=True)
        p = subprocess.run([sys.executable, "bench/sim_speed.py", *args], cwd=tree, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"sim_speed: the bench at {commit} failed: {p.stderr.strip().splitlines()[-1:]}")
        print(p.stdout, end="")
        return [line for line in p.stdout.splitlines() if line.startswith(("TOTAL", "core and simulator"))]
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tmp / "tree")],
                       capture_output=True)
        subprocess.run(["rm", "-rf", str(tmp)], capture_output=True)


def parallel(opts: TestConfig, seeds: int, jobs: int) -> None:
    """The same seeds through ``kraftwerk sim``'s worker pool, ``jobs`` at a
    time: the throughput a campaign of many seeds gets from the machine."""
    from harness.cli.sim import make_pool, run_seeds

    pool = make_pool(jobs)
    try:
        run_seeds(opts, list(range(min(seeds, jobs))), None, jobs, pool=pool)  # start the workers, import everything
        t0 = time.perf_counter()
        results = run_seeds(opts, list(range(seeds)), None, jobs, pool=pool)
        wall = time.perf_counter() - t0
    finally:
        pool.shutdown()
    sim_s = sum(r["stats"]["virtual_ms"] for r in results) / 1000.0
    modes = sorted({r["stats"]["accelerator"] for r in results})
    print(f"TOTAL, kraftwerk sim with {jobs} worker processes ({', '.join(modes)}), seeds with their checkers: "
          f"{sim_s:.1f} simulated s in {wall:.2f} wall s = {sim_s / wall:.1f}x")


if __name__ == "__main__":
    main()
