"""Nothing a test run makes outlives it: the suite's own bookkeeping in /tmp
goes when the run ends (tests/conftest.py's ``pytest_sessionfinish``)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests import docker_engine


def _home(monkeypatch, tmp_path):
    home = tmp_path / "kraftwerk-test-docker"
    monkeypatch.setattr(docker_engine, "HOME", home)
    monkeypatch.setattr(docker_engine, "STARTED", home / "started-by-the-suite")
    return home


def test_the_docker_bookkeeping_goes_once_no_process_uses_the_engine(monkeypatch, tmp_path):
    home = _home(monkeypatch, tmp_path)
    with docker_engine._locked():
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        (home / f"{dead.pid}-x.user").touch()  # a user whose process died counts no more
    assert docker_engine.remove_home()
    assert not home.exists()


def test_the_docker_bookkeeping_stays_while_a_process_uses_the_engine(monkeypatch, tmp_path):
    home = _home(monkeypatch, tmp_path)
    with docker_engine._locked():
        (home / f"{os.getpid()}-x.user").touch()
    assert not docker_engine.remove_home()
    assert (home / "lock").exists()


def test_the_docker_bookkeeping_stays_while_the_suites_engine_runs(monkeypatch, tmp_path):
    _home(monkeypatch, tmp_path)
    with docker_engine._locked():
        docker_engine.STARTED.touch()
    assert not docker_engine.remove_home()
    assert docker_engine.STARTED.exists()


def test_a_passing_tests_tmp_path_is_not_kept(tmp_path):
    """pyproject's ``tmp_path_retention_policy = "failed"``: a run of one
    passing and one failing test keeps the failing one's directory only."""
    (tmp_path / "t.py").write_text(
        "def test_ok(tmp_path):\n    (tmp_path / 'f').write_text('x')\n"
        "def test_bad(tmp_path):\n    (tmp_path / 'f').write_text('x')\n    assert False\n")
    base = tmp_path / "base"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                        os.path.join(root, "pyproject.toml"), "--rootdir", str(tmp_path),
                        f"--basetemp={base}", str(tmp_path / "t.py")],
                       capture_output=True, text=True, timeout=120)
    assert "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    kept = sorted(p.name for p in base.iterdir() if not p.is_symlink()) if base.exists() else []
    assert kept == ["test_bad0"], kept
