"""The heavy libraries a backend needs are loaded when that backend is
asked for (paramiko for ssh hosts, the Docker SDK for containers), so a run
on any other backend, and every command's start, goes without them."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import harness.dbs, harness.lifecycle.runner, harness.runtimes, harness.runtimes.docker
assert "paramiko" not in sys.modules and "docker" not in sys.modules, "loaded early"
ssh = harness.runtimes.ssh_runtime()
assert ssh.SshHosts and "paramiko" in sys.modules
assert harness.runtimes.ssh_runtime() is ssh  # asked again once the module is loaded
assert harness.runtimes.docker._sdk().DockerClient and "docker" in sys.modules
"""


def test_paramiko_and_the_docker_sdk_load_when_their_backend_is_asked_for():
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-1500:]
