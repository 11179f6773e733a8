"""Appends + fsync per second through ``kraftwerk fs`` against the plain disk.

One run measures both, side by side, on the same disk: N appends of S bytes
to one file, each followed by fsync (the pattern of a log flushed on every
message), first in a plain directory, then through a fresh mount whose
backing directory is on that disk. The filesystem passes each fsync through
to its backing file, so the difference is the FUSE round trips and the
cache's bookkeeping. Also the same without fsync (writes only) and the
crash itself. Needs root and /dev/fuse. Never asserted in tests.

    .venv/bin/python bench/lazyfs_fsync.py [--appends 10000] [--size 100] [--dir /var/tmp]

``--pytest`` instead runs the slow power-loss campaigns of tests/lazyfs
(fsync per message keeps every acknowledged write through a majority's
power loss; the default flush loses them when every replica loses power;
the last-replica-standing story with and without KIP-966).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.errors import KraftwerkError  # noqa: E402
from harness.lazyfs import mounts  # noqa: E402


def appends(path: str, n: int, size: int, fsync: bool) -> float:
    rec = b"r" * (size - 1) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, rec)
            if fsync:
                os.fsync(fd)
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
    return n / dt


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--dir", default="/var/tmp", help="where both the plain and the backing directory go")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pytest", action="store_true", help="run the slow power-loss tests instead")
    a = ap.parse_args(argv)
    if a.appends < 1 or a.size < 1:
        ap.exit(2, "lazyfs_fsync: --appends and --size must be positive\n")
    if not os.path.isdir(a.dir):
        ap.exit(2, f"lazyfs_fsync: --dir {a.dir} is not a directory\n")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.pytest:
        import subprocess
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return subprocess.call([sys.executable, "-m", "pytest", "-m", "slow", "-q", "tests/lazyfs"], cwd=root)
    work = tempfile.mkdtemp(prefix="kraftwerk-fs-bench-", dir=a.dir)
    plain, backing, point = (os.path.join(work, n) for n in ("plain", "backing", "mnt"))
    for d in (plain, backing, point):
        os.makedirs(d)
    out: dict[str, float] = {}
    try:
        out["plain_fsync"] = appends(os.path.join(plain, "log"), a.appends, a.size, True)
        out["plain_write"] = appends(os.path.join(plain, "log2"), a.appends, a.size, False)
        try:
            mounts.mount(point, backing)
        except KraftwerkError as e:
            print(f"lazyfs_fsync: {e}", file=sys.stderr)
            return 2
        try:
            out["fs_fsync"] = appends(os.path.join(point, "log"), a.appends, a.size, True)
            out["fs_write"] = appends(os.path.join(point, "log2"), a.appends, a.size, False)
            t0 = time.perf_counter()
            mounts.crash(point)
            out["crash_ms"] = (time.perf_counter() - t0) * 1000
        finally:
            mounts.umount(point)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(out))
        return 0
    print(f"{a.appends} appends of {a.size} B, one file, disk under {a.dir}")
    print(f"{'':24}{'plain disk':>14}{'kraftwerk fs':>14}{'ratio':>8}")
    for label, k in (("appends+fsync /s", "fsync"), ("appends (no fsync) /s", "write")):
        p, f = out[f"plain_{k}"], out[f"fs_{k}"]
        print(f"{label:24}{p:14,.0f}{f:14,.0f}{f / p:8.2f}")
    print(f"crash (drop {a.appends} un-fsynced appends): {out['crash_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
