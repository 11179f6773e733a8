"""Brokers on the active controller: Kafka's ClusterControlManager
(metadata/src/main/java/org/apache/kafka/controller/ClusterControlManager.java)
with its BrokerHeartbeatManager (sessions, controlled shutdown) and
QuorumController's broker flows (seed 001 §1.2.2; seed 002 for unclean
shutdowns).

* Registration writes a fenced ``RegisterBrokerRecord`` whose offset is the
  new broker epoch; a broker whose previous incarnation still holds a live
  session is refused DUPLICATE_BROKER_REGISTRATION; one whose previous broker
  epoch is not its last registration's shut down uncleanly and leaves every
  ISR and ELR first (KIP-966).
* Heartbeats keep the session alive (judged on the monotonic clock), unfence
  a broker once it has caught up with its own registration, fence one that
  asks, and run controlled shutdown.
* A session that expires fences the broker at the next run of Kafka 4.4's
  periodic fencing task (every eighth of the session timeout,
  :mod:`.fencing_task`), one broker per run and 10 ms between runs that
  fence, in the order of Kafka 4.4's heartbeat tracker
  (:mod:`.heartbeat_tracker`); UnregisterBroker (KIP-631) removes a
  registration.

Kafka processes heartbeats in ReplicationControlManager.processBrokerHeartbeat
(it changes partitions); here the broker's side of each flow lives in this
manager and the partitions' side in :mod:`.replication_control`
(handle_broker_fenced, handle_broker_unfenced, ...), which this one calls.
"""

from __future__ import annotations

from ..effects import Effect
from ..messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Errors,
    NodeId,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from .fencing_task import FencingTaskSchedule, fence_stale_broker_period_ms
from .heartbeat_tracker import BrokerHeartbeatTracker, timeline_hash_map_order
from .replication_control import ReplicationControlManager
from .writer import MetadataWriter, addressed


class ClusterControlManager:
    def __init__(self, writer: MetadataWriter, replication: ReplicationControlManager) -> None:
        self.w = writer
        self.replication = replication
        #: (broker, broker epoch) -> monotonic time its session expires, kept
        #: in the order Kafka's BrokerHeartbeatTracker iterates them
        self.sessions = BrokerHeartbeatTracker()
        #: when Kafka's periodic fencing task runs next (monotonic time; None
        #: while inactive): a period after activation, then a period after a
        #: run that found nothing, 10 ms after one that took a session
        self.fencing = FencingTaskSchedule(fence_stale_broker_period_ms(writer.config.broker_session_timeout_ms))
        #: the metadata offset each broker last reported in a heartbeat, and
        #: for a broker in controlled shutdown the offset of the last record
        #: that moved its leaderships (BrokerHeartbeatManager; in memory only)
        self._metadata_offsets: dict[NodeId, int] = {}
        self._shutdown_offsets: dict[NodeId, int] = {}

    # ------------------------------------------------------------------
    # sessions
    # ------------------------------------------------------------------

    def activate(self) -> None:
        """Every live broker gets a fresh session: a new active controller
        cannot know when it last heartbeated. Kafka 4.4's
        ``ClusterControlManager.activate`` (ClusterControlManager.java:315-326)
        puts every unfenced registration into the tracker with one contact
        time, in the iteration order of its ``brokerRegistrations``: that
        order places brokers that share a bin of the tracker's map. The
        fencing task's schedule starts afresh, its first run a period later
        (:meth:`.FencingTaskSchedule.activate`)."""
        w = self.w
        self.sessions = BrokerHeartbeatTracker()
        self.fencing.activate(w.mono)
        deadline = w.mono + w.config.broker_session_timeout_ms
        for b in timeline_hash_map_order(w.image.brokers):
            reg = w.image.brokers[b]
            if not reg.fenced:
                self.sessions.touch((b, reg.broker_epoch), deadline)

    def deactivate(self) -> None:
        self.sessions = BrokerHeartbeatTracker()
        self.fencing.deactivate()
        self._metadata_offsets.clear()
        self._shutdown_offsets.clear()

    def next_fencing_run(self) -> int | None:
        """The monotonic time of the fencing task's run that will first find
        an expired session, if no heartbeat comes first (a wake-up): not the
        first session's deadline, but the first run at or after it."""
        first = self.sessions.next_deadline()
        return None if first is None else self.fencing.first_run_at_or_after(first)

    def expire_sessions(self, mono_now: int) -> bool:
        """A run of Kafka 4.4's fencing task, if one is due
        (``QuorumController``'s periodic ``maybeFenceStaleBroker``, every
        eighth of the session timeout: :mod:`.fencing_task`), so a session
        is fenced at the first run after its deadline, up to a period late.
        The run (``ReplicationControlManager.maybeFenceOneStaleBroker``,
        ReplicationControlManager.java:1769-1795): take the first expired
        session in the tracker's order (``BrokerHeartbeatTracker.maybeRemoveExpired``,
        BrokerHeartbeatTracker.java:111-117; seed 001 §1.2.2: no heartbeat
        within the session timeout) and fence its broker if the session is
        its current epoch's; an unknown broker's or an earlier epoch's
        session is only dropped. Either way the next run comes 10 ms later
        (``PeriodicTask.DEFAULT_IMMEDIATE_PERIOD_NS``), so brokers whose
        sessions expire together are fenced one by one, 10 ms apart, in the
        hash order of (id, epoch) (:mod:`.heartbeat_tracker`), and the
        partitions change between them. True if a session was taken.

        BrokerHeartbeatManager: a session is judged on the monotonic clock,
        so a wall-clock jump on the controller fences no broker."""
        work = self.w.work
        assert work is not None
        if not self.fencing.due(mono_now):
            return False
        run = self.next_fencing_run()
        if run is None or run > mono_now:
            # the runs due by now found nothing: the model did not wake for
            # them, and their only effect is the next run's time
            self.fencing.skip_idle_runs(mono_now)
            return False
        # the run at ``run`` finds the session expired: on time, this is it;
        # on a node that wakes late (paused), the one late run, as Kafka's
        # deferred event runs once when its thread gets to it
        key = self.sessions.remove_expired(mono_now)
        assert key is not None
        self.fencing.ran(mono_now, took_session=True)
        b, epoch = key
        reg = work.brokers.get(b)
        if reg is not None and reg.broker_epoch == epoch and not reg.fenced:
            self.fence(b, "session expired")
        return True

    def fence(self, broker: NodeId, reason: str) -> None:
        work = self.w.work
        assert work is not None
        reg = work.brokers[broker]
        if not reg.fenced:
            self.w.write(BrokerRegistrationChangeRecord(broker, reg.broker_epoch, fenced=True))
        self.replication.handle_broker_fenced(broker, f"fence {broker}: {reason}")

    # ------------------------------------------------------------------
    # registration
    # ------------------------------------------------------------------

    def register(self, req: BrokerRegistrationRequest, src: NodeId | None) -> list[Effect]:
        w = self.w
        dst = src if src is not None else req.broker_id
        if w.work is None:
            return [addressed(dst, BrokerRegistrationResponse(Errors.NOT_CONTROLLER))]
        failover = BrokerRegistrationResponse(Errors.NOT_CONTROLLER)
        existing = w.work.brokers.get(req.broker_id)
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            # a retry of a registration we already wrote
            w.answer_after_commit(dst, BrokerRegistrationResponse(Errors.NONE, existing.broker_epoch), failover)
            return []
        if existing is not None and not existing.fenced:
            if self.sessions.has_valid_session((req.broker_id, existing.broker_epoch), w.mono):
                # ClusterControlManager.registerBroker: another incarnation
                # still holds a live session (a broker restarted within the
                # session timeout, or a second process with the same id); it
                # registers once that session has expired and it is fenced
                return [addressed(dst, BrokerRegistrationResponse(Errors.DUPLICATE_BROKER_REGISTRATION))]
            # the session is over but the fencing timer has not run yet
            self.fence(req.broker_id, "re-registered after its session expired")
        unclean = existing is not None and req.previous_broker_epoch != existing.broker_epoch
        if unclean and w.config.elr_enabled():
            # KIP-966: an unclean shutdown may have lost data below the HW, so
            # the broker leaves ISR and ELR before its registration is written
            self.replication.handle_broker_unclean_shutdown(req.broker_id)
        epoch = w.next_offset  # seed 001 §1.2.2: the broker epoch is the record's offset
        w.write(
            RegisterBrokerRecord(
                req.broker_id, epoch, req.incarnation_id, req.endpoint, fenced=True, unclean_shutdown=unclean
            )
        )
        # no session yet: Kafka tracks a broker from its heartbeats, not its
        # registration (ClusterControlManager.registerBroker puts nothing in
        # the tracker; QuorumController.java:1990 does, per heartbeat)
        w.answer_after_commit(dst, BrokerRegistrationResponse(Errors.NONE, epoch), failover)
        return []

    def unregister(self, req: UnregisterBrokerRequest, src: NodeId | None) -> list[Effect]:
        """UnregisterBroker (KIP-631; Kafka's ReplicationControlManager
        .unregisterBroker and handleBrokerUnregistered): a broker that is not
        registered is BROKER_ID_NOT_REGISTERED; else every partition with it
        in its ISR or ELR changes as for a fencing, with the broker no
        acceptable leader, and an UnregisterBrokerRecord removes the
        registration. Its assigned replicas stay where they are: an operator
        moves them first (reassignment). A broker still running registers
        again at its next heartbeat (BROKER_ID_NOT_REGISTERED), as a new one."""
        w = self.w
        if w.work is None:
            return [addressed(src, UnregisterBrokerResponse(req.ref, Errors.NOT_CONTROLLER))]
        bid = req.broker_id
        reg = w.work.brokers.get(bid)
        if reg is None:
            return [addressed(src, UnregisterBrokerResponse(
                req.ref, Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {bid} is not currently registered"))]
        self.replication.handle_broker_unregistered(bid)
        w.write(UnregisterBrokerRecord(bid, reg.broker_epoch))
        # its session stays in the tracker until it expires, as in Kafka
        # (replay(UnregisterBrokerRecord) forgets the broker's heartbeat state,
        # not its tracker entry; an expiry pass then drops it)
        self._metadata_offsets.pop(bid, None)
        self._shutdown_offsets.pop(bid, None)
        w.answer_after_commit(src, UnregisterBrokerResponse(req.ref, Errors.NONE),
                              UnregisterBrokerResponse(req.ref, Errors.NOT_CONTROLLER))
        return []

    # ------------------------------------------------------------------
    # heartbeats and controlled shutdown
    # ------------------------------------------------------------------

    def heartbeat(self, req: BrokerHeartbeatRequest, src: NodeId | None) -> list[Effect]:
        w = self.w
        dst = src if src is not None else req.broker_id
        if w.work is None:
            return [addressed(dst, BrokerHeartbeatResponse(Errors.NOT_CONTROLLER))]
        # QuorumController.processBrokerHeartbeat (QuorumController.java:1990)
        # tracks the contact under the request's id and epoch before the event
        # checks them: a new key joins the tracker's map here
        self.sessions.touch((req.broker_id, req.broker_epoch), w.mono + w.config.broker_session_timeout_ms)
        reg = w.work.brokers.get(req.broker_id)
        if reg is None:
            return [addressed(dst, BrokerHeartbeatResponse(Errors.BROKER_ID_NOT_REGISTERED))]
        if reg.broker_epoch != req.broker_epoch:
            return [addressed(dst, BrokerHeartbeatResponse(Errors.STALE_BROKER_EPOCH))]
        self._metadata_offsets[req.broker_id] = req.metadata_offset
        committed = w.image.brokers.get(req.broker_id)
        registered = committed is not None and committed.broker_epoch == reg.broker_epoch
        # caught up: the broker has applied the metadata log up to its own registration
        caught_up = registered and req.metadata_offset >= reg.broker_epoch
        should_shut_down = False
        bid = req.broker_id
        if req.want_shutdown:
            if reg.fenced:
                should_shut_down = True
            else:
                should_shut_down = self._controlled_shutdown(bid, reg.broker_epoch, reg.in_controlled_shutdown)
        elif req.want_fence:
            if not reg.fenced:
                self.fence(bid, "asked to be fenced")
        elif reg.fenced and caught_up:
            w.write(BrokerRegistrationChangeRecord(bid, reg.broker_epoch, fenced=False))
            # seed 002: an unfenced ELR (or last-ISR) member may now lead a leaderless partition
            self.replication.handle_broker_unfenced(f"broker {bid} unfenced")
        now_reg = w.work.brokers[bid]
        resp = BrokerHeartbeatResponse(
            Errors.NONE, is_caught_up=caught_up, is_fenced=now_reg.fenced, should_shut_down=should_shut_down
        )
        w.answer_after_commit(dst, resp, BrokerHeartbeatResponse(Errors.NOT_CONTROLLER))
        return []

    def _controlled_shutdown(self, bid: NodeId, broker_epoch: int, already: bool) -> bool:
        """One heartbeat of a broker asking to shut down; True when it may
        (BrokerHeartbeatManager.calculateNextBrokerState, CONTROLLED_SHUTDOWN).

        Its leaderships move away and it leaves every ISR (it may join the
        ELR: a clean shutdown keeps its data). It may stop only once it leads
        nothing *and* every active broker has reported (in its heartbeats) a
        metadata offset at or past the last record that moved those
        leaderships, so the new leaders lead before the old one halts; then it
        is fenced."""
        w = self.w
        work = w.work
        assert work is not None
        end = w.next_offset
        if not already:
            w.write(BrokerRegistrationChangeRecord(bid, broker_epoch, in_controlled_shutdown=True))
        self.replication.handle_broker_fenced(bid, f"controlled shutdown of {bid}")
        if w.next_offset != end or bid not in self._shutdown_offsets:
            self._shutdown_offsets[bid] = w.next_offset - 1
        if any(p.leader == bid for p in work.partitions.values()):
            return False
        active = [b for b in work.brokers if b != bid and w.is_active_broker(b)]
        lowest = min((self._metadata_offsets.get(b, -1) for b in active), default=None)
        if lowest is not None and self._shutdown_offsets[bid] > lowest:
            return False
        w.write(BrokerRegistrationChangeRecord(bid, broker_epoch, fenced=True))
        self._shutdown_offsets.pop(bid, None)
        return True
