"""The KRaft controller: :class:`~.role.ControllerRole` (Kafka's
QuorumController) and the managers it delegates to, one module each, named
for the Kafka class each corresponds to (see :mod:`.role`)."""

from .producer_ids import PRODUCER_ID_BLOCK
from .role import CONTROLLER_REQUESTS, ControllerRole

__all__ = ["ControllerRole", "CONTROLLER_REQUESTS", "PRODUCER_ID_BLOCK"]
