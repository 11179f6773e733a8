"""Real Kafka's state seen from outside, without patching it.

* the active controller: each controller's ``quorum-state`` file
  (``<log dir>/__cluster_metadata-0/quorum-state``, JSON with ``leaderId`` and
  ``leaderEpoch``, rewritten on every election), read through the host
  contract; the highest epoch among live voters names the leader.
"""

from __future__ import annotations

import json
from typing import Any


def quorum_state(db: Any, node: str) -> dict[str, Any] | None:
    path = str(db.node_dir(node) / "data" / "__cluster_metadata-0" / "quorum-state")
    code, out, _ = db.hosts.exec(node, ["cat", path], timeout=5)
    if code != 0:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def quorum_leader(db: Any) -> str | None:
    best: tuple[int, int] | None = None
    for node in db.controllers():
        if node not in db.live_nodes():
            continue
        st = quorum_state(db, node) or {}
        leader, epoch = st.get("leaderId", -1), st.get("leaderEpoch", -1)
        if isinstance(leader, int) and leader >= 0 and isinstance(epoch, int):
            if best is None or (epoch, leader) > best:
                best = (epoch, leader)
    return db._name(best[1]) if best else None
