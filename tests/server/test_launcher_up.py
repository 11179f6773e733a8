"""A cluster that does not come up leaves no node running.

If one node cannot start, the nodes already started would otherwise run on
after ``up`` raised: its caller (a fixture, ``kraftwerk cluster up``) never
got a cluster to take down.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reference_impl.server.launcher import ClusterError, LocalCluster


def _running_in(d: Path) -> list[int]:
    """Processes whose working directory is ``d`` (where the launcher starts its nodes)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if Path(os.readlink(p / "cwd")) == d:
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def test_a_node_that_cannot_start_takes_the_nodes_started_before_it_down_with_the_error(tmp_path):
    d = tmp_path / "c"
    c = LocalCluster.plan(str(d), 1, 3, 0)
    started = []
    start_node = c.start_node
    c.start_node = lambda node_id: started.append(start_node(node_id)) or started[-1]  # type: ignore[method-assign]
    third = c.nodes[2]
    os.makedirs(os.path.dirname(third.data_dir), exist_ok=True)
    Path(third.data_dir).write_text("a file where its directory goes: it cannot start")
    with pytest.raises((ClusterError, OSError)):
        c.up(30)
    assert len(started) == 2  # two nodes were running when the third failed
    assert _running_in(d) == []
    assert all(n.pid is None for n in c.nodes)
