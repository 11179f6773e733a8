"""Unclean recovery (seed 002, KIP-966's unclean recovery manager).

KIP-966 describes the manager; Kafka 4.4 has no class of that name yet
(its ReplicationControlManager elects through PartitionChangeBuilder), so
this module follows the KIP and seed 002.

With ``unclean.recovery.manager.enabled`` (and KIP-966 on), a partition that
the election rules of :mod:`..partition_change` hand to unclean recovery is
not given an arbitrary live replica. The active controller sends
``GetReplicaLogInfoRequest`` to every active replica (and to replicas that
become active while it waits, re-sending to the silent ones), then elects
the one with the longest log: highest last leader epoch, then highest log
end offset, then assignment order. It elects when

* ``Aggressive``: every asked replica has answered, or
  ``unclean.recovery.timeout.ms`` has passed and some replica answered (so
  after the timeout the first answer elects);
* ``Balanced``: as Aggressive, and in any case not before every LastKnownELR
  member has answered (the rules start a Balanced recovery only once they
  are all active; if one is fenced again the recovery is dropped).

Answers are checked the seed's way: the broker epoch must still be the
broker's registered one (a reboot since makes its answer stale), and the
leader epoch the replica's metadata holds must not be newer than the one the
recovery started from. The election record says ``election:recovery`` (trace
``election`` with ``data_kind="recovery"``); the ISR is the new leader alone
and the partition is ``RECOVERING``. Nothing about a recovery in progress is
written to the metadata log: a new active controller starts over, since on
activation it looks at every leaderless partition.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..effects import Send
from ..messages import NO_LEADER, Errors, GetReplicaLogInfoRequest, GetReplicaLogInfoResponse, NodeId, TopicPartition
from ..metadata import PartitionRegistration
from ..partition_change import BALANCED, PartitionChangeBuilder
from .writer import MetadataWriter


@dataclass
class Recovery:
    """One unclean recovery in progress (seed 002). Kept only in the active
    controller's memory: a failover starts it again."""

    tp: TopicPartition
    strategy: str
    #: the partition's leader epoch when the recovery began
    leader_epoch: int
    correlation_id: int
    #: unclean.recovery.timeout.ms after the start
    deadline: int
    #: broker -> the broker epoch it had when asked
    asked: dict[NodeId, int]
    #: broker -> (last written leader epoch, log end offset)
    answers: dict[NodeId, tuple[int, int]]
    next_resend: int


class UncleanRecoveryManager:
    """The recoveries in progress on the active controller."""

    def __init__(self, writer: MetadataWriter) -> None:
        self.w = writer
        self.recoveries: dict[TopicPartition, Recovery] = {}
        self._ids = 0

    @property
    def resend_ms(self) -> int:
        """Ask a silent replica again after this long: the simulator drops
        what TCP would only delay, and a fenced broker leaves the wait anyway."""
        return max(1000, 2 * self.w.config.broker_heartbeat_interval_ms)

    def clear(self) -> None:
        self.recoveries.clear()

    def next_deadline(self) -> int | None:
        """The earliest monotonic time a recovery needs a look (a deadline
        already passed is not a wake-up any more: the first answer elects)."""
        if not self.recoveries:
            return None
        mono = self.w.mono
        return min(min(r.next_resend, r.deadline) if r.deadline > mono else r.next_resend
                   for r in self.recoveries.values())

    def maybe_start(self, b: PartitionChangeBuilder, epoch: int) -> None:
        """Start a recovery for the partition ``b`` changed, if the election
        rules asked for one and none is running; ``epoch`` is the leader
        epoch after the change (going leaderless bumps it)."""
        if not b.needs_recovery or b.tp in self.recoveries:
            return
        assert b.recovery_strategy is not None
        self._ids += 1
        now = self.w.mono
        self.recoveries[b.tp] = Recovery(
            tp=b.tp,
            strategy=b.recovery_strategy,
            leader_epoch=epoch,
            correlation_id=self._ids,
            deadline=now + self.w.config.unclean_recovery_timeout_ms,
            asked={},
            answers={},
            next_resend=now + self.resend_ms,
        )

    def _ask(self, rec: Recovery, broker: NodeId) -> None:
        self.w.outbox.append(Send(broker, GetReplicaLogInfoRequest(broker, (rec.tp,), rec.correlation_id)))

    def on_replica_log_info(self, msg: GetReplicaLogInfoResponse) -> None:
        """Record a replica's answer, if it is still the one asked for."""
        if self.w.work is None:
            return
        reg = self.w.work.brokers.get(msg.broker_id)
        for info in msg.partitions:
            rec = self.recoveries.get(info.tp)
            if rec is None or rec.correlation_id != msg.correlation_id or msg.broker_id not in rec.asked:
                continue  # no such recovery (any more): a late answer
            if reg is None or msg.broker_epoch != reg.broker_epoch or msg.broker_epoch != rec.asked[msg.broker_id]:
                continue  # seed 002: the broker rebooted since it was asked
            if info.error != Errors.NONE:
                continue  # no log to offer yet: asked again at the next resend
            if info.current_leader_epoch > rec.leader_epoch:
                continue  # seed 002: a leader epoch newer than this recovery's fences it
            rec.answers[msg.broker_id] = (info.last_written_leader_epoch, info.log_end_offset)

    def drive(self, mono: int) -> None:
        """Move every recovery on: keep the set of asked replicas equal to the
        active ones, drop recoveries the rules no longer call for, and elect
        the longest log once the strategy's wait is over."""
        w = self.w
        assert w.work is not None
        for tp in sorted(self.recoveries):
            rec = self.recoveries[tp]
            p = w.work.partitions.get(tp)
            if p is None or p.leader != NO_LEADER:
                del self.recoveries[tp]
                continue
            b = w.builder(tp, "unclean recovery")
            change = b.build()
            if change is not None and change.election is not None:
                # an ISR or ELR member came back: a clean election instead
                del self.recoveries[tp]
                w.write(change.record)
                continue
            if not b.needs_recovery:
                del self.recoveries[tp]  # e.g. Balanced: a LastKnownELR member was fenced again
                continue
            self._update_asked(rec, p)
            leader = self._choice(rec, p, mono)
            if leader is not None:
                del self.recoveries[tp]
                self._elect(rec, leader)
                continue
            if mono >= rec.next_resend:
                for r in rec.asked:
                    if r not in rec.answers:
                        self._ask(rec, r)
                rec.next_resend = mono + self.resend_ms

    def _update_asked(self, rec: Recovery, p: PartitionRegistration) -> None:
        """Forget replicas no longer active (or rebooted), ask the newly active."""
        w = self.w
        assert w.work is not None
        for r in list(rec.asked):
            reg = w.work.brokers.get(r)
            if not w.is_active_broker(r) or reg is None or reg.broker_epoch != rec.asked[r]:
                del rec.asked[r]
                rec.answers.pop(r, None)
        for r in p.replicas:
            if r not in rec.asked and w.is_active_broker(r):
                rec.asked[r] = w.work.brokers[r].broker_epoch
                self._ask(rec, r)

    def _elect(self, rec: Recovery, leader: NodeId) -> None:
        # the answers go into the record's reason: the metadata log shows why this leader
        heard = " ".join(f"{r}:{e}/{leo}" for r, (e, leo) in sorted(rec.answers.items()))
        reason = f"unclean recovery ({rec.strategy}; epoch/leo {heard})"
        change = self.w.builder(rec.tp, reason).set_recovery_leader(leader).build()
        if change is not None:
            self.w.write(change.record)

    @staticmethod
    def _choice(rec: Recovery, p: PartitionRegistration, mono: int) -> NodeId | None:
        """The longest log once the strategy's wait is over, else None."""
        if not rec.answers:
            return None
        if rec.strategy == BALANCED and not all(r in rec.answers for r in p.last_known_elr):
            return None
        if mono < rec.deadline and not all(r in rec.answers for r in rec.asked):
            return None
        order = {r: i for i, r in enumerate(p.replicas)}
        # seed 002: the highest leader epoch, then the longest log end offset
        return max(rec.answers, key=lambda r: (rec.answers[r][0], rec.answers[r][1], -order.get(r, 0)))
