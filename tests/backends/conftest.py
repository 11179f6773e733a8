"""Fixtures for the real-host backends: they make and remove real namespaces."""

import os
import shutil

import pytest


def needs_root_net() -> None:
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("ip") is None:
        pytest.fail("these tests need root, iproute2 and iptables (scripts/bootstrap installs them)")


def assert_no_orphans(before: set[str]) -> None:
    """Every kw- namespace that appeared since ``before`` belongs to a live
    owner (another run on this machine), none to a finished or refused one."""
    import json

    from harness.runtimes.net.netns import OWNER_DIR, list_namespaces, owner_alive

    for ns in set(list_namespaces()) - before:
        rec = OWNER_DIR / f"{ns.split('-')[1]}.json"
        assert rec.exists() and owner_alive(json.loads(rec.read_text())), ns
