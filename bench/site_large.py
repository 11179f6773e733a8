"""How the report and the site hold up at size; prints figures, asserts nothing.

1. A run page for a generated history of ``--ops`` operations (default one
   million; checkers.queue.synth.valid_history) with no node traces:
   checking it, then ``render_report``: wall time, the process's peak RSS,
   and the size of index.html and timeline.html (the timeline is cut to its
   head and the windows around examples; the raw latency plot is sampled).
2. The index over ``--runs`` run directories (default 3000) served by
   ``kraftwerk serve``'s app: the first request (every summary.json built on
   first sight), a second (summaries cached), and one after the cache is
   dropped (summary.json files read back).

    .venv/bin/python bench/site_large.py [--ops 1000000] [--runs 3000]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402

from checkers.check import check_history  # noqa: E402
from checkers.history.jsonl import write_jsonl  # noqa: E402
from checkers.queue.synth import valid_history  # noqa: E402
from harness.report import render_report  # noqa: E402
from harness.site import build_app  # noqa: E402


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def big_run(tmp: Path, n_ops: int) -> None:
    d = tmp / "big" / "20260101T000000-1"
    d.mkdir(parents=True)
    t0 = time.perf_counter()
    ops = valid_history(n_ops=n_ops, partitions=16, processes=16)
    write_jsonl(d / "history.jsonl", ops)
    (d / "test.json").write_text(json.dumps({"name": "big", "seed": 1}))
    t1 = time.perf_counter()
    res = check_history(ops, model="queue", engine="inline")
    (d / "results.json").write_text(json.dumps(res, default=str))
    del ops, res
    t2 = time.perf_counter()
    render_report(d)
    t3 = time.perf_counter()
    size = (d / "history.jsonl").stat().st_size / 2**20
    print(f"history: {n_ops} ops, {size:.0f} MiB; generated+written {t1 - t0:.1f}s, checked {t2 - t1:.1f}s")
    print(f"render_report: {t3 - t2:.1f}s wall, peak RSS of this process so far {peak_mib():.0f} MiB; "
          f"index.html {(d / 'index.html').stat().st_size / 1024:.0f} KiB, "
          f"timeline.html {(d / 'timeline.html').stat().st_size / 1024:.0f} KiB, "
          f"latency-raw.png {(d / 'latency-raw.png').stat().st_size / 1024:.0f} KiB")


def many_runs(tmp: Path, n: int) -> None:
    root = tmp / "many"
    for i in range(n):
        d = root / f"test{i % 20}" / f"20260101T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}-{i}"
        d.mkdir(parents=True)
        (d / "test.json").write_text(json.dumps({"kraftwerk": "sim", "seed": i, "options": {
            "test_name": f"test{i % 20}", "nemesis": ["kill"]}, "started": f"2026-01-01T00:00:{i % 60:02d}Z"}))
        (d / "results.json").write_text(json.dumps({
            "valid": i % 7 != 0, "anomaly_types": [] if i % 7 else ["lost-write"],
            "durability": {"acks=all": {"sent": 1000, "acked": 1000, "lost": 0 if i % 7 else 3}},
            "stats": {"duration_s": 60.0, "ops": 2000}, "checkers": {"queue": {"pad": "x" * 20000}}}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def serve() -> tuple[uvicorn.Server, threading.Thread]:
        server = uvicorn.Server(uvicorn.Config(build_app(root), host="127.0.0.1", port=port, log_level="warning"))
        t = threading.Thread(target=server.run, daemon=True)
        t.start()
        while not server.started:
            time.sleep(0.02)
        return server, t

    def get(path: str) -> tuple[float, int]:
        t0 = time.perf_counter()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=600).read()
        return time.perf_counter() - t0, len(body)

    server, t = serve()
    first, size = get("/")
    second, _ = get("/")
    filtered, _ = get("/?verdict=invalid&sort=lost")
    server.should_exit = True
    t.join()
    server, t = serve()  # a new process: summaries come from summary.json
    restart, _ = get("/")
    server.should_exit = True
    t.join()
    print(f"index of {n} runs: first request {first:.2f}s (summaries built), second {second:.3f}s, "
          f"filtered+sorted {filtered:.3f}s, after a restart {restart:.2f}s; page {size / 1024:.0f} KiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3000)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-site-bench-"))
    try:
        many_runs(tmp, a.runs)
        big_run(tmp, a.ops)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
