"""A cluster's nodes: names, node ids and roles, as every runtime names them.

Dedicated controllers by default, as production KRaft runs: brokers ``n1``..
with ``node.id`` 1.., controllers ``c1``.. with ``node.id`` 101.. (so broker
faults leave the metadata quorum standing); ``combined`` puts the voters on
the first brokers instead, every node ``n<i>`` with ``node.id`` i. The
simulator names its hosts the same way, so a fault recorded by one runtime
names the same nodes on another. A leaf: the launcher's hand clusters and
the harness's test configuration both read it.
"""

from __future__ import annotations

from typing import Final

#: a dedicated controller's node id is this plus its index (``c1`` is 101)
CONTROLLER_BASE: Final = 100

#: (name, node id, roles) of one node
Node = tuple[str, int, list[str]]


def layout(brokers: int, controllers: int, combined: bool = False) -> list[Node]:
    """Every node of the cluster, brokers first."""
    if combined:
        return [(f"n{i}", i, (["broker"] if i <= brokers else []) + (["controller"] if i <= controllers else []))
                for i in range(1, max(brokers, controllers) + 1)]
    return [(f"n{i}", i, ["broker"]) for i in range(1, brokers + 1)] + \
        [(f"c{i}", CONTROLLER_BASE + i, ["controller"]) for i in range(1, controllers + 1)]
