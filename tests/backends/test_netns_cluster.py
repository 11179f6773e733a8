"""``kraftwerk cluster up --backend netns``: a reference cluster in namespaces
that outlives the command, reachable at real addresses, left alone by
``kraftwerk cleanup`` (it is no run's), removed by ``cluster down``;
docker and ssh are refused in one line (harness/backend/handcluster.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.net.netns import list_namespaces
from harness.state import alive
from reference_impl.server.launcher import metadata_brokers

from .conftest import needs_root_net

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from harness.cli import main; main()"]


def kw(*args, env=None):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=180, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": "", **(env or {})})


def test_a_namespace_cluster_outlives_up_and_cleanup_and_goes_with_down(tmp_path):
    needs_root_net()
    d = tmp_path / "c"
    r = kw("cluster", "up", "--backend", "netns", "--combined", "--dir", str(d), "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    try:
        host, port = st["bootstrap"].split(",")[0].split(":")
        assert sorted(metadata_brokers(host, int(port))) == [1, 2, 3]
        c = kw("cleanup", env={"KRAFTWERK_RUNTIME_DIR": str(tmp_path / "registry")})
        assert c.returncode == 0, c.stderr
        rows = json.loads(kw("cluster", "status", "--dir", str(d), "--json").stdout)["nodes"]
        assert [x["alive"] for x in rows] == [True, True, True]
    finally:
        down = kw("cluster", "down", "--dir", str(d), "--timeout", "20")
    assert down.returncode == 0, down.stderr
    assert not [ns for ns in list_namespaces() if ns.startswith(f"kw-{st['tag']}-")]
    assert not any(alive(n["pid"], n["start"]) for n in st["nodes"])


@pytest.mark.parametrize("backend", ["docker", "ssh"])
def test_cluster_up_on_docker_or_ssh_is_refused_in_one_line(tmp_path, backend):
    r = kw("cluster", "up", "--backend", backend, "--dir", str(tmp_path / "c"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "kraftwerk run --backend" in r.stderr
