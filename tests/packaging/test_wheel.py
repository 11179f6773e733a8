"""The installed package works, not just the source tree.

Every other CLI test runs the checkout through its editable install, so a
template left out of the package data, a module missing from
``[tool.setuptools.packages.find]`` or a console script pointing at the wrong
function would pass them all. Here the wheel is built, installed into a
virtualenv of its own, and ``kraftwerk`` is run end to end from a directory
outside the checkout, with the checkout nowhere on ``sys.path``.

The new virtualenv borrows the project's pinned third-party packages from the
development environment through a plain path entry (so no 450 MB download per
test run): a path in a ``.pth`` file is appended to ``sys.path`` but the
``.pth`` files inside it (the editable install's hook) are not run, so
``harness`` and friends can only come from the installed wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "reference_impl", "nemesis", "workloads", "checkers", "generator")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["KRAFTWERK_PURE"] = "1"  # the compiled accelerator lives in the checkout, not the wheel
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    # setuptools builds in the source's build/: build a copy, so nothing is left in the checkout
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".accel", "build", "results", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis"))
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(src)],
        check=True, cwd=work, env=_clean_env(), capture_output=True,
    )
    wheels = sorted(dist.glob("kraftwerk-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip())
    (site / "kraftwerk_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheels[0])],
        check=True, cwd=work, env=_clean_env(), capture_output=True,
    )
    return venv


def test_every_package_is_imported_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    code = "import json, importlib; print(json.dumps({p: importlib.import_module(p).__file__ for p in %r}))" % (PACKAGES,)
    out = subprocess.run([str(installed / "bin" / "python"), "-c", code], cwd=tmp_path, env=_clean_env(),
                         check=True, capture_output=True, text=True).stdout
    files = json.loads(out)
    assert (Path(files["harness"]).parent / "campaign" / "default.yaml").is_file()  # package data
    for pkg, f in files.items():
        assert str(installed) in f, f"{pkg} imported from {f}, not from the installed wheel"
        assert not f.startswith(str(ROOT)), f"{pkg} imported from the checkout"


def test_installed_kraftwerk_runs_a_simulation_and_checks_it(installed: Path, tmp_path: Path) -> None:
    """The console script, the simulator, the checkers and the report's
    templates, all from the wheel: one seed end to end, then `check` of the
    run directory it wrote."""
    exe = str(installed / "bin" / "kraftwerk")
    out = tmp_path / "results"
    run = subprocess.run(
        [exe, "sim", "--seed", "3", "--time-limit", "5", "--nemesis", "partition", "--out", str(out), "--report", "--json"],
        cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["valid"] is True
    runs = [p.parent for p in out.rglob("results.json")]
    assert len(runs) == 1
    run_dir = runs[0]
    for name in ("test.json", "history.jsonl", "results.json", "index.html"):
        assert (run_dir / name).is_file(), name
    assert "<html" in (run_dir / "index.html").read_text().lower()
    check = subprocess.run([exe, "check", str(run_dir), "--json"], cwd=tmp_path, env=_clean_env(),
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-2000:]
    assert json.loads(check.stdout)["valid"] is True


def test_installed_kraftwerk_reports_bad_input_in_one_line(installed: Path, tmp_path: Path) -> None:
    run = subprocess.run([str(installed / "bin" / "kraftwerk"), "sim", "--rf", "0"], cwd=tmp_path,
                         env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
