"""Bad input about backends: a one-line error, exit 2, before anything
starts (no run directory, no namespace)."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.runtimes.net.netns import list_namespaces
from tests.nobody import NOBODY, NOBODY_GID, NOBODY_UID

from .conftest import assert_no_orphans

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def kraftwerk(*args, prefix=(), cwd=ROOT, home="/tmp"):
    return subprocess.run([*prefix, *CLI, *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, "KRAFTWERK_DEBUG": "", "HOME": home, "MPLCONFIGDIR": f"{home}/mpl"})


def one_line(r, words):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args, words", [
    (["--backend", "vmware"], "'vmware' is not one of"),
    (["--backend", "ssh"], "--backend ssh needs --hosts"),
    (["--hosts", "h.yaml"], "--hosts is only for --backend ssh"),
    (["--backend", "netns", "--db", "external", "--bootstrap", "h:1"], "runs the reference broker"),
])
def test_bad_backend_flags_exit_2(tmp_path, args, words):
    out = tmp_path / "results"
    one_line(kraftwerk("run", "--out", str(out), *args), words)
    assert not out.exists()


def test_an_unknown_backend_in_yaml_is_one_line(tmp_path):
    cfg = tmp_path / "t.yaml"
    cfg.write_text("backend: vmware\n")
    one_line(kraftwerk("run", "--config", str(cfg), "--out", str(tmp_path / "r")), "--backend")


def test_netns_without_root_is_refused_before_anything_starts(tmp_path):
    before = set(list_namespaces())
    home = tempfile.mkdtemp(prefix="kw-nobody-")  # a home the unprivileged user owns (tmp_path is closed to it)
    os.chmod(home, 0o755)
    os.chown(home, NOBODY_UID, NOBODY_GID)
    out = Path(home) / "results"
    try:
        r = kraftwerk("run", "--backend", "netns", "--out", str(out), prefix=NOBODY, home=home)
        made = out.exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    one_line(r, "--backend netns needs root")
    assert not made
    assert_no_orphans(before)
