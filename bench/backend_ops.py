"""What each nemesis operation costs on each backend, so users can choose
nemesis intervals: run a command on a node (exec), apply a partition
(halves, node and client links), heal it, and kill a node then restart it
until its control endpoint answers again.

A three-node combined cluster of the reference broker per backend, made the
way ``kraftwerk run`` makes it; ``ssh`` runs on throwaway hosts from
``kraftwerk hosts up`` (made and removed here). Prints the median and the
slowest of ``--rounds`` rounds, in milliseconds.

    .venv/bin/python bench/backend_ops.py [--backends local,netns,docker,ssh] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.config import build_config  # noqa: E402
from harness.dbs import open_db
from harness.lifecycle.runner import preflight  # noqa: E402
from nemesis.partition import shaped  # noqa: E402


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def exec_once(db: Any, node: str) -> None:
    hosts = getattr(db, "hosts", None)
    if hosts is not None:
        rc, _, err = hosts.exec(node, ["true"], 10)
        assert rc == 0, err
    else:  # local: a process on this machine
        subprocess.run(["true"], check=True)


def kill_restart(db: Any, node: str) -> None:
    db.cluster.nodes.kill(node)
    db.cluster.nodes.start(node)
    deadline = time.monotonic() + 30
    while db.endpoints.status(node, timeout=0.5) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{node} did not come back in 30 s")
        time.sleep(0.02)


def measure(backend: str, rounds: int, hosts_file: str | None, out: Path) -> dict[str, list[float]]:
    flags: dict[str, Any] = {"backend": backend, "combined": True, "brokers": 3, "controllers": 3,
                             "out": str(out), "seed": 1}
    if backend == "ssh":
        flags["hosts"] = hosts_file
    cfg = build_config(None, flags)
    checked = preflight(cfg)
    run_dir = out / backend
    run_dir.mkdir(parents=True, exist_ok=True)
    db = open_db(cfg, run_dir, None, checked) if backend != "local" else open_db(cfg, run_dir, _state(out, backend))
    figures: dict[str, list[float]] = {"exec": [], "partition": [], "heal": [], "kill+restart": []}
    try:
        db.setup()
        names = db.cluster.nodes.node_names()
        rng = random.Random(1)
        for _ in range(rounds):
            node = rng.choice(names)
            figures["exec"].append(timed(lambda: exec_once(db, node)))
            cut, _ = shaped("halves", names, rng)
            cut = set(cut) | {("client", node)}
            figures["partition"].append(timed(lambda: db.cluster.net.cut(sorted(cut))))
            figures["heal"].append(timed(lambda: db.cluster.net.cut([])))
            figures["kill+restart"].append(timed(lambda: kill_restart(db, node)))
    finally:
        db.teardown()
    return figures


def _state(out: Path, backend: str) -> Any:
    from harness.rundir.state import RunState

    return RunState.create(out, f"bench-{backend}-{int(time.time())}", out / backend)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="local,netns,docker,ssh")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the figures scale with it)")
    print(f"{'backend':8} {'operation':14} {'median ms':>10} {'max ms':>10}")
    with tempfile.TemporaryDirectory(prefix="kw-bench-") as tmp:
        out = Path(tmp)
        hosts_file = None
        try:
            for backend in args.backends.split(","):
                if backend == "ssh" and hosts_file is None:
                    from harness.runtimes.throwaway import up

                    hosts_file = str(up(3, out / "hosts"))
                figs = measure(backend, args.rounds, hosts_file, out)
                for op, xs in figs.items():
                    print(f"{backend:8} {op:14} {statistics.median(xs):10.1f} {max(xs):10.1f}", flush=True)
        finally:
            if hosts_file is not None:
                from harness.runtimes.throwaway import down

                down(out / "hosts")


if __name__ == "__main__":
    main()
