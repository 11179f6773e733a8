"""What recording the history costs: throughput with history recording on and
off (target: at most 5% fewer ops/s with it on).

Two measurements, alternated on/off to spread machine noise over both:

1. interpreter only — the generator, worker threads and recorder with a
   trivial in-memory client: the harness's own ceiling;
2. ``--db external`` against librdkafka's mock cluster (hosted in a child
   process) with confluent-kafka clients, saturating (rate far above what the
   clients sustain): the overhead a real campaign sees.

    .venv/bin/python bench/harness_overhead.py [--seconds 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import generator as g  # noqa: E402
from checkers.history.recorder import Recorder  # noqa: E402
from harness.lifecycle.interpreter import Interpreter  # noqa: E402


class NullClient:
    def open(self) -> None: ...
    def close(self) -> None: ...

    def invoke(self, op):
        return {"type": "ok", "value": op["value"]}


def interpreter_rate(seconds: float, record: bool, tmp: Path) -> float:
    rec = Recorder(tmp / f"h-{time.monotonic_ns()}.jsonl" if record else None)
    gen = g.clients(g.time_limit(seconds, lambda c: {"f": "send", "value": [["send", "t0-0", 1]]}))
    it = Interpreter(gen, rec, 4, lambda t, p: NullClient(), None, random.Random(1), op_timeout=5)
    t0 = time.monotonic()
    it.run()
    dt = time.monotonic() - t0
    it.close()
    rec.close()
    return (rec.counts["ok"]) / dt


def mock_rate(seconds: float, record: bool, tmp: Path, bootstrap: str) -> float:
    from harness.config import TestConfig
    from harness.lifecycle.runner import run_test

    cfg = TestConfig(db="external", bootstrap=bootstrap, time_limit=seconds, rate=100000, concurrency=8,
                     partitions=4, seed=7, out=str(tmp / "results"), record_history=record, name="bench")
    o = run_test(cfg, progress=False)
    if record:
        from checkers.history.jsonl import read_jsonl

        ops = read_jsonl(o.run_dir / "history.jsonl")
        n = sum(1 for x in ops if x.type == "ok" and not x.extra.get("final") and x.f in ("send", "poll"))
    else:
        n = o.result["stats"].get("main-ok", 0)
    return n / seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-bench-"))

    res: dict[tuple[str, bool], list[float]] = {}
    for r in range(args.rounds):
        for record in ((True, False) if r % 2 == 0 else (False, True)):
            res.setdefault(("interpreter", record), []).append(interpreter_rate(args.seconds / 2, record, tmp))

    for r in range(args.rounds):
        for record in ((True, False) if r % 2 == 0 else (False, True)):
            # a fresh mock cluster per run: consumers read from offset 0, so data
            # left by earlier runs would make later runs slower
            mock = subprocess.Popen([sys.executable, "-m", "harness.dbs.mock_cluster", "--brokers", "3"],
                                    stdout=subprocess.PIPE, text=True, cwd=ROOT)
            try:
                bootstrap = mock.stdout.readline().strip()  # type: ignore[union-attr]
                res.setdefault(("mock-cluster", record), []).append(mock_rate(args.seconds, record, tmp, bootstrap))
            finally:
                mock.terminate()
                mock.wait()
                mock.stdout.close()  # type: ignore[union-attr]

    for (name, record), vals in sorted(res.items()):
        print(f"# {name:<13} history {'on ' if record else 'off'}: " + " ".join(f"{v:.0f}" for v in vals))
    print(f"{'setup':<14}{'history on ops/s':>18}{'history off ops/s':>19}{'overhead':>10}   (median of {args.rounds})")
    for name in ("interpreter", "mock-cluster"):
        on = statistics.median(res[(name, True)])
        off = statistics.median(res[(name, False)])
        print(f"{name:<14}{on:>18.0f}{off:>19.0f}{(off - on) / off:>9.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
