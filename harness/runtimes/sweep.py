"""Find and remove what the real backends made, by name and label alone.

``kraftwerk cleanup`` calls :func:`sweep_all`: every ``kw-`` network
namespace (with every process inside it, and its veths) whose owning harness
is gone, and every container and network labelled ``kraftwerk`` whose
owning harness is gone. It needs no run state file, so it works after the
harness was SIGKILLed and whatever ``--out`` the run used; it is idempotent.
"""

from __future__ import annotations

from harness.runtimes.docker import sweep as sweep_docker
from harness.runtimes.net.netns import sweep as sweep_netns


def sweep_all(force: bool = False) -> list[str]:
    removed = [f"namespace {ns}" for ns in sweep_netns(force=force)]
    return removed + sweep_docker(force=force)
