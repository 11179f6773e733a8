"""What a broker's request channels to the active controller need from the
broker: who it is, a correlation id, the controller to send to, a deadline to
be woken for, and a way to say the controller did not answer.

The channels (:mod:`.alter_partition`, the admin forwarder of
:mod:`.broker_requests`) take this narrow view, never the broker class, so
they import nothing of :mod:`.replica_manager` and the core's imports form no
circle (``tests/test_layering.py``), as a partition takes its
``PartitionContext``.
"""

from __future__ import annotations

from typing import Protocol

from .messages import NodeId


class ControllerLink(Protocol):
    node_id: NodeId
    #: -1 until registered
    broker_epoch: int

    def next_correlation_id(self) -> int: ...

    def controller_id(self) -> NodeId: ...

    def note_deadline(self, at: int) -> None: ...

    def controller_failed(self) -> None: ...
