"""What the ssh backend sends a bare host is pinned by hash, and the
project's own wheel is made without a build backend
(harness/runtimes/bundle.py): every wheel a node needs, and pip, is in
requirements.lock with hashes; a wheel whose bytes are not the lock's is
refused or fetched again, never sent; and the project's wheel installs
into a fresh virtualenv whatever setuptools that has."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from harness.errors import HarnessError, UsageError
from harness.runtimes import bundle


def test_every_wheel_a_host_gets_is_pinned_by_hash_in_the_lock():
    pins = dict(bundle.node_dists())
    hashes = bundle.lock_hashes()
    for dist, version in [*pins.items(), ("pip", bundle._locked_version("pip"))]:
        assert hashes.get((bundle._norm(dist), version)), dist
    assert {"click", "msgpack", "orjson", "trio", "pyfuse3"} <= set(pins)


def test_a_distribution_the_lock_does_not_pin_is_refused_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="not pinned with hashes"):
        bundle._pinned("left-pad", "1.0", tmp_path)
    with pytest.raises(UsageError, match="not pinned"):
        bundle._locked_version("left-pad")


def test_a_tampered_cached_wheel_is_fetched_again_and_a_wrong_hash_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "WHEELS", tmp_path / "wheels")
    target = bundle.Target.here()
    cache = tmp_path / "wheels" / target.key
    cache.mkdir(parents=True)
    (cache / "click-8.5.1-py3-none-any.whl").write_bytes(b"not click")
    got = bundle._wheel("click", "8.5.1", target)
    assert bundle._sha256(got) in bundle.lock_hashes()[("click", "8.5.1")]
    lock = tmp_path / "requirements.lock"
    lock.write_text("click==8.5.1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    monkeypatch.setattr(bundle, "LOCK", lock)
    shutil.rmtree(cache)
    with pytest.raises(HarnessError, match="no wheel of click==8.5.1"):
        bundle._wheel("click", "8.5.1", target)
    assert not list(cache.glob("*.whl"))


def test_the_projects_wheel_installs_into_a_fresh_virtualenv_with_an_old_setuptools(tmp_path):
    wheel = bundle._project_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert "harness/cli/__init__.py" in names and "harness/runtimes/requirements.lock" in names
    assert not any(n.endswith((".pyc", ".so")) for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # Python 3.11's own pip and setuptools
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(venv / "bin" / "python"), "-c",  # no dependencies installed: stdlib-only modules
                        "import harness.rundir.trust, harness, pathlib; "
                        "print((pathlib.Path(harness.__file__).parent / 'runtimes/requirements.lock').is_file())"],
                       capture_output=True, text=True, cwd="/", timeout=60)
    assert r.stdout.strip() == "True", r.stderr
    assert (venv / "bin" / "kraftwerk").is_file()
