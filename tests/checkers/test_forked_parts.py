"""A big history's check uses both cores: ranges of its lines read, and half
its keys checked, in forked processes (:mod:`checkers.forked`). The part
done elsewhere is the part done here, a failed fork's part is done here
instead, with no traceback, and no process or file outlives the check."""

from __future__ import annotations

import glob
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

from pathlib import Path

from checkers.forked import Forked
from checkers.history import write_jsonl
from checkers.queue.scan import scan_jsonl
from checkers.queue.synth import valid_history

ROOT = Path(__file__).resolve().parents[2]


def _without_pid(results: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "pid"} for r in results]


def _keys(tmp_path):
    ops = valid_history(6000, 9, 7, seed=3)
    del ops[len(ops) // 2]  # an operation lost: its key is not clean, so it is checked as events
    for i, op in enumerate(ops):
        op.index = i
    path = tmp_path / "h.jsonl"
    write_jsonl(path, ops)
    return scan_jsonl(path, []).projection.keys


_IN_A_FRESH_PROCESS = """
import json, multiprocessing, sys, time
from pathlib import Path
import checkers.pipeline as pipeline
from checkers.forked import can_fork
from tests.checkers.test_forked_parts import _keys, _without_pid
tmp = Path(sys.argv[1])
here = _without_pid(pipeline.run_keys(_keys(tmp)))
pipeline.MIN_OPS = 0
both = pipeline.run_keys(_keys(tmp), release=True)
try:
    pipeline.run_keys(_keys(tmp), deadline=time.monotonic() - 1)
    late = "no exception"
except pipeline.PerKeyBudgetExceeded as e:
    late = e.results
print(json.dumps({"can_fork": can_fork(), "same": _without_pid(both) == here, "pids": len({r["pid"] for r in both}),
                  "late": late, "children": len(multiprocessing.active_children())}))
"""


def test_keys_checked_in_a_forked_process_give_the_results_checked_here(tmp_path):
    """In a process of its own (this one may have other threads, and then
    nothing is forked): the same results, half of them from the other
    process; past the deadline the stage ends with the keys done (none);
    no process left."""
    out = subprocess.run([sys.executable, "-c", _IN_A_FRESH_PROCESS, str(tmp_path)], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["can_fork"]  # two cores and one thread: what the suite's machine has
    assert got["same"] and got["pids"] == 2
    assert got["late"] == [] and got["children"] == 0


def _fails(out, why: str) -> None:
    out.write(b"half")
    raise RuntimeError(why)


def _writes(out, data: bytes) -> None:
    out.write(data)


def test_a_failed_part_says_so_with_no_traceback_and_leaves_no_file(capfd):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "kraftwerk-part-*")))
    with Forked(_fails, "on purpose") as f:
        assert f.output() is None
    with Forked(_writes, b"whole") as f:
        assert f.output().read() == b"whole"
    assert "Traceback" not in capfd.readouterr().err
    assert not multiprocessing.active_children()
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "kraftwerk-part-*"))) == before


_BUFFERED = """
from checkers.forked import Forked
print("written before the part", end="")  # to a pipe: still in this process's buffer
with Forked(lambda out: out.write(b"x")) as f:
    assert f.output().read() == b"x"
"""


def test_what_this_process_had_yet_to_write_is_written_once_not_again_by_the_part():
    out = subprocess.run([sys.executable, "-c", _BUFFERED], capture_output=True, text=True, check=True).stdout
    assert out == "written before the part"


def _sleeps(out, seconds: float) -> None:
    time.sleep(seconds)


def test_a_part_still_running_when_the_check_ends_is_killed():
    with Forked(_sleeps, 60) as f:
        pid = f.proc.pid
        assert os.path.exists(f"/proc/{pid}")
    assert not os.path.exists(f"/proc/{pid}")
    assert not multiprocessing.active_children()
