"""The broker's lifecycle towards the controller: registration (carrying the
previous broker epoch from the clean-shutdown marker), heartbeats and
controlled shutdown (seed 001 §1.2.2; seed 002 for the clean-shutdown
marker; Kafka's BrokerLifecycleManager in
server/src/main/java/org/apache/kafka/server/BrokerLifecycleManager.java,
and BrokerServer's shutdown for the marker).

* Registration is sent until answered: an unanswered one goes to the next
  voter after the controller RPC timeout; a refused one is sent again after
  a backoff on the monotonic clock (BrokerLifecycleManager schedules its
  next communication on System.nanoTime, so a wall-clock jump cannot
  postpone it): a heartbeat interval after DUPLICATE_BROKER_REGISTRATION
  (our previous incarnation's session is still live), a short backoff
  (with the next voter) after anything else.
* Heartbeats go every ``broker.heartbeat.interval.ms`` once registered; a
  heartbeat answered STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED makes
  the broker register again.
* Controlled shutdown asks in the heartbeat (``want_shutdown``) and halts
  once the controller says so, or after ``request.timeout.ms`` regardless:
  every log flushed, the HW checkpointed, then the clean-shutdown marker
  with the broker epoch written, then ``Halt``.
"""

from __future__ import annotations

from typing import Protocol

from .broker_context import BrokerContext
from .config import ProtocolConfig
from .effects import Effect, FileWrite, Fsync, Halt, Send
from .messages import (
    BrokerEndpoint,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Errors,
    NodeId,
    TopicPartition,
)
from .metadata import MetadataImage
from .partition import Partition
from .storage import CLEAN_SHUTDOWN, CleanShutdown


class LifecycleContext(Protocol):
    """What the lifecycle reads and sets of its broker."""

    node_id: NodeId
    incarnation_id: str
    endpoint: BrokerEndpoint
    image: MetadataImage
    partitions: dict[TopicPartition, Partition]
    is_fenced: bool
    halted: bool
    controller_hint: NodeId | None

    def controller_id(self) -> NodeId: ...

    def controller_failed(self) -> None: ...

    def publish_metadata(self, now: int) -> list[Effect]: ...

    def checkpoint_hw(self, force: bool) -> list[Effect]: ...


class BrokerLifecycleManager:
    def __init__(self, broker: LifecycleContext, config: ProtocolConfig, ctx: BrokerContext) -> None:
        self.broker = broker
        self.config = config
        #: the broker epoch lives here (BrokerLifecycleManager owns it in Kafka)
        self.ctx = ctx
        #: the broker epoch of the clean-shutdown marker found at start (-1: none)
        self.previous_broker_epoch = -1
        self.registration_sent_at: int | None = None
        #: a refused registration is sent again at this monotonic time (not a timeout)
        self.registration_retry_at: int | None = None
        self.next_heartbeat_at = 0
        self.heartbeat_sent_at: int | None = None
        self.shutting_down = False
        self.shutdown_deadline = 0

    @property
    def controller_rpc_timeout_ms(self) -> int:
        """Resend registration / heartbeats / AlterPartition not answered in time."""
        return max(1000, 2 * self.config.broker_heartbeat_interval_ms)

    def deadlines(self) -> list[int]:
        """When the lifecycle next needs the broker (wall clock)."""
        skew = self.ctx.skew
        c: list[int] = []
        rpc = self.controller_rpc_timeout_ms
        if self.ctx.broker_epoch < 0:
            if self.registration_retry_at is not None:
                c.append(self.registration_retry_at + skew)
            elif self.registration_sent_at is not None:
                c.append(self.registration_sent_at + rpc)
        elif self.heartbeat_sent_at is not None:
            c.append(self.heartbeat_sent_at + rpc)
        else:
            c.append(self.next_heartbeat_at + skew)
        if self.shutting_down:
            c.append(self.shutdown_deadline + skew)
        return c

    def tick(self, now: int) -> list[Effect]:
        """Registration and heartbeats that fell due, resent or retried."""
        b = self.broker
        mono_now = self.ctx.mono
        if self.ctx.broker_epoch < 0:
            if self.registration_retry_at is not None:
                if mono_now >= self.registration_retry_at:
                    return self.send_registration(now)
            elif self.registration_sent_at is not None and now - self.registration_sent_at >= self.controller_rpc_timeout_ms:
                b.controller_failed()  # unanswered: try the next voter
                return self.send_registration(now)
            return []
        if self.heartbeat_sent_at is not None and now - self.heartbeat_sent_at >= self.controller_rpc_timeout_ms:
            b.controller_failed()
            self.heartbeat_sent_at = None
        if self.heartbeat_sent_at is None and mono_now >= self.next_heartbeat_at:
            return self._send_heartbeat(now)
        return []

    def send_registration(self, now: int) -> list[Effect]:
        b = self.broker
        self.registration_sent_at = now
        self.registration_retry_at = None
        self.ctx.note_deadline(now + self.controller_rpc_timeout_ms)
        return [
            Send(
                b.controller_id(),
                BrokerRegistrationRequest(
                    broker_id=b.node_id,
                    incarnation_id=b.incarnation_id,
                    endpoint=b.endpoint,
                    previous_broker_epoch=self.previous_broker_epoch,
                ),
            )
        ]

    def _send_heartbeat(self, now: int) -> list[Effect]:
        b = self.broker
        ctx = self.ctx
        self.heartbeat_sent_at = now
        self.next_heartbeat_at = ctx.mono + self.config.broker_heartbeat_interval_ms
        ctx.note_deadline(self.next_heartbeat_at + ctx.skew)
        return [
            Send(
                b.controller_id(),
                BrokerHeartbeatRequest(
                    broker_id=b.node_id,
                    broker_epoch=self.ctx.broker_epoch,
                    metadata_offset=b.image.offset,
                    want_fence=False,
                    want_shutdown=self.shutting_down,
                ),
            )
        ]

    def handle_registration_response(self, msg: BrokerRegistrationResponse, src: NodeId | None, now: int) -> list[Effect]:
        b = self.broker
        if self.ctx.broker_epoch >= 0 or b.halted:
            return []
        if msg.error != Errors.NONE:
            if msg.error == Errors.DUPLICATE_BROKER_REGISTRATION:
                # our previous incarnation's session is still live at the
                # (right) controller: ask it again a heartbeat interval later
                backoff = self.config.broker_heartbeat_interval_ms
            else:
                # retry with the next voter after a short backoff
                b.controller_failed()
                backoff = self.config.alter_partition_retry_backoff_ms
            self.registration_sent_at = None
            self.registration_retry_at = self.ctx.mono + backoff
            self.ctx.note_deadline(self.registration_retry_at + self.ctx.skew)
            return []
        if src is not None:
            b.controller_hint = src
        self.ctx.broker_epoch = msg.broker_epoch
        self.registration_sent_at = None
        self.registration_retry_at = None
        return self._send_heartbeat(now) + b.publish_metadata(now)

    def handle_heartbeat_response(self, msg: BrokerHeartbeatResponse, src: NodeId | None, now: int) -> list[Effect]:
        b = self.broker
        if b.halted:
            return []
        ctx = self.ctx
        self.heartbeat_sent_at = None
        if msg.error == Errors.NOT_CONTROLLER:
            b.controller_failed()
            self.next_heartbeat_at = ctx.mono + self.config.alter_partition_retry_backoff_ms
            ctx.note_deadline(self.next_heartbeat_at + ctx.skew)
            return []
        if msg.error in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
            # the controller no longer knows this session: register again
            self.ctx.broker_epoch = -1
            return self.send_registration(now)
        if msg.error != Errors.NONE:
            self.next_heartbeat_at = ctx.mono + self.config.alter_partition_retry_backoff_ms
            ctx.note_deadline(self.next_heartbeat_at + ctx.skew)
            return []
        if src is not None:
            b.controller_hint = src
        b.is_fenced = msg.is_fenced
        if self.shutting_down and msg.should_shut_down:
            return self.finish_shutdown(now)
        return []

    def begin_controlled_shutdown(self, now: int) -> list[Effect]:
        """Ask the controller to move leaderships away (want_shutdown in the
        heartbeat); finish with Halt once it says so, or after
        request_timeout_ms regardless."""
        ctx = self.ctx
        self.shutting_down = True
        self.shutdown_deadline = ctx.mono + self.config.request_timeout_ms
        ctx.note_deadline(self.shutdown_deadline + ctx.skew)
        if self.ctx.broker_epoch < 0:
            return self.finish_shutdown(now)
        return self._send_heartbeat(now)

    def finish_shutdown(self, now: int) -> list[Effect]:
        """Flush every log and checkpoint, then write the clean-shutdown
        marker with the broker epoch (seed 002), then Halt."""
        b = self.broker
        if b.halted:
            return []
        b.halted = True
        effects = b.checkpoint_hw(force=True)
        for p in b.partitions.values():
            p.log.flush()
        effects.append(Fsync(None))
        effects.append(FileWrite(CLEAN_SHUTDOWN, CleanShutdown(self.ctx.broker_epoch)))
        effects.append(Fsync(CLEAN_SHUTDOWN))
        effects.append(Halt())
        return effects
