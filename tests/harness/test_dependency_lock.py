"""Every pin in pyproject.toml (runtime, test, accel and hosts) is the version the
hash-checked requirements.lock installs, and every runtime dependency is
imported somewhere: scripts/bootstrap installs only from the lock, so a pin
changed without regenerating it (scripts/audit names the command) would be
silently ignored."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: distribution name -> the module it is imported as, where they differ
MODULES = {"confluent-kafka": "confluent_kafka", "kafka-python": "kafka", "pyyaml": "yaml"}


def _pins() -> dict[str, str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = proj["optional-dependencies"]
    reqs = proj["dependencies"] + extras["test"] + extras["accel"] + extras["hosts"]
    return dict(r.lower().split("==") for r in reqs)


def test_every_pin_is_in_the_hash_checked_lock():
    lock = (ROOT / "requirements.lock").read_text()
    locked = dict(m.groups() for m in re.finditer(r"^([a-z0-9._-]+)==(\S+) \\$", lock, re.M))
    assert "--hash=sha256:" in lock
    stale = {n: (v, locked.get(n)) for n, v in _pins().items() if locked.get(n) != v}
    assert not stale, f"requirements.lock is stale for {stale}; regenerate it (see scripts/audit)"


def test_every_runtime_pin_is_imported():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    sources = "\n".join(p.read_text(errors="replace") for d in ("harness", "reference_impl", "checkers", "nemesis",
                                                                 "workloads", "generator")
                        for p in (ROOT / d).rglob("*.py"))
    unused = []
    for req in proj["dependencies"]:
        name = req.split("==")[0].lower()
        mod = MODULES.get(name, name.replace("-", "_"))
        if not re.search(rf"^\s*(import|from) {re.escape(mod)}\b", sources, re.M):
            unused.append(name)
    assert not unused, f"pinned but imported nowhere: {unused}"
