"""Same history, same verdict: results.json of this tree against another commit's.

A change to the checkers must not change any result. This checks every
history given, with this tree and with ``--before COMMIT`` (a temporary
``git worktree`` of it), and compares the results with their timings left
out (:data:`TIMINGS`). Each history is checked the two ways a run checks it:

* ``cli``: ``kraftwerk check PATH --json``, in process (a run directory is
  copied first, since the command rewrites its results.json): a run
  directory's ``history.jsonl`` read by the queue checker's line reader,
  its test.json, traces and liveness included; an ``.edn`` or ``.jsonl``
  file with the model its directory is named after (``.../mutex/...``,
  as in the Knossos corpus), else ``queue``;
* ``list`` (queue run directories only): the history read into operations
  and handed to ``checkers.check.check_history`` as a list, with its
  test.json and its traces' invariants, as a simulated seed's checkers do
  (``harness.runtimes.sim.SimRun.results``).

    .venv/bin/python bench/results_diff.py --before main PATH... [--pure] [--show N]

A PATH is a history file or a directory searched for run directories
(those with a ``history.jsonl``) and ``.edn`` files. Prints one line per
history that differs (the first differing fields) and a total; exit status
0 when every result matches, 1 when one differs, 2 on bad arguments.
Each side runs in its own process, compiled when this tree is
(``--pure``: both with ``KRAFTWERK_PURE=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from history_digests import checkout, remove_checkout  # the sibling bench's temporary worktree at a commit

ROOT = Path(__file__).resolve().parents[1]

#: fields that are timings (or a process id), left out of the comparison
TIMINGS = frozenset(("check_seconds", "seconds", "cross_key_seconds", "elapsed_s", "wall_s", "sim_speed", "pid"))

MODELS = ("cas-register", "multi-register", "register", "mutex", "set", "fifo-queue", "kv", "kafka-log")

#: run in each tree's own interpreter: reads the job list on stdin, writes
#: one JSON line per (history, way): {"path", "way", "exit", "result"}
WORKER = r'''
import contextlib, io, json, shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import reference_impl  # noqa: F401  the accelerator's loader first, as kraftwerk does
from harness.cli.check import check_cmd
from checkers.check import check_history, trace_invariants
from checkers.history.jsonl import read_jsonl

def cli(path, model):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = check_cmd.main([str(path), "--model", model, "--json"], standalone_mode=False)
        except Exception as e:  # a usage error: its exit code and line
            return getattr(e, "exit_code", 4), {"error": f"{type(e).__name__}: {e}"}
    text = out.getvalue().strip()
    return code, json.loads(text.splitlines()[-1]) if text else None

def as_list(run):
    test = json.loads((run / "test.json").read_text()) if (run / "test.json").is_file() else None
    ops = read_jsonl(run / "history.jsonl", [])
    res = check_history(ops, model="queue", engine="inline", test=test, invariants=trace_invariants(run, test))
    return 0, json.loads(json.dumps(res, default=str))

for job in json.load(sys.stdin):
    path, model, kind = Path(job["path"]), job["model"], job["kind"]
    if kind == "run":
        with tempfile.TemporaryDirectory(prefix="kraftwerk-diff-") as tmp:
            copy = Path(tmp) / "run"
            shutil.copytree(path, copy, ignore=shutil.ignore_patterns("*.html", "*.png", "site"))
            ways = [("cli", lambda: cli(copy, model))]
            if model == "queue":
                ways.append(("list", lambda: as_list(copy)))
            for way, f in ways:
                code, res = f()
                print(json.dumps({"path": str(path), "way": way, "exit": code, "result": res}), flush=True)
    else:
        code, res = cli(path, model)
        print(json.dumps({"path": str(path), "way": "cli", "exit": code, "result": res}), flush=True)
'''


def jobs_of(paths: list[Path]) -> list[dict[str, str]]:
    """Every history under ``paths``: run directories and .edn files (and
    .jsonl files given by name), each with its model."""
    jobs: list[dict[str, str]] = []
    for p in paths:
        if p.is_file():
            jobs.append({"path": str(p), "model": model_of(p), "kind": "file"})
            continue
        for h in sorted(p.rglob("history.jsonl")):
            jobs.append({"path": str(h.parent), "model": "queue", "kind": "run"})
        for h in sorted(p.rglob("*.edn")):
            if not (h.parent / "history.jsonl").is_file():
                jobs.append({"path": str(h), "model": model_of(h), "kind": "file"})
    return jobs


def model_of(path: Path) -> str:
    """The model a history's directory is named after, else queue."""
    for part in reversed(path.parts[:-1]):
        if part in MODELS:
            return part
    return "queue"


def strip(x: Any) -> Any:
    """``x`` without its timing fields."""
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in TIMINGS}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def first_differences(a: Any, b: Any, at: str = "", limit: int = 3) -> list[str]:
    """Dotted paths where ``a`` and ``b`` differ (at most ``limit``)."""
    if type(a) is not type(b) or not isinstance(a, (dict, list)):
        return [] if a == b else [at or "."]
    out: list[str] = []
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if len(out) >= limit:
                break
            if k not in a or k not in b:
                out.append(f"{at}.{k} (only on one side)")
            else:
                out += first_differences(a[k], b[k], f"{at}.{k}", limit - len(out))
    else:
        if len(a) != len(b):
            return [f"{at} (lengths {len(a)} and {len(b)})"]
        for i, (x, y) in enumerate(zip(a, b)):
            if len(out) >= limit:
                break
            out += first_differences(x, y, f"{at}[{i}]", limit - len(out))
    return out


def run_side(tree: Path, jobs: list[dict[str, str]], pure: bool) -> dict[tuple[str, str], dict[str, Any]]:
    """The worker's answers in ``tree``: (path, way) -> {exit, result}."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("KRAFTWERK_PURE", None)
    if pure:
        env["KRAFTWERK_PURE"] = "1"
    p = subprocess.run([sys.executable, "-c", WORKER, str(tree)], input=json.dumps(jobs), cwd=tree, env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"results_diff: the checker in {tree} failed: {p.stderr.strip().splitlines()[-1:]}")
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[(r["path"], r["way"])] = {"exit": r["exit"], "result": strip(r["result"])}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--before", required=True, metavar="COMMIT")
    ap.add_argument("--pure", action="store_true", help="both sides with KRAFTWERK_PURE=1")
    ap.add_argument("--show", type=int, default=3, help="differing fields shown per history")
    a = ap.parse_args()
    missing = [str(p) for p in a.paths if not p.exists()]
    if missing:
        ap.error(f"no such path: {', '.join(missing)}")
    known = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{a.before}^{{commit}}"],
                           capture_output=True, text=True)
    if known.returncode != 0:
        ap.error(f"--before {a.before}: no such commit")
    jobs = jobs_of([p.resolve() for p in a.paths])
    if not jobs:
        ap.error("no history found under the paths given")
    sys.path.insert(0, str(ROOT))
    from reference_impl import accel  # late: this tree's, after its root is on the path

    build = not a.pure and accel.status().startswith("compiled")
    tree = checkout(a.before, build)
    try:
        theirs = run_side(tree, jobs, a.pure)
    finally:
        remove_checkout(tree)
    ours = run_side(ROOT, jobs, a.pure)
    differ = 0
    for key in sorted(set(ours) | set(theirs)):
        x, y = theirs.get(key), ours.get(key)
        if x == y:
            continue
        differ += 1
        where = "missing on one side" if x is None or y is None else \
            ", ".join(first_differences(x, y, limit=a.show))
        print(f"DIFFERS {key[1]:4} {key[0]}: {where}")
    print(f"{len(ours)} results ({len(jobs)} histories) at this tree against {a.before}: "
          f"{len(ours) - differ} identical apart from timings, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
