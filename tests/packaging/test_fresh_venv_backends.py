"""kraftwerk installed from its wheel into a fresh virtualenv outside the
checkout runs a short run on every backend, as a user's install would:
``--backend docker`` must give containers the harness's own interpreter
(the venv, and every directory on its import path: harness/runtimes/
docker.py's ``interpreter_paths``), and ``--backend ssh`` must make the
project's wheel for the hosts without the venv's setuptools (a fresh Python
3.11 venv has 65.5, older than the build needs: harness/runtimes/bundle.py
writes the wheel itself). Each run's summary carries its wall time.

The venv is made with Python's own ``venv`` (its pip and setuptools, not
the project's) and gets the project's wheel; the pinned third-party
packages are borrowed from the development environment through a path in
a ``.pth`` file (no 450 MB download per test run; the editable install's
hook in that directory is not run, so the project comes only from the
wheel, which the test checks). Every run is started from a directory
outside the checkout, with the checkout nowhere on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness.runtimes import bundle
from harness.runtimes.throwaway import down, up
from tests.docker_engine import shared_engine

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["KRAFTWERK_PURE"] = "1"  # the compiled accelerator lives in the checkout, not the wheel
    env["KRAFTWERK_DEBUG"] = ""
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0:
        pytest.fail("the netns, docker and ssh backends need root")
    work = tmp_path_factory.mktemp("fresh")
    wheel = bundle._project_wheel(work)
    v = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(v)], check=True)  # Python's own pip and setuptools
    site = Path(subprocess.run([str(v / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "kraftwerk_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = subprocess.run([str(v / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    where = subprocess.run([str(v / "bin" / "python"), "-c", "import harness; print(harness.__file__)"],
                           capture_output=True, text=True, cwd=work, env=_env(), check=True).stdout
    assert where.startswith(str(site)), where
    return v


def _run(venv: Path, cwd: Path, backend: str, *extra: str) -> dict:
    out = cwd / f"results-{backend}"
    r = subprocess.run([str(venv / "bin" / "kraftwerk"), "run", "--backend", backend, "--out", str(out), "--json",
                        "--no-report", "--no-progress", "--time-limit", "6", "--seed", "5", *extra],
                       capture_output=True, text=True, timeout=600, cwd=cwd, env=_env())
    assert r.returncode == 0, f"{backend}: exit {r.returncode}: {r.stderr[-800:]}"
    res = json.loads(r.stdout)
    summary = json.loads((Path(res["run_dir"]) / "summary.json").read_text())
    assert isinstance(summary["wall_s"], float) and 6 <= summary["wall_s"] < 600, summary["wall_s"]
    assert json.loads((Path(res["run_dir"]) / "test.json").read_text())["backend"] == backend
    return res


@pytest.mark.parametrize("backend", ["local", "netns"])
def test_an_installed_kraftwerk_runs_on_a_backend_of_this_machine(venv, tmp_path, backend):
    assert _run(venv, tmp_path, backend)["valid"] is True


def test_an_installed_kraftwerk_runs_in_containers_with_its_own_interpreter(venv, tmp_path):
    with shared_engine():
        assert _run(venv, tmp_path, "docker")["valid"] is True


def test_an_installed_kraftwerk_runs_on_throwaway_ssh_hosts(venv, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.mkdir(mode=0o700)
    up(3, hosts)
    try:
        assert _run(venv, tmp_path, "ssh", "--hosts", str(hosts / "hosts.yaml"), "--combined")["valid"] is True
    finally:
        assert len(down(hosts)) == 4  # three hosts and the bridge
