"""``kraftwerk cluster up|down|status``: a cluster for hand use (a client,
iptables, tcpdump), started exactly as a run's and left running until
``down``; no run owns it, so ``kraftwerk cleanup`` leaves it alone.

* :mod:`.local`: the reference broker as processes on this machine;
* :mod:`.kafka`: real Apache Kafka as processes on this machine;
* :mod:`.hosted`: either db on the hosts of ``--backend netns|docker|ssh``.

Each keeps its own state file in the cluster's directory; :func:`kind_of`
tells from it which one a directory holds.
"""

from __future__ import annotations

from pathlib import Path

from harness.handcluster import hosted, kafka, local


def kind_of(dir: str | Path) -> str:
    """``hosted``, ``kafka`` or ``local``: which kind of hand cluster
    ``dir`` holds (``local`` when neither of the others' state is there,
    which :func:`.local.load` then checks)."""
    if hosted.load(Path(dir)) is not None:
        return "hosted"
    if kafka.load(dir) is not None:
        return "kafka"
    return "local"
