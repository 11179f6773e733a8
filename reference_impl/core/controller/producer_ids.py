"""Producer id blocks: Kafka's ProducerIdControlManager
(metadata/src/main/java/org/apache/kafka/controller/ProducerIdControlManager.java).

A broker with a current registration gets the next block of
:data:`PRODUCER_ID_BLOCK` ids; a ``ProducerIdsRecord`` moves the next free
id past it, and the answer waits for the record to commit.
"""

from __future__ import annotations

from typing import Final

from ..effects import Effect
from ..messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse, Errors, NodeId, ProducerIdsRecord
from .writer import MetadataWriter, addressed

#: producer ids handed out per AllocateProducerIds (Kafka's block size)
PRODUCER_ID_BLOCK: Final = 1000


class ProducerIdControlManager:
    def __init__(self, writer: MetadataWriter) -> None:
        self.w = writer

    def allocate(self, req: AllocateProducerIdsRequest, src: NodeId | None) -> list[Effect]:
        w = self.w
        dst = src if src is not None else req.broker_id
        if w.work is None:
            return [addressed(dst, AllocateProducerIdsResponse(Errors.NOT_CONTROLLER))]
        reg = w.work.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            return [addressed(dst, AllocateProducerIdsResponse(Errors.STALE_BROKER_EPOCH))]
        start = w.work.next_producer_id
        w.write(ProducerIdsRecord(req.broker_id, req.broker_epoch, start + PRODUCER_ID_BLOCK))
        w.answer_after_commit(
            dst, AllocateProducerIdsResponse(Errors.NONE, start, PRODUCER_ID_BLOCK), AllocateProducerIdsResponse(Errors.NOT_CONTROLLER)
        )
        return []
