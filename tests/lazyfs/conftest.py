"""Real FUSE mounts made and removed by each test (root and /dev/fuse, as
CI has them)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.lazyfs import mounts

ROOT = Path(__file__).resolve().parents[2]


class Mount:
    def __init__(self, point: Path, backing: Path) -> None:
        self.point, self.backing = point, backing

    def crash(self, torn: bool = False) -> dict:
        return mounts.crash(self.point, torn=torn)

    def p(self, rel: str) -> Path:
        return self.point / rel


@pytest.fixture
def fs(tmp_path):
    point, backing = tmp_path / "mnt", tmp_path / "backing"
    point.mkdir()
    backing.mkdir()
    mounts.mount(point, backing, seed=7)
    try:
        yield Mount(point, backing)
    finally:
        mounts.umount(point)
        assert not mounts.is_mounted(point)


def kraftwerk(*args, home=None, prefix=()):
    argv = [*prefix, sys.executable, "-c", "from harness.cli import main; main()", *args]
    env = {**os.environ, "KRAFTWERK_DEBUG": ""}
    if home:  # an unprivileged user has no writable home here (matplotlib warns without one)
        env.update(HOME=str(home), MPLCONFIGDIR=str(home))
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)


def fsync_path(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
