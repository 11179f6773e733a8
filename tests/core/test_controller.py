"""The active controller: registration, heartbeats and fencing, AlterPartition
validation (seeds 000/001), ELR and unclean shutdown (seed 002), unclean
election, controlled shutdown, failover. Brokers are played by the test: it
sends their requests and reads the controller's answers off the loop."""

from __future__ import annotations

import random

import pytest

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.controller import ControllerRole
from reference_impl.core.controller.fencing_task import fence_stale_broker_period_ms
from reference_impl.core.messages import (
    NO_LEADER,
    AllocateProducerIdsRequest,
    AlterPartitionItem,
    AlterPartitionRequest,
    BrokerEndpoint,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateTopicsRequest,
    Errors,
    NewTopic,
    TopicPartition,
)
from reference_impl.core.metadata import RECOVERED, RECOVERING
from reference_impl.core.raft.testkit import Loop
from reference_impl.core.storage import StoredState

TP = TopicPartition("t", 0)
CFG = ProtocolConfig()


class Cluster:
    def __init__(self, voters=(100,), config: ProtocolConfig = CFG, seed: int = 0) -> None:
        self.config = config
        self.voters = voters
        self.loop = Loop(latency=1)
        self.seed = seed
        for v in voters:
            self.loop.add(v, self._build(v, StoredState()))
        assert self.loop.run_until_true(lambda: self.active_id() is not None, 30_000)
        self.epochs: dict[int, int] = {}
        self.incarnations: dict[int, str] = {}
        self._inc = 0

    def _build(self, v: int, st: StoredState) -> ControllerRole:
        return ControllerRole(v, self.config, self.voters, st, random.Random(self.seed * 1000 + v))

    # -- controllers ------------------------------------------------------------

    def ctl(self, v: int) -> ControllerRole:
        return self.loop.nodes[v]  # type: ignore[return-value]

    def active_id(self) -> int | None:
        act = [v for v in self.voters if v not in self.loop.down and self.ctl(v).is_active]
        return act[0] if len(act) == 1 else None

    @property
    def active(self) -> ControllerRole:
        a = self.active_id()
        assert a is not None
        return self.ctl(a)

    # -- brokers (played by the test) ----------------------------------------------

    def ask(self, req, src: int | None, to: int | None = None, limit: int = 5000):
        to = self.active_id() if to is None else to
        n_sent, n_rep = len(self.loop.sent), len(self.loop.replies)
        self.loop.deliver(to, req, src)

        def answer():
            if src is None:
                return next((m for (_t, _n, m) in self.loop.replies[n_rep:]), None)
            return next((m for (_t, s, d, m) in self.loop.sent[n_sent:] if d == src and s == to), None)

        self.loop.run_until_true(lambda: answer() is not None, limit)
        resp = answer()
        assert resp is not None, f"no answer to {req}"
        return resp

    def register(self, b: int, previous: int | None = None, new_incarnation: bool = True):
        """Register ``b``. A new incarnation of a broker that is still
        unfenced is a restart: as in Kafka (DUPLICATE_BROKER_REGISTRATION
        while the old session lives) it registers once the controller has
        fenced the old one, the other unfenced brokers heartbeating meanwhile."""
        if new_incarnation or b not in self.incarnations:
            self._inc += 1
            self.incarnations[b] = f"inc-{b}-{self._inc}"
            reg = self.active.image.brokers.get(b)
            if reg is not None and not reg.fenced:
                others = [o for o, r in self.active.image.brokers.items() if o != b and not r.fenced]
                # the session ends at its deadline, and the fencing task that
                # sees it runs up to one period later (fencing_task.py)
                period = fence_stale_broker_period_ms(self.config.broker_session_timeout_ms)
                self.keep_alive(self.config.broker_session_timeout_ms + period + 1000, alive=others)
                assert self.active.image.brokers[b].fenced
        prev = self.epochs.get(b, -1) if previous is None else previous
        resp = self.ask(
            BrokerRegistrationRequest(b, self.incarnations[b], BrokerEndpoint(b, "127.0.0.1", 9000 + b), prev), b
        )
        assert resp.error == Errors.NONE
        self.epochs[b] = resp.broker_epoch
        return resp

    def heartbeat(self, b: int, caught_up: bool = True, **kw):
        offset = self.active.image.offset if caught_up else -1
        return self.ask(BrokerHeartbeatRequest(b, self.epochs[b], offset, **kw), b)

    def shut_down(self, b: int):
        """A controlled shutdown: ``b`` heartbeats asking to shut down, the
        other active brokers heartbeat (reporting their metadata offsets)
        between its requests, until it is told it may stop."""
        for _ in range(5):
            resp = self.heartbeat(b, want_shutdown=True)
            if resp.should_shut_down:
                return resp
            for o, reg in self.active.image.brokers.items():
                if o != b and not reg.fenced and not reg.in_controlled_shutdown:
                    self.heartbeat(o)
        raise AssertionError(f"broker {b} was never allowed to shut down")

    def start_brokers(self, *ids: int) -> None:
        for b in ids:
            self.register(b)
        for b in ids:
            resp = self.heartbeat(b)
            assert resp.is_caught_up and not resp.is_fenced

    def keep_alive(self, ms: int, alive) -> None:
        """Let ``ms`` pass while the brokers in ``alive`` heartbeat every second."""
        end = self.loop.now + ms
        while self.loop.now < end:
            for b in alive:
                self.heartbeat(b)
            self.loop.run_until(min(end, self.loop.now + 1000))

    def create(self, name="t", partitions=1, rf=3, configs=(), assignments=None):
        resp = self.ask(CreateTopicsRequest("ref", (NewTopic(name, partitions, rf, tuple(configs), assignments),)), 1)
        return resp.results[0]

    def part(self, tp=TP):
        return self.active.image.partitions[tp]

    def alter(self, b, isr, tp=TP, partition_epoch=None, leader_epoch=None, epochs=None, state=RECOVERED, broker_epoch=None):
        p = self.part(tp)
        members = tuple((m, (epochs or {}).get(m, self.epochs.get(m, -1))) for m in isr)
        item = AlterPartitionItem(
            tp,
            p.leader_epoch if leader_epoch is None else leader_epoch,
            p.partition_epoch if partition_epoch is None else partition_epoch,
            members,
            state,
        )
        be = self.epochs[b] if broker_epoch is None else broker_epoch
        return self.ask(AlterPartitionRequest(b, be, 7, (item,)), b)

    def traces(self, kind: str, node: int | None = None):
        return [ev.data for _t, n, ev in self.loop.traces if ev.kind == kind and (node is None or n == node)]


def three_brokers(config=CFG, topic_configs=(), assignments=((0, 1, 2),)) -> Cluster:
    c = Cluster(config=config)
    c.start_brokers(0, 1, 2)
    r = c.create("t", configs=topic_configs, assignments=assignments)
    assert r.error == Errors.NONE
    return c


# ---------------------------------------------------------------------------
# registration, heartbeats, fencing
# ---------------------------------------------------------------------------


def test_broker_epoch_is_the_offset_of_its_registration_record():
    c = Cluster()
    resp = c.register(0)
    entries = c.active.committed_entries(-1)
    rec = next(e for e in entries if type(e.record).__name__ == "RegisterBrokerRecord")
    assert resp.broker_epoch == rec.offset == rec.record.broker_epoch


def test_registration_retry_with_same_incarnation_returns_the_same_epoch():
    c = Cluster()
    first = c.register(0)
    again = c.register(0, new_incarnation=False)
    assert again.broker_epoch == first.broker_epoch


def test_a_new_incarnation_is_refused_while_the_old_session_lives_duplicate_broker_registration():
    """ClusterControlManager.registerBroker: another incarnation of an
    unfenced broker with a live session is DUPLICATE_BROKER_REGISTRATION (a
    restart within the session timeout, or two processes with one id); once
    the session has expired and the broker is fenced it registers. A fenced
    broker (here after a controlled shutdown) has no session to wait for."""
    c = Cluster()
    c.start_brokers(0, 1)
    ep = BrokerEndpoint(0, "127.0.0.1", 9000)
    r = c.ask(BrokerRegistrationRequest(0, "inc-0-new", ep, c.epochs[0]), 0)
    assert r.error == Errors.DUPLICATE_BROKER_REGISTRATION and not c.active.image.brokers[0].fenced
    c.keep_alive(CFG.broker_session_timeout_ms + 1000, alive=(1,))
    assert c.active.image.brokers[0].fenced
    r = c.ask(BrokerRegistrationRequest(0, "inc-0-new", ep, c.epochs[0]), 0)
    assert r.error == Errors.NONE and r.broker_epoch > c.epochs[0]
    assert c.shut_down(1).should_shut_down
    r = c.ask(BrokerRegistrationRequest(1, "inc-1-new", BrokerEndpoint(1, "127.0.0.1", 9001), c.epochs[1]), 1)
    assert r.error == Errors.NONE


def test_broker_is_unfenced_only_once_caught_up_with_metadata():
    c = Cluster()
    c.register(0)
    lagging = c.heartbeat(0, caught_up=False)
    assert lagging.is_fenced and not lagging.is_caught_up
    assert c.active.image.brokers[0].fenced
    ok = c.heartbeat(0)
    assert ok.is_caught_up and not ok.is_fenced
    assert not c.active.image.brokers[0].fenced
    assert c.traces("broker_unfenced") == [{"broker": 0, "broker_epoch": c.epochs[0]}]


def test_heartbeat_with_stale_broker_epoch_is_rejected():
    c = Cluster()
    c.start_brokers(0)
    old = c.epochs[0]
    c.register(0, previous=old)
    resp = c.ask(BrokerHeartbeatRequest(0, old, 10**6), 0)
    assert resp.error == Errors.STALE_BROKER_EPOCH


def test_fencing_on_heartbeat_timeout_elects_new_leader_from_isr():
    c = three_brokers()
    p0 = c.part()
    assert p0.leader == 0 and p0.isr == (0, 1, 2)
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(1, 2))
    assert c.active.image.brokers[0].fenced
    p = c.part()
    assert p.leader == 1 and p.isr == (1, 2)
    assert p.leader_epoch == p0.leader_epoch + 1 and p.partition_epoch > p0.partition_epoch
    assert {"broker": 0, "broker_epoch": c.epochs[0]} in c.traces("broker_fenced")
    assert {"tp": "t-0", "data_kind": "clean", "leader": 1, "leader_epoch": p.leader_epoch} in c.traces("election")


def test_fenced_follower_leaves_isr_without_leader_change():
    c = three_brokers()
    le = c.part().leader_epoch
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(0, 1))
    p = c.part()
    assert p.leader == 0 and p.isr == (0, 1) and p.leader_epoch == le


# ---------------------------------------------------------------------------
# CreateTopics
# ---------------------------------------------------------------------------


def test_create_topic_spreads_replicas_over_unfenced_brokers():
    c = Cluster()
    c.start_brokers(0, 1, 2)
    assert c.create("a", partitions=3, rf=2).error == Errors.NONE
    parts = [c.part(TopicPartition("a", i)) for i in range(3)]
    assert sorted(p.leader for p in parts) == [0, 1, 2]
    for p in parts:
        assert len(p.replicas) == 2 and len(set(p.replicas)) == 2 and p.isr == p.replicas
        assert p.leader == p.replicas[0] and p.leader_epoch == 0 and p.partition_epoch == 0


def test_create_topic_errors():
    c = Cluster()
    c.start_brokers(0, 1)
    assert c.create("a", rf=2).error == Errors.NONE
    assert c.create("a", rf=2).error == Errors.TOPIC_ALREADY_EXISTS
    assert c.create("b", rf=3).error == Errors.INVALID_REPLICATION_FACTOR  # only 2 unfenced brokers
    assert c.create("c", rf=0).error == Errors.INVALID_REPLICATION_FACTOR
    assert c.create("d", partitions=0, rf=1).error == Errors.INVALID_PARTITIONS
    assert c.create("e", rf=1, configs=(("min.insync.replicas", "zero"),)).error == Errors.INVALID_CONFIG


def test_create_topic_keeps_per_topic_configs():
    c = Cluster()
    c.start_brokers(0, 1, 2)
    cfg = (("min.insync.replicas", "2"), ("unclean.leader.election.enable", "true"))
    assert c.create("a", rf=3, configs=cfg).error == Errors.NONE
    assert c.active.image.topics["a"] == dict(cfg)


def test_create_topics_from_a_client_on_a_controller_only_node_gets_a_reply():
    c = Cluster()
    c.start_brokers(0)
    resp = c.ask(CreateTopicsRequest("client-7", (NewTopic("x", 1, 1),)), None)
    # answered through Reply (the loop's replies), not a Send to a node
    assert resp.ref == "client-7" and resp.results[0].error == Errors.NONE
    assert any(m is resp for (_t, _n, m) in c.loop.replies)


# ---------------------------------------------------------------------------
# AlterPartition validation (seed 000 ReplicationControlManager, seed 001 §2.9.2)
# ---------------------------------------------------------------------------


def test_alter_partition_shrink_commits_and_bumps_only_partition_epoch():
    c = three_brokers()
    p0 = c.part()
    resp = c.alter(0, [0, 1])
    (r,) = resp.results
    assert resp.error == Errors.NONE and r.error == Errors.NONE
    assert r.isr == (0, 1) and r.partition_epoch == p0.partition_epoch + 1 and r.leader_epoch == p0.leader_epoch
    assert c.part().isr == (0, 1)


def test_alter_partition_with_stale_partition_epoch_is_invalid_update_version():
    c = three_brokers()
    pe = c.part().partition_epoch
    assert c.alter(0, [0, 1]).results[0].error == Errors.NONE
    assert c.alter(0, [0, 1, 2], partition_epoch=pe).results[0].error == Errors.INVALID_UPDATE_VERSION
    assert c.part().isr == (0, 1)


def test_zombie_leader_alter_partition_is_fenced_by_its_stale_leader_epoch():
    # broker 0 leads, loses its controller session and is replaced; it still
    # believes it leads and proposes an ISR from its stale partition state.
    # Both its epochs are stale; the leader epoch is checked first
    # (ReplicationControlManager.validateAlterPartitionData)
    c = three_brokers()
    stale = c.part()
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(1, 2))
    assert c.part().leader == 1
    c.heartbeat(0)  # back in session (same broker epoch), unfenced again
    resp = c.alter(0, [0, 1, 2], partition_epoch=stale.partition_epoch, leader_epoch=stale.leader_epoch)
    assert resp.results[0].error == Errors.FENCED_LEADER_EPOCH
    assert c.part().leader == 1 and c.part().isr == (1, 2)


def test_alter_partition_with_epochs_ahead_of_the_controller_is_not_controller():
    """A proposal built on metadata this controller has not applied yet: the
    controller is behind, so the answer is NOT_CONTROLLER (which the leader
    retries), not a fencing error."""
    c = three_brokers()
    p = c.part()
    assert c.alter(0, [0, 1], leader_epoch=p.leader_epoch + 1).results[0].error == Errors.NOT_CONTROLLER
    assert c.alter(0, [0, 1], partition_epoch=p.partition_epoch + 1).results[0].error == Errors.NOT_CONTROLLER
    assert c.part().isr == p.isr


def test_alter_partition_from_a_non_leader_is_invalid_request_before_the_partition_epoch_check():
    c = three_brokers()
    pe = c.part().partition_epoch
    assert c.alter(0, [0, 1]).results[0].error == Errors.NONE
    # broker 1 follows; its stale partition epoch is not what refuses it
    assert c.alter(1, [0, 1], partition_epoch=pe).results[0].error == Errors.INVALID_REQUEST
    assert c.part().isr == (0, 1)


def test_alter_partition_with_stale_leader_epoch_is_fenced_leader_epoch():
    c = three_brokers()
    p = c.part()
    r = c.alter(0, [0, 1], leader_epoch=p.leader_epoch - 1).results[0]
    assert r.error == Errors.FENCED_LEADER_EPOCH


def test_manual_assignments_are_checked_as_kafka_does_invalid_replica_assignment():
    """ReplicationControlManager.validateManualPartitionAssignment and
    createTopic: an empty list, an unregistered or repeated broker, a replica
    count unlike the first partition's, or no active replica at all is
    INVALID_REPLICA_ASSIGNMENT, and nothing is written."""
    c = Cluster()
    c.start_brokers(0, 1, 2)
    for bad, why in (
        (((0, 1), ()), "an empty replica list"),
        (((0, 7),), "broker 7, but no such broker is registered"),
        (((1, 1),), "the broker 1 more than once"),
        (((0, 1), (0, 1, 2)), "a partition with 3 replica(s)"),
    ):
        r = c.create("t", assignments=bad)
        assert r.error == Errors.INVALID_REPLICA_ASSIGNMENT and why in r.message, bad
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(0,))  # 1 and 2 fenced
    r = c.create("t", assignments=((1, 2),))
    assert r.error == Errors.INVALID_REPLICA_ASSIGNMENT and "fenced or in controlled shutdown" in r.message
    assert "t" not in {tp.topic for tp in c.active.image.partitions}
    ok = c.create("t", assignments=((1, 0),))
    assert ok.error == Errors.NONE
    assert (c.part().leader, c.part().isr) == (0, (0,))


def test_alter_partition_isr_must_be_subset_of_replicas_and_contain_leader():
    c = Cluster()
    c.start_brokers(0, 1, 2, 3)
    assert c.create("t", assignments=((0, 1, 2),)).error == Errors.NONE
    assert c.alter(0, [0, 1, 3]).results[0].error == Errors.INVALID_REQUEST  # 3 is not a replica
    assert c.alter(0, [1, 2]).results[0].error == Errors.INVALID_REQUEST  # leader missing
    assert c.alter(1, [0, 1]).results[0].error == Errors.INVALID_REQUEST  # requester is not the leader
    assert c.part().isr == (0, 1, 2)


def test_alter_partition_member_must_be_alive_unfenced_and_epoch_matching():
    c = three_brokers()
    c.alter(0, [0, 1])
    # stale broker epoch of the proposed member
    assert c.alter(0, [0, 1, 2], epochs={2: c.epochs[2] - 1}).results[0].error == Errors.INELIGIBLE_REPLICA
    # a fenced member
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(0, 1))
    assert c.active.image.brokers[2].fenced
    assert c.alter(0, [0, 1, 2]).results[0].error == Errors.INELIGIBLE_REPLICA
    c.heartbeat(2)
    assert c.alter(0, [0, 1, 2]).results[0].error == Errors.NONE


def test_alter_partition_member_after_controlled_shutdown_is_ineligible():
    # once the controlled shutdown completes the member is both shutting down and fenced
    c = three_brokers()
    c.alter(0, [0, 1])
    resp = c.shut_down(2)
    assert resp.should_shut_down
    assert c.alter(0, [0, 1, 2]).results[0].error == Errors.INELIGIBLE_REPLICA


def test_alter_partition_from_stale_broker_epoch_is_rejected_at_top_level():
    c = three_brokers()
    resp = c.alter(0, [0, 1], broker_epoch=c.epochs[0] - 1)
    assert resp.error == Errors.STALE_BROKER_EPOCH and resp.results == ()


def test_alter_partition_unknown_partition():
    c = three_brokers()
    p = c.part()
    item = AlterPartitionItem(TopicPartition("nope", 0), p.leader_epoch, p.partition_epoch, ((0, c.epochs[0]),))
    resp = c.ask(AlterPartitionRequest(0, c.epochs[0], 1, (item,)), 0)
    assert resp.results[0].error == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_not_controller_answers_on_a_non_active_quorum_member():
    c = Cluster(voters=(100, 101, 102), seed=2)
    standby = next(v for v in c.voters if v != c.active_id())
    resp = c.ask(BrokerRegistrationRequest(0, "x", BrokerEndpoint(0, "h", 1)), 0, to=standby)
    assert resp.error == Errors.NOT_CONTROLLER
    assert c.ctl(standby).leader_id == c.active_id()


# ---------------------------------------------------------------------------
# KIP-966: ELR, unclean shutdown (seed 002)
# ---------------------------------------------------------------------------

MIN2 = (("min.insync.replicas", "2"),)


def test_elr_last_replica_standing_scenario_T0_to_T4_elects_the_elr_member():
    """Seed 002 motivation: ISR(0,1,2), min ISR 2, broker 2 the leader."""
    c = three_brokers(topic_configs=MIN2, assignments=((2, 1, 0),))
    assert c.part().leader == 2
    # T0: broker 0 drops out of the ISR; ISR stays at min ISR, no ELR
    c.alter(2, [2, 1])
    assert c.part().isr == (2, 1) and c.part().elr == ()
    # T1: broker 1 is cut off too and fenced; ISR below min ISR -> 1 joins the ELR
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(2,))
    p = c.part()
    assert p.isr == (2,) and p.elr == (1,) and p.leader == 2
    # T2: broker 2 crashes uncleanly (session expires): ISR empties, 2 joins the ELR
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=())
    p = c.part()
    assert p.isr == () and p.leader == NO_LEADER and set(p.elr) == {1, 2}
    # T3: brokers 0 and 1 come back; 1 (ELR, has everything up to the HW) is elected
    c.heartbeat(0)
    c.heartbeat(1)
    p = c.part()
    assert p.leader == 1 and p.isr == (1,) and p.elr == (2,)
    assert c.traces("election")[-1] == {"tp": "t-0", "data_kind": "elr", "leader": 1, "leader_epoch": p.leader_epoch}
    # T4: broker 2 restarts after its unclean shutdown: removed from the ELR
    c.register(2, previous=-1)
    c.heartbeat(2)
    p = c.part()
    assert p.leader == 1 and p.elr == () and p.last_known_elr == (2,) and 2 not in p.isr


def test_without_kip966_the_last_replica_standing_is_re_elected_after_unclean_restart():
    """The same T0-T4 with kip966=off: broker 2 keeps the ISR to itself and leads again."""
    c = three_brokers(config=CFG.with_variants(kip966=False), topic_configs=MIN2, assignments=((2, 1, 0),))
    c.alter(2, [2, 1])
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(2,))
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=())
    p = c.part()
    assert p.isr == (2,) and p.leader == NO_LEADER and p.elr == ()
    c.heartbeat(0)
    c.heartbeat(1)
    assert c.part().leader == NO_LEADER  # neither 0 nor 1 is in the ISR
    c.register(2, previous=-1)
    c.heartbeat(2)
    p = c.part()
    assert p.leader == 2 and p.isr == (2,)


def test_unclean_registration_removes_broker_from_isr_and_elr():
    c = three_brokers(topic_configs=(("min.insync.replicas", "3"),))
    c.alter(0, [0, 1])  # below min ISR 3: 2 joins the ELR
    assert c.part().elr == (2,)
    c.register(2, previous=-1)  # crashed: no clean-shutdown marker
    p = c.part()
    assert p.elr == () and p.last_known_elr == (2,)
    c.register(1, previous=-1)  # 1 is in the ISR and restarts uncleanly
    p = c.part()
    assert 1 not in p.isr and 1 not in p.elr


def test_clean_shutdown_keeps_broker_in_elr():
    c = three_brokers(topic_configs=(("min.insync.replicas", "3"),))
    resp = c.shut_down(2)
    assert resp.should_shut_down
    p = c.part()
    assert p.isr == (0, 1) and p.elr == (2,)
    c.register(2)  # previous broker epoch matches: a clean restart
    assert c.part().elr == (2,)


def test_elr_cleared_when_isr_grows_back_to_min_isr():
    c = three_brokers(topic_configs=MIN2)
    c.alter(0, [0])
    assert c.part().elr == (1, 2)
    c.alter(0, [0, 1])
    assert c.part().elr == () and c.part().last_known_elr == ()


# ---------------------------------------------------------------------------
# unclean election and RECOVERING
# ---------------------------------------------------------------------------


def _lose_isr(c: Cluster) -> None:
    """ISR shrinks to broker 0, which then dies: only 1 and 2 stay alive."""
    c.alter(0, [0])
    c.keep_alive(CFG.broker_session_timeout_ms + 2000, alive=(1, 2))


def test_no_unclean_election_when_not_allowed():
    c = three_brokers(config=CFG.with_variants(kip966=False))
    _lose_isr(c)
    p = c.part()
    assert p.leader == NO_LEADER and p.isr == (0,)


def test_unclean_election_when_topic_allows_it_sets_recovering():
    c = three_brokers(config=CFG.with_variants(kip966=False), topic_configs=(("unclean.leader.election.enable", "true"),))
    _lose_isr(c)
    p = c.part()
    assert p.leader == 1 and p.isr == (1,) and p.leader_recovery_state == RECOVERING
    assert c.traces("election")[-1]["data_kind"] == "unclean"


def test_unclean_election_variant_forces_it_for_every_topic():
    c = three_brokers(config=CFG.with_variants(kip966=False, unclean_election=True))
    _lose_isr(c)
    assert c.part().leader == 1 and c.part().leader_recovery_state == RECOVERING


def test_recovering_partition_refuses_isr_growth_until_recovered():
    c = three_brokers(config=CFG.with_variants(kip966=False, unclean_election=True))
    _lose_isr(c)
    assert c.alter(1, [1, 2], state=RECOVERING).results[0].error == Errors.INVALID_REQUEST
    r = c.alter(1, [1], state=RECOVERED).results[0]
    assert r.error == Errors.NONE and r.leader_recovery_state == RECOVERED
    assert c.alter(1, [1, 2], state=RECOVERING).results[0].error == Errors.INVALID_REQUEST  # never back
    assert c.alter(1, [1, 2]).results[0].error == Errors.NONE


def test_with_elr_a_fenced_elr_member_blocks_unclean_election_only_when_disallowed():
    c = three_brokers(topic_configs=MIN2)
    _lose_isr(c)  # 1, 2 joined the ELR when the ISR shrank to [0]; 0 then fenced
    p = c.part()
    # 1 and 2 are alive ELR members: a clean ELR election happened at once
    assert p.leader in (1, 2) and c.traces("election")[-1]["data_kind"] == "elr"


# ---------------------------------------------------------------------------
# controlled shutdown
# ---------------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_then_allows_shutdown_once_active_brokers_caught_up():
    """BrokerHeartbeatManager.calculateNextBrokerState: leadership moves at
    the first request, but the broker may stop only once every active broker
    has reported a metadata offset past the records that moved it, so the new
    leader leads before the old one halts."""
    c = three_brokers()
    assert c.part().leader == 0
    first = c.heartbeat(0, want_shutdown=True)
    assert not first.should_shut_down and not first.is_fenced
    p = c.part()
    assert p.leader == 1 and 0 not in p.isr and c.active.image.brokers[0].in_controlled_shutdown
    c.heartbeat(1)
    assert not c.heartbeat(0, want_shutdown=True).should_shut_down  # broker 2 has not reported yet
    c.heartbeat(2, caught_up=False)  # reports an old offset
    assert not c.heartbeat(0, want_shutdown=True).should_shut_down
    c.heartbeat(2)
    resp = c.heartbeat(0, want_shutdown=True)
    assert resp.should_shut_down and resp.is_fenced
    reg = c.active.image.brokers[0]
    assert reg.in_controlled_shutdown and reg.fenced


def test_controlled_shutdown_resumes_on_a_new_controller_after_failover():
    """Which brokers have reported past the records that moved a shutting-down
    broker's leadership lives in the active controller's memory (Kafka's
    BrokerHeartbeatManager, rebuilt empty on a new active controller). After
    a failover mid-shutdown the new controller has replayed the committed
    records, so the broker is still in controlled shutdown and leads
    nothing; its next shutdown heartbeat starts the wait again from the new
    controller's log end, and it may stop only once every other active
    broker has reported that far to the new controller."""
    c = Cluster(voters=(100, 101, 102), seed=4)
    c.start_brokers(0, 1, 2)
    assert c.create("t", assignments=((0, 1, 2),)).error == Errors.NONE
    assert c.part().leader == 0
    assert not c.heartbeat(0, want_shutdown=True).should_shut_down
    moved = c.part()
    assert moved.leader != 0 and 0 not in moved.isr
    old = c.active_id()
    c.loop.isolate(old)
    assert c.loop.run_until_true(lambda: c.active_id() not in (None, old), 30_000)
    assert c.active.image.brokers[0].in_controlled_shutdown
    assert c.part().leader == moved.leader and 0 not in c.part().isr  # not moved back
    resp = c.heartbeat(0, want_shutdown=True)
    assert not resp.should_shut_down and not resp.is_fenced  # nobody has reported to this controller yet
    c.heartbeat(1)
    assert not c.heartbeat(0, want_shutdown=True).should_shut_down  # broker 2 has not
    c.heartbeat(2, caught_up=False)
    assert not c.heartbeat(0, want_shutdown=True).should_shut_down  # nor past the new log end
    c.heartbeat(2)
    resp = c.heartbeat(0, want_shutdown=True)
    assert resp.should_shut_down and resp.is_fenced
    assert c.active.image.brokers[0].fenced and c.part().leader == moved.leader


# ---------------------------------------------------------------------------
# producer ids, traces
# ---------------------------------------------------------------------------


def test_producer_id_blocks_never_overlap():
    c = three_brokers()
    a = c.ask(AllocateProducerIdsRequest(0, c.epochs[0]), 0)
    b = c.ask(AllocateProducerIdsRequest(1, c.epochs[1]), 1)
    assert a.error == b.error == Errors.NONE
    assert a.producer_id_start + a.producer_id_len <= b.producer_id_start


def test_partition_metadata_trace_has_exactly_the_documented_fields():
    c = three_brokers()
    ev = c.traces("partition_metadata")[-1]
    assert set(ev) == {
        "tp", "leader", "leader_epoch", "partition_epoch", "replicas", "isr", "elr", "last_known_elr", "recovery_state",
        "last_known_leader", "adding_replicas", "removing_replicas",
    }
    assert ev["tp"] == "t-0" and ev["isr"] == [0, 1, 2]


# ---------------------------------------------------------------------------
# failover
# ---------------------------------------------------------------------------


def test_controller_failover_keeps_committed_metadata_and_fencing_state():
    c = Cluster(voters=(100, 101, 102), seed=4)
    c.start_brokers(0, 1, 2)
    assert c.create("t", assignments=((0, 1, 2),)).error == Errors.NONE
    c.alter(0, [0, 1])
    old = c.active_id()
    before = c.part()
    # the active controller is cut off from the other voters (messages dropped both ways)
    c.loop.isolate(old)
    assert c.loop.run_until_true(lambda: c.active_id() not in (None, old), 30_000)
    assert c.part() == before
    assert {b: r.broker_epoch for b, r in c.active.image.brokers.items()} == c.epochs
    # the new controller accepts the next change on top of the committed state
    assert c.alter(0, [0, 1, 2]).results[0].error == Errors.NONE
    assert c.part().partition_epoch == before.partition_epoch + 1
    # the deposed controller stops acting once healed and catches up
    c.loop.heal()
    c.keep_alive(3000, alive=(0, 1, 2))
    assert not c.ctl(old).is_active
    assert c.ctl(old).image.partitions[TP] == c.part()


def test_request_waiting_for_commit_on_a_deposed_controller_gets_not_controller():
    c = Cluster(voters=(100, 101, 102), seed=5)
    c.start_brokers(0, 1, 2)
    old = c.active_id()
    c.loop.isolate(old)
    n = len(c.loop.sent)
    c.loop.deliver(old, BrokerRegistrationRequest(3, "i3", BrokerEndpoint(3, "h", 1)), 3)
    c.loop.run_for(CFG.controller_quorum_fetch_timeout_ms * 3)
    answers = [m for (_t, s, d, m) in c.loop.sent[n:] if d == 3]
    assert [a.error for a in answers] == [Errors.NOT_CONTROLLER]
    assert 3 not in c.active.image.brokers


@pytest.mark.parametrize("seed", range(3))
def test_no_committed_metadata_lost_when_a_controller_is_partitioned_repeatedly(seed):
    rnd = random.Random(seed)
    c = Cluster(voters=(100, 101, 102), seed=seed)
    c.start_brokers(0, 1, 2)
    created = []
    for i in range(6):
        if c.active_id() is not None:
            name = f"topic{i}"
            try:
                r = c.ask(CreateTopicsRequest("r", (NewTopic(name, 1, 3),)), 1, limit=3000)
            except AssertionError:
                r = None
            if r is not None and r.results[0].error == Errors.NONE:
                created.append(name)
        victim = rnd.choice(c.voters)
        c.loop.heal()
        c.loop.isolate(victim)
        c.keep_alive(2500, alive=())
    c.loop.heal()
    assert c.loop.run_until_true(lambda: c.active_id() is not None, 30_000)
    c.loop.run_for(3000)
    for v in c.voters:
        for name in created:
            assert name in c.ctl(v).image.topics, f"controller {v} lost committed topic {name}"


def test_metadata_image_replayed_identically_on_every_controller():
    c = Cluster(voters=(100, 101, 102), seed=6)
    c.start_brokers(0, 1, 2)
    c.create("t", assignments=((0, 1, 2),))
    c.alter(0, [0, 1])
    c.loop.run_for(2000)
    images = [c.ctl(v).image for v in c.voters]
    for img in images[1:]:
        assert img.partitions == images[0].partitions and img.brokers == images[0].brokers


def test_controller_shutdown_resigns_and_another_controller_takes_over_quickly():
    c = Cluster(voters=(100, 101, 102), seed=7)
    c.start_brokers(0)
    old = c.active_id()
    c.loop._apply(old, c.ctl(old).begin_shutdown(c.loop.now))
    c.loop.crash(old)
    t0 = c.loop.now
    assert c.loop.run_until_true(lambda: c.active_id() not in (None, old), 10_000)
    assert c.loop.now - t0 < CFG.controller_quorum_fetch_timeout_ms
    assert c.active.image.brokers[0].broker_epoch == c.epochs[0]
