"""SIGKILL the harness at random moments of `kraftwerk run` (setup, run, final
reads, check) and report, for each, whether every node, proxy and reaper
process of that run was gone within 20 s without `kraftwerk cleanup`, and
whether the partial history checks (issue: nothing left behind, nothing lost).

    .venv/bin/python bench/kill_harness.py [--moments 20] [--seed 1]

Prints one line per moment and a total; exit 1 if any process outlived the
20 s or a partial history failed to check.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]
PHASES = ("setup", "run", "final-reads", "check")


def _env_pids(key: str, value: str) -> list[int]:
    want = f"{key}={value}".encode()
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                env = (p / "environ").read_bytes()
                state = (p / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue
            if want in env.split(b"\0") and state != "Z":
                out.append(int(p.name))
    return out


def _reached(phase: str, arg: float, out: Path, registry: Path, t0: float, seen: dict) -> bool:
    hist = next(iter(out.glob("*/*/history.jsonl")), None)
    if any(registry.glob("*.json")):
        seen["registered"] = True
    if phase == "setup":
        return time.monotonic() - t0 >= arg
    if hist is None:
        return False
    if phase == "run":
        return hist.stat().st_size >= arg
    if phase == "final-reads":
        return b'"final":true' in hist.read_bytes().replace(b" ", b"")
    return seen.get("registered", False) and not any(registry.glob("*.json"))  # check: the run deregistered


def one(phase: str, arg: float, work: Path, seed: int) -> dict:
    out, registry = work / "results", work / "registry"
    env = {**os.environ, "KRAFTWERK_RUNTIME_DIR": str(registry)}
    h = subprocess.Popen(CLI + ["run", "--out", str(out), "--time-limit", "6", "--nemesis", "pause,kill",
                                "--nemesis-interval", "1", "--seed", str(seed), "--no-progress", "--rate", "30"],
                         cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0, seen = time.monotonic(), {}
    while not _reached(phase, arg, out, registry, t0, seen):
        if h.poll() is not None:
            return {"phase": phase, "skipped": "run ended first"}
        if time.monotonic() - t0 > 180:
            break
        time.sleep(0.02)
    at = time.monotonic() - t0
    children = _env_pids("KRAFTWERK_PARENT_PID", str(h.pid))
    h.send_signal(signal.SIGKILL)
    h.wait()
    killed = time.monotonic()
    left = _env_pids("KRAFTWERK_PARENT_PID", str(h.pid))
    while left and time.monotonic() - killed < 20:
        time.sleep(0.1)
        left = _env_pids("KRAFTWERK_PARENT_PID", str(h.pid))
    gone_after = time.monotonic() - killed
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    row = {"phase": phase, "at_s": round(at, 2), "children": len(children), "left": len(left),
           "gone_after_s": round(gone_after, 2)}
    hist = next(iter(out.glob("*/*/history.jsonl")), None)
    if hist is not None:
        r = subprocess.run(CLI + ["check", str(hist.parent), "--json"], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
        row["check_exit"] = r.returncode
        try:
            res = json.loads(r.stdout)
            row["valid"], row["partial"] = res.get("valid"), res.get("partial", False)
        except ValueError:
            row["valid"] = None
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moments", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.moments < 1:
        print("kill_harness: --moments must be at least 1", file=sys.stderr)
        return 2
    rnd = random.Random(args.seed)
    bad = 0
    rows = []
    for i in range(args.moments):
        phase = PHASES[i % len(PHASES)]
        arg = {"setup": rnd.uniform(0.3, 5.0), "run": rnd.uniform(2_000, 40_000)}.get(phase, 0.0)
        with tempfile.TemporaryDirectory(prefix="kw-kill-") as d:
            row = one(phase, arg, Path(d), args.seed * 100 + i)
        rows.append(row)
        fail = row.get("left", 0) > 0 or row.get("check_exit") not in (None, 0, 1, 3)
        bad += fail
        print(json.dumps(row), flush=True)
    done = [r for r in rows if "skipped" not in r]
    print(f"moments: {len(done)} (skipped {len(rows) - len(done)}), processes left after 20 s: "
          f"{sum(r['left'] for r in done)}, slowest exit: {max((r['gone_after_s'] for r in done), default=0)} s, "
          f"histories checked: {sum('check_exit' in r for r in done)}, failures: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
