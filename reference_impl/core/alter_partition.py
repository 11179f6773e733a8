"""The broker's AlterPartition channel (seed 000: DefaultAlterPartitionManager).

At most one proposal per partition is queued, and at most one
AlterPartition request is in flight per broker, batching every partition's
pending proposal; a proposal superseded by metadata (the partition's ISR
state moved on) is dropped; an unanswered request is resent after the
broker's controller RPC timeout, and a failed one after
``alter.partition.retry.backoff.ms``. The channel owns only its queue: the
broker (an :class:`AlterPartitionContext`, the ``broker`` argument)
supplies the controller to send to, the correlation ids and the partitions'
reaction to the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from .config import ProtocolConfig
from .controller_link import ControllerLink
from .effects import Effect, Send
from .messages import AlterPartitionItem, AlterPartitionRequest, AlterPartitionResponse, Errors, NodeId, TopicPartition
from .partition import IsrState, Partition


class AlterPartitionContext(ControllerLink, Protocol):
    """What the channel needs from its broker beyond the controller link."""

    config: ProtocolConfig

    @property
    def controller_rpc_timeout_ms(self) -> int: ...

    def on_hw_changed(self, tp: TopicPartition, now: int) -> list[Effect]: ...


@dataclass
class PendingAlter:
    """One partition's proposal: the ISR state it was made in (a newer state
    supersedes it) and when it may be sent (after a backoff)."""

    partition: Partition
    state: IsrState
    item: AlterPartitionItem
    not_before: int = 0


class AlterPartitionChannel:
    def __init__(self) -> None:
        self.pending: dict[TopicPartition, PendingAlter] = {}
        #: (correlation id, sent at, controller, the proposals it carries)
        self.inflight: tuple[int, int, NodeId, dict[TopicPartition, PendingAlter]] | None = None

    def submit(self, partition: Partition, item: AlterPartitionItem, not_before: int) -> None:
        """Queue a proposal, replacing the partition's earlier one."""
        self.pending[partition.tp] = PendingAlter(partition, partition.state, item, not_before)

    def deadlines(self, rpc_timeout_ms: int) -> list[int]:
        """When the channel next needs the broker: the in-flight request's
        resend time, else the queued proposals' backoffs."""
        if self.inflight is not None:
            return [self.inflight[1] + rpc_timeout_ms]
        return [pa.not_before for pa in self.pending.values()]

    def expire(self, now: int, rpc_timeout_ms: int) -> bool:
        """Give up on an unanswered request: its proposals are queued again.
        True if it was given up (the controller is then suspect)."""
        if self.inflight is None or now - self.inflight[1] < rpc_timeout_ms:
            return False
        items = self.inflight[3]
        self.inflight = None
        for tp, pa in items.items():
            self.pending.setdefault(tp, pa)
        return True

    def maybe_send(self, broker: AlterPartitionContext, now: int) -> list[Effect]:
        """Send every ready proposal in one request, if none is in flight."""
        if self.inflight is not None or not self.pending or broker.broker_epoch < 0:
            return []
        for tp in [tp for tp, pa in self.pending.items() if pa.partition.state is not pa.state]:
            del self.pending[tp]  # superseded by metadata
        ready = {tp: pa for tp, pa in self.pending.items() if pa.not_before <= now}
        if not ready:
            return []
        for tp in ready:
            del self.pending[tp]
        corr = broker.next_correlation_id()
        dst = broker.controller_id()
        self.inflight = (corr, now, dst, ready)
        broker.note_deadline(now + broker.controller_rpc_timeout_ms)
        request = AlterPartitionRequest(
            broker_id=broker.node_id,
            broker_epoch=broker.broker_epoch,
            correlation_id=corr,
            items=tuple(pa.item for pa in ready.values()),
        )
        return [Send(dst, request)]

    def handle_response(self, broker: AlterPartitionContext, msg: AlterPartitionResponse, now: int) -> list[Effect]:
        """Hand each result to its partition; queue again what must be retried."""
        if self.inflight is None or self.inflight[0] != msg.correlation_id:
            return []  # stale: we already resent or gave up
        items = self.inflight[3]
        self.inflight = None
        effects: list[Effect] = []
        backoff = now + broker.config.alter_partition_retry_backoff_ms
        broker.note_deadline(backoff)
        if msg.error != Errors.NONE:
            if msg.error == Errors.NOT_CONTROLLER:
                broker.controller_failed()
            self._requeue(items.values(), backoff)
            return effects
        answered: set[TopicPartition] = set()
        for result in msg.results:
            sent = items.get(result.tp)
            if sent is None:
                continue
            answered.add(result.tp)
            e, hw_changed, retry = sent.partition.handle_alter_partition_result(result, sent.state, now)
            effects += e
            if hw_changed:
                effects += broker.on_hw_changed(result.tp, now)
            if retry:
                self._requeue((sent,), backoff)
        self._requeue([pa for tp, pa in items.items() if tp not in answered], backoff)
        effects += self.maybe_send(broker, now)
        return effects

    def _requeue(self, proposals: Iterable[PendingAlter], not_before: int) -> None:
        for pa in proposals:
            tp = pa.partition.tp
            if tp not in self.pending:
                pa.not_before = not_before
                self.pending[tp] = pa
