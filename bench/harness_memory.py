"""The harness's own memory on a 1M-operation run, and on checking it.

Runs the real interpreter, generator and history recorder (writing
``history.jsonl``) with a client that answers at once, for ``--ops`` client
operations (a Kafka send each, with the queue workload's value shape), and
samples the process's resident set size (VmRSS) as it goes; then runs
``kraftwerk check`` on the history in a child process and reports that
child's peak RSS. Prints RSS at every tenth of the run: a bounded harness
stays flat while the history grows.

    .venv/bin/python bench/harness_memory.py [--ops 1000000] [--no-check]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import generator as g  # noqa: E402
from checkers.history.recorder import Recorder  # noqa: E402
from harness.lifecycle.interpreter import Interpreter  # noqa: E402


def rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class EchoClient:
    """Acknowledges every send at the next offset of its key, as a broker would."""

    offsets: dict[str, int] = {}
    lock = threading.Lock()

    def open(self) -> None: ...
    def close(self) -> None: ...

    def invoke(self, op):
        _, key, v = op["value"][0]
        with self.lock:
            off = self.offsets.get(key, 0)
            self.offsets[key] = off + 1
        return {"type": "ok", "value": [["send", key, [off, v]]]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--no-check", action="store_true", help="skip checking the history")
    a = ap.parse_args()
    if a.ops < 10:
        print("harness_memory: --ops must be at least 10", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-mem-"))
    hist = tmp / "history.jsonl"
    counter = iter(range(1 << 62))

    def op(ctx):
        i = next(counter)
        return {"f": "send", "value": [["send", f"t0-{i % 8}", i]], "acks": "all"}

    rss0 = rss_mib()
    rec = Recorder(hist)
    it = Interpreter(g.clients(g.limit(a.ops, op)), rec, 8, lambda t, p: EchoClient(), None, random.Random(1),
                     op_timeout=5)
    samples: list[tuple[int, float]] = []
    done = threading.Event()

    def sample() -> None:
        step = a.ops // 10
        nxt = step
        while not done.wait(0.05):
            if rec.counts["ok"] >= nxt:
                samples.append((rec.counts["ok"], rss_mib()))
                nxt += step

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.monotonic()
    it.run()
    it.close()
    rec.close()
    done.set()
    th.join()
    dt = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"run: {rec.counts['ok']} ops in {dt:.1f}s ({rec.counts['ok'] / dt:.0f} ops/s), history "
          f"{hist.stat().st_size / 2**20:.0f} MiB")
    print("RSS while recording (ops done: MiB): " + ", ".join(f"{n}: {m:.0f}" for n, m in samples))
    print(f"harness RSS: start {rss0:.0f} MiB, end {rss_mib():.0f} MiB, peak {peak:.0f} MiB")
    if not a.no_check:
        t1 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "check", str(hist), "--json"],
                           cwd=ROOT, capture_output=True, text=True)
        child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"kraftwerk check: exit {r.returncode} in {time.monotonic() - t1:.0f}s, peak RSS {child_peak:.0f} MiB")
    os.unlink(hist)
    return 0


if __name__ == "__main__":
    sys.exit(main())
