"""The hosts file the README documents for the Vagrantfile's VMs loads in the
ssh backend: five hosts on the Vagrantfile's private network, as the user and
with the key and sudo the Vagrantfile sets up, and a test of up to five nodes
maps onto them (VMs cannot boot here, so this is as far as a test can go)."""

import re
from pathlib import Path

import pytest

from harness.runtimes.hostsfile import load
from harness.config import build_config
from harness.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_vagrant_hosts_file_loads():
    specs = load(str(ROOT / "vagrant" / "hosts.yaml"))
    vagrantfile = (ROOT / "Vagrantfile").read_text()
    count = int(re.search(r"^NODES = (\d+)", vagrantfile, re.M).group(1))
    subnet = re.search(r'^SUBNET = "([\d.]+)"', vagrantfile, re.M).group(1)
    assert [s.address for s in specs] == [f"{subnet}.{10 + i}" for i in range(1, count + 1)]
    assert [s.name for s in specs] == [f"n{i}" for i in range(1, count + 1)]
    assert {(s.user, s.sudo, s.port, s.dir) for s in specs} == {("vagrant", True, 22, "/var/tmp/kraftwerk")}
    assert all(s.key.endswith(".vagrant.d/insecure_private_key") for s in specs)
    assert "config.ssh.insert_key = false" in vagrantfile and "/var/tmp/kraftwerk" in vagrantfile
    assert all(s.known_hosts == str(ROOT / "vagrant" / "known_hosts") for s in specs)


def test_the_readme_command_fits_the_vagrant_hosts():
    readme = (ROOT / "README.md").read_text()
    assert "--hosts vagrant/hosts.yaml" in readme
    cfg = build_config(None, {"backend": "ssh", "hosts": "vagrant/hosts.yaml", "combined": True,
                              "brokers": 5, "controllers": 3})
    assert len(cfg.node_names()) <= len(load(str(ROOT / "vagrant" / "hosts.yaml")))
    with pytest.raises(UsageError):
        build_config(None, {"backend": "ssh"})
