"""Same seed, same run: a digest per (options, seed) of what a simulated run did.

A refactoring of the reference implementation must not change what any seed
does. This prints, for a spread of option sets that reach every part of the
core (all faults, swarm draws, consumer groups with static members and
crashed clients, reassignment and decommissioning on five brokers, the
scripted scenarios and stories, and each protocol variant), two digests per
seed:

* ``history``: ``stats.history_sha256``, the SHA-256 of the run's history,
  what ``kraftwerk sim`` reports and replay checks compare;
* ``trace``: the SHA-256 of every node trace event the simulation emitted, in
  order (encoded as the trace files encode them), a finer net: a change
  inside the nodes that the clients never see still shows here.

Each is printed compiled and pure (``KRAFTWERK_PURE=1``) unless ``--modes``
says otherwise, each mode in its own process started with
``PYTHONHASHSEED=0`` (as ``kraftwerk sim``'s workers are).

    .venv/bin/python bench/history_digests.py [--seeds 3] [--modes compiled,pure] [--cases all]
        [--before COMMIT] [--save FILE] [--against FILE] [--jobs 2]

``--before COMMIT`` first runs the same cases at COMMIT, in a temporary
``git worktree`` of it (its accelerator built there for the compiled mode),
and prints both side by side; ``--save`` keeps the digests as JSON and
``--against`` compares with a saved file instead of running COMMIT again.
Exit status 0 when every digest matches its counterpart (compiled against
pure, and against COMMIT or the saved file), 1 when one differs, 2 on bad
arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: name -> the ``kraftwerk sim`` flags of the case
CASES: dict[str, list[str]] = {
    "none": [],
    "nemesis-all": ["--nemesis", "all"],
    "swarm": ["--swarm"],
    "groups": ["--sub-via", "subscribe", "--static-members", "--crash-clients"],
    "groups-faults": ["--sub-via", "subscribe", "--static-members", "--crash-clients", "--nemesis", "kill,partition,clock"],
    "busy": ["--nemesis", "all", "--rate", "300", "--concurrency", "16", "--time-limit", "60", "--partitions", "4"],
    "membership": ["--nemesis", "reassign,decommission,partition,kill", "--brokers", "5"],
    "unclean-loss": ["--scenario", "unclean-loss"],
    "last-replica-standing": ["--scenario", "last-replica-standing"],
    "acks1-leader-kill": ["--scenario", "acks1-leader-kill", "--acks", "1"],
    "stories": ["--scenario", "leader-churn,isr-crash,expand-race", "--nemesis", "partition,kill"],
    "kip101=off": ["--variant", "kip101=off", "--nemesis", "kill,partition,lose-unfsynced"],
    "kip966=off": ["--variant", "kip966=off", "--nemesis", "kill,partition,lose-unfsynced"],
    "unclean_election=on": ["--variant", "unclean_election=on", "--nemesis", "kill,partition,lose-unfsynced"],
    "strict_isr_expand=off": ["--variant", "strict_isr_expand=off", "--nemesis", "kill,partition,pause"],
    "maximal_isr=off": ["--variant", "maximal_isr=off", "--nemesis", "kill,partition,pause"],
}


# ----------------------------------------------------------------------
# the worker: one tree, one mode, every case and seed
# ----------------------------------------------------------------------

def worker(cases: list[str], seeds: list[int], extra: list[str]) -> None:
    """Run the cases in this process (the tree on sys.path decides which
    code) and print one JSON line per (case, seed)."""
    sys.path.insert(0, os.getcwd())
    from harness.lifecycle.runner import sim_run  # noqa: E402 - the tree to test is chosen at run time
    from harness.cli.options import config_from_flags  # noqa: E402
    from harness.cli.sim import sim_cmd  # noqa: E402
    from reference_impl import accel  # noqa: E402
    from reference_impl.trace_format import encode_trace_line  # noqa: E402

    print(json.dumps({"status": accel.status(), "tree": os.getcwd()}), flush=True)
    for name in cases:
        ctx = sim_cmd.make_context("sim", [*CASES[name], *extra])
        flags = dict(ctx.params)
        for k in ("seeds", "jobs", "as_json", "report"):
            flags.pop(k, None)
        for seed in seeds:
            cfg = config_from_flags("sim", {**flags, "seed": seed}).for_seed(seed)
            run = sim_run(cfg, seed, None)
            h = hashlib.sha256()
            run.sim.add_trace_listener(lambda ev, h=h: h.update(encode_trace_line(ev)))
            res = run.run(release=True)
            st = res.get("stats", {})
            print(json.dumps({"case": name, "seed": seed, "history": st.get("history_sha256"),
                              "trace": h.hexdigest(), "valid": res.get("valid"),
                              "crashes": len(st.get("node_crashes", [])),
                              "ops": sum(st.get("completions", {}).values())}), flush=True)


# ----------------------------------------------------------------------
# the driver
# ----------------------------------------------------------------------

def run_tree(tree: Path, mode: str, cases: list[str], seeds: list[int], extra: list[str]) -> dict[str, Any]:
    """Every (case, seed) of one tree in one mode, in a child process."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("KRAFTWERK_PURE", None)
    if mode == "pure":
        env["KRAFTWERK_PURE"] = "1"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--cases", ",".join(cases),
           "--seed-list", ",".join(map(str, seeds)), *[f"--extra={x}" for x in extra]]
    p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        tail = p.stderr.strip().splitlines()[-3:]
        raise SystemExit(f"history_digests: {tree} ({mode}) failed: {' | '.join(tail)}")
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    status = lines[0]["status"]
    if (mode == "compiled") != (status == "compiled"):
        raise SystemExit(f"history_digests: {tree} was asked to run {mode} but runs {status!r}")
    return {"status": status, "runs": {f"{r['case']}/{r['seed']}": r for r in lines[1:]}}


def checkout(commit: str, compiled: bool) -> Path:
    """A temporary worktree at ``commit`` (its accelerator built if asked)."""
    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-digests-"))
    tree = tmp / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
                   check=True, capture_output=True, text=True)
    if compiled:
        subprocess.run([sys.executable, "-m", "reference_impl.accel", "build"], cwd=tree, check=True,
                       capture_output=True, text=True)
    return tree


def remove_checkout(tree: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    shutil.rmtree(tree.parent, ignore_errors=True)


def collect(tree: Path, modes: list[str], cases: list[str], seeds: list[int], extra: list[str],
            jobs: int) -> dict[str, Any]:
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        futs = {m: ex.submit(run_tree, tree, m, cases, seeds, extra) for m in modes}
        return {m: f.result() for m, f in futs.items()}


def table(columns: dict[str, dict[str, Any]], keys: list[str]) -> bool:
    """Print one row per (case, seed) and say whether every column agrees."""
    names = list(columns)
    print(f"{'case/seed':34} {'valid':7} " + " ".join(f"{n:>22}" for n in names) + "  same")
    all_same = True
    for k in keys:
        rows = [columns[n]["runs"].get(k) for n in names]
        digests = {(r["history"], r["trace"]) if r else None for r in rows}
        same = len(digests) == 1 and None not in digests
        all_same = all_same and same
        first = next((r for r in rows if r), {})
        cells = " ".join(f"{(r['history'][:8] + '/' + r['trace'][:8]) if r else '-':>22}" for r in rows)
        print(f"{k:34} {str(first.get('valid')):7} {cells}  {'yes' if same else 'NO'}")
    return all_same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 of every case")
    ap.add_argument("--cases", default="all", help=f"comma list of {', '.join(CASES)} (default all)")
    ap.add_argument("--modes", default="compiled,pure")
    ap.add_argument("--before", metavar="COMMIT")
    ap.add_argument("--save", metavar="FILE", help="write this tree's digests as JSON")
    ap.add_argument("--against", metavar="FILE", help="compare with digests saved by --save")
    ap.add_argument("--jobs", type=int, default=2, help="child processes at a time (one per tree and mode)")
    ap.add_argument("--extra", action="append", default=[], help="one more kraftwerk sim flag for every case")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed-list", help=argparse.SUPPRESS)
    a = ap.parse_args()
    cases = list(CASES) if a.cases == "all" else [c for c in a.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case {unknown[0]!r} (known: {', '.join(CASES)})")
    if a.worker:
        worker(cases, [int(s) for s in a.seed_list.split(",")], a.extra)
        return 0
    modes = [m for m in a.modes.split(",") if m]
    if not modes or any(m not in ("compiled", "pure") for m in modes):
        ap.error("--modes is a comma list of compiled and pure")
    if a.seeds < 1:
        ap.error("--seeds must be at least 1")
    seeds = list(range(a.seeds))
    columns: dict[str, dict[str, Any]] = {}
    if a.against:
        saved = json.loads(Path(a.against).read_text())
        columns.update({f"saved {k}": v for k, v in saved["columns"].items()})
    if a.before:
        tree = checkout(a.before, "compiled" in modes)
        try:
            columns.update({f"{a.before[:10]} {m}": v
                            for m, v in collect(tree, modes, cases, seeds, a.extra, a.jobs).items()})
        finally:
            remove_checkout(tree)
    here = collect(ROOT, modes, cases, seeds, a.extra, a.jobs)
    columns.update({f"this {m}": v for m, v in here.items()})
    if a.save:
        Path(a.save).write_text(json.dumps({"cases": cases, "seeds": seeds, "extra": a.extra,
                                            "columns": here}, indent=1))
    for n, c in columns.items():
        print(f"{n}: {c['status']}")
    keys = [f"{c}/{s}" for c in cases for s in seeds]
    same = table(columns, keys)
    print(f"{'every digest matches' if same else 'DIGESTS DIFFER'}: {len(keys)} (case, seed) pairs, "
          f"{len(columns)} columns (history/trace, first 8 hex digits of each)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
