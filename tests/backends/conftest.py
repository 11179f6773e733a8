"""Fixtures for the real-host backends: they make and remove real namespaces."""

import os
import shutil

import pytest


def needs_root_net() -> None:
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("ip") is None:
        pytest.fail("these tests need root, iproute2 and iptables (scripts/bootstrap installs them)")
