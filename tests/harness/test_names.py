"""Run and test names are one directory under --out, checked in one place
(``harness.rundir.store.check_name``, a fullmatch) for every caller: ``kraftwerk
run``, ``kraftwerk sim`` and the store itself. ``../x``, absolute names,
separators and a trailing newline are refused with exit 2 and nothing is
written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.rundir import store

ROOT = Path(__file__).resolve().parents[2]
BAD = ["../x", "/abs", "a/b", "..", ".", "ok\n", "", "-lead", "a" * 82, "a\\b", "x\x00y"]


@pytest.mark.parametrize("name", BAD)
def test_store_refuses_names_that_are_not_one_directory(tmp_path, name):
    with pytest.raises(store.BadName):
        store.new_run_dir(tmp_path / "out", name, 1)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cmd", ["sim", "run"])
@pytest.mark.parametrize("name", ["../escaped", "/tmp/escaped-abs", "trailing\n"])
def test_cli_name_exits_2_and_writes_nothing(tmp_path, cmd, name):
    out = tmp_path / "deep" / "out"
    extra = ["--seeds", "1", "--time-limit", "1"] if cmd == "sim" else ["--time-limit", "1"]
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", cmd, "--out", str(out),
                        "--name", name, *extra], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "deep" / "escaped").exists() and not Path("/tmp/escaped-abs").exists()
    assert not out.exists()
