"""Which processes carry a given variable in their environment, read from
/proc by the tests themselves.

The harness finds a run's processes the same way
(``harness.rundir.lease.pids_with_run_id``), but a test that asks whether
the harness left anything behind must not look through the harness's own
eyes: a lookup that missed a process would then hide its own miss. So the
tests keep this second, independent reading."""

from __future__ import annotations

from pathlib import Path

from reference_impl.server.procs import alive


def pids_with_env(key: str, value: str) -> list[int]:
    """Live processes whose initial environment holds ``key=value``
    (a process that ends while being read is left out)."""
    want = f"{key}={value}".encode()
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if want in (p / "environ").read_bytes().split(b"\0"):
                    out.append(int(p.name))
            except OSError:
                pass
    return [p for p in out if alive(p)]
