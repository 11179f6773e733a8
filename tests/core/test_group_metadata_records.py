"""Group metadata as records of ``__consumer_offsets``, sans-IO
(core/groups), as Kafka's classic group coordinator keeps it:

* a group's metadata record is Kafka's GroupMetadataKey (version 2) /
  GroupMetadataValue (version 3): generation, protocol, leader, and each
  member's id, instance id, timeouts, subscription and assignment;
* it is written acks=all when the leader's SyncGroup completes a rebalance
  (the SyncGroups are answered only once it is appended; a failed append
  answers them with the error and rebalances), when a restarted static
  member takes its place, and when a group becomes Empty;
* a broker that becomes leader of an offsets partition rebuilds the groups
  from the last record of each (a tombstone: no group): the members keep
  their generation and assignments, each with a fresh session, so one that
  never returns is dropped by its session timeout, and a static member that
  restarts gets its assignment back without a rebalance of the others.

The failover tests run two brokers replicating ``__consumer_offsets-0``
through their real fetch path and move its leadership from one to the
other, and three whole nodes of which the coordinator's crashes.
"""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import Effect, Reply, Send
from reference_impl.core.groups.coordinator import GroupCoordinator, _store_error
from reference_impl.core.groups.group import COMPLETING, EMPTY, PREPARING, STABLE, ClassicGroup
from reference_impl.core.groups.messages import (
    CommittedOffset,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupErrors as E,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse as JoinGroupResponse_,
    LeaveGroupRequest,
    OffsetCommitRequest,
    StoredGroup,
    StoredMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from reference_impl.core.groups.offsets_log import (
    GROUP_KEY_VERSION,
    GROUP_VALUE_VERSION,
    decode_batches,
    decode_log,
    encode_group_key,
    encode_group_value,
    group_batch,
)
from reference_impl.core.messages import Errors, ProduceRequest, TopicPartition
from reference_impl.core.raft.testkit import Loop
from tests.core.brokerkit import MetaFeed, make_broker
from tests.core.test_node_cluster import build, replies_of

OT = TopicPartition("__consumer_offsets", 0)
SESSION = 10_000
REBALANCE = 30_000
DELAY = 100
PROTOCOLS = (("range", b"sub"), ("roundrobin", b"sub-rr"))


# -- the record format -------------------------------------------------------------

def test_group_metadata_records_round_trip_in_kafkas_schema():
    sg = StoredGroup("consumer", 4, "range", "a", 1_700_000_000_000, (
        StoredMember("a", "ia", "client-a", "/10.0.0.1", REBALANCE, SESSION, b"sub-a", b"asg-a"),
        StoredMember("b", None, "client-b", "", REBALANCE, SESSION, b"sub-b", b""),
    ))
    assert encode_group_key("g")[:2] == GROUP_KEY_VERSION.to_bytes(2, "big") == b"\x00\x02"
    assert encode_group_value(sg)[:2] == GROUP_VALUE_VERSION.to_bytes(2, "big") == b"\x00\x03"
    _, payload = group_batch("g", sg, 1)
    _, tomb = group_batch("g", None, 2)
    assert list(decode_log([payload, tomb])) == [("g", None, sg), ("g", None, None)]
    assert list(decode_batches([payload, tomb])) == []  # not offset commits


def test_group_metadata_append_errors_map_as_kafkas():
    assert _store_error(Errors.NOT_LEADER_OR_FOLLOWER) == E.NOT_COORDINATOR
    assert _store_error(Errors.REQUEST_TIMED_OUT) == E.COORDINATOR_NOT_AVAILABLE
    assert _store_error(Errors.NOT_ENOUGH_REPLICAS) == E.COORDINATOR_NOT_AVAILABLE
    assert _store_error(Errors.MESSAGE_TOO_LARGE) == E.UNKNOWN_SERVER_ERROR


# -- the group's side: what waits for a record ---------------------------------------

def _completing(grp: ClassicGroup):
    for mid in ("a", "b"):
        grp.join(JoinGroupRequest(("j", mid), "g", SESSION, REBALANCE, "", "consumer", PROTOCOLS,
                                  group_instance_id="i" + mid), mid, 0)
    grp.expire(DELAY)
    assert grp.state == COMPLETING and grp.leader == "a"
    assert grp.sync(SyncGroupRequest(("s", "b"), "g", 1, "b", (), "ib"), DELAY) == []
    assert grp.sync(SyncGroupRequest(("s", "a"), "g", 1, "a", (("a", b"p0"), ("b", b"p1")), "ia"), DELAY) == []
    (store,) = grp.stores
    grp.stores.clear()
    assert store.kind == "sync" and store.generation == 1 and grp.state == COMPLETING
    assert {m.member_id: m.assignment for m in store.value.members} == {"a": b"p0", "b": b"p1"}
    return store


def test_the_leaders_sync_group_completes_the_rebalance_only_once_its_record_is_appended():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    store = _completing(grp)
    answers = dict(grp.stored(store, 0, DELAY + 1))
    assert answers[("s", "a")].assignment == b"p0" and answers[("s", "b")].assignment == b"p1"
    assert grp.state == STABLE


def test_a_failed_group_record_append_answers_the_sync_groups_with_the_error_and_rebalances():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    store = _completing(grp)
    answers = dict(grp.stored(store, E.COORDINATOR_NOT_AVAILABLE, DELAY + 1))
    assert {r.error for r in answers.values()} == {E.COORDINATOR_NOT_AVAILABLE} and len(answers) == 2
    assert grp.state == PREPARING and all(m.assignment == b"" for m in grp.members.values())


def test_a_failed_append_of_a_restarted_static_members_id_puts_the_old_id_back():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    grp.stored(_completing(grp), 0, DELAY)
    assert grp.join(JoinGroupRequest(("j", "b2"), "g", SESSION, REBALANCE, "", "consumer", PROTOCOLS,
                                     group_instance_id="ib"), "b2", 500) == []
    (store,) = grp.stores
    grp.stores.clear()
    assert store.kind == "static" and {m.member_id for m in store.value.members} == {"a", "b2"}
    ((_, resp),) = grp.stored(store, E.NOT_COORDINATOR, 600)
    assert resp.error == E.NOT_COORDINATOR
    assert set(grp.members) == {"a", "b"} and grp.static_members == {"ia": "a", "ib": "b"}
    assert grp.members["b"].assignment == b"p1" and grp.state == STABLE


def test_a_restart_replaced_by_a_newer_restart_before_its_record_is_appended_is_fenced():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    grp.stored(_completing(grp), 0, DELAY)
    for mid in ("b2", "b3"):
        grp.join(JoinGroupRequest(("j", mid), "g", SESSION, REBALANCE, "", "consumer", PROTOCOLS,
                                  group_instance_id="ib"), mid, 500)
    first, second = grp.stores
    ((_, stale),) = grp.stored(first, 0, 600)
    ((_, fresh),) = grp.stored(second, 0, 600)
    assert stale.error == E.FENCED_INSTANCE_ID and fresh.error == 0 and fresh.member_id == "b3"
    assert grp.static_members == {"ia": "a", "ib": "b3"} and grp.state == STABLE


def test_an_emptied_group_asks_for_an_empty_record_of_its_generation():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    grp.stored(_completing(grp), 0, DELAY)
    grp.leave(("a", "b"), 200)
    (store,) = grp.stores
    assert grp.state == EMPTY and store.kind == "empty"
    assert store.value.generation == 2 and store.value.members == () and store.value.leader is None


def test_a_group_is_restored_from_its_record_with_fresh_member_sessions():
    sg = StoredGroup("consumer", 7, "range", "a", 0, (
        StoredMember("a", "ia", "c", "", REBALANCE, SESSION, b"sub", b"p0"),
        StoredMember("b", None, "c", "", REBALANCE, SESSION, b"sub", b"p1"),
    ))
    grp = ClassicGroup.restore("g", sg, DELAY, 50_000)
    assert grp.state == STABLE and grp.generation_id == 7 and grp.leader == "a"
    assert grp.static_members == {"ia": "a"} and grp.members["b"].assignment == b"p1"
    assert grp.next_deadline() == 50_000 + SESSION
    empty = ClassicGroup.restore("g", StoredGroup("consumer", 8, None, None, 0), DELAY, 0)
    assert empty.state == EMPTY and empty.generation_id == 8 and empty.members == {}


# -- two brokers: the coordinator moves ------------------------------------------------

class Pair:
    """Brokers 1 and 2, each with its coordinator, replicating
    ``__consumer_offsets-0`` (replicas 1, 2; broker 1 leads first) by
    delivering each one's sends to the other; client answers are kept."""

    def __init__(self) -> None:
        cfg = ProtocolConfig(group_initial_rebalance_delay_ms=DELAY)
        self.feed = MetaFeed()
        self.brokers = {n: make_broker(n, cfg) for n in (1, 2)}
        self.coords = {n: GroupCoordinator(b) for n, b in self.brokers.items()}
        self.now = 0
        self.answers: list = []
        #: while True, sends between the brokers wait in ``held`` (a slow network)
        self.hold = False
        self.held: list[tuple[int, Effect]] = []
        recs = self.feed.cluster(brokers=(1, 2), topic="__consumer_offsets", replicas=(1, 2))
        self.metadata(recs)

    def metadata(self, recs) -> None:
        for n, b in self.brokers.items():
            self.route(n, b.apply_committed(recs, self.now, self.now) + self.coords[n].sync_leadership())

    def route(self, src: int, effects: list[Effect]) -> None:
        queue = [(src, self.coords[src].intercept(effects))]
        while queue:
            at, fx = queue.pop(0)
            for e in fx:
                if isinstance(e, Send) and e.dst in self.brokers and self.hold:
                    self.held.append((at, e))
                elif isinstance(e, Send) and e.dst in self.brokers:
                    out = self.brokers[e.dst].handle(e.msg, self.now, at, self.now)
                    queue.append((e.dst, self.coords[e.dst].intercept(out)))
                elif isinstance(e, Reply) and type(e.msg) is not ProduceRequest:
                    self.answers.append(e.msg)

    def release(self) -> None:
        self.hold, held, self.held = False, self.held, []
        for src, e in held:
            self.route(src, [e])

    def at(self, t: int) -> None:
        """Time passes to ``t``: the brokers' timers (follower fetches, purgatory) and the groups'."""
        self.now = t
        for n, b in self.brokers.items():
            self.route(n, b.tick(t, t) + self.coords[n].tick(t, t))

    def request(self, n: int, msg, *, settle: int = 3) -> list:
        """Send ``msg`` to broker ``n``'s coordinator, let replication run a few rounds, return the new answers."""
        self.answers = []
        self.brokers[n].set_clock(self.now, self.now)
        self.route(n, self.coords[n].handle(msg, self.now, self.now))
        for _ in range(settle):
            self.at(self.now + 1)
        return [a for a in self.answers if getattr(a, "ref", None) == msg.ref]

    def fail_over_to(self, n: int) -> None:
        self.at(self.now + 1)
        self.metadata(self.feed.change(tp=OT, leader=n, isr=(n,)))


def _join(pair: Pair, inst: str, ref: str) -> JoinGroupRequest:
    """A static member's JoinGroup without a member id (a first start or a restart)."""
    return JoinGroupRequest(ref, "g", SESSION, REBALANCE, "", "consumer", PROTOCOLS, client_id="c",
                            group_instance_id=inst)


def _static_joined() -> Pair:
    """Static members ia (id a, the leader) and ib (id b) joined on broker 1, the rebalance delay over."""
    pair = Pair()
    coord = pair.coords[1]
    ids = iter(["a", "b"])
    coord._new_member_id = lambda client_id: next(ids)
    for inst in ("ia", "ib"):
        coord.handle(_join(pair, inst, inst), 0, 0)
    pair.at(DELAY)
    return pair


def _static_pair() -> Pair:
    pair = _static_joined()
    coord = pair.coords[1]
    grp = coord.groups["g"]
    assert grp.state == COMPLETING and grp.leader == "a"
    pair.request(1, SyncGroupRequest("sync-b", "g", 1, "b", (), "ib"), settle=0)
    answers = pair.request(1, SyncGroupRequest("sync-a", "g", 1, "a", (("a", b"p0"), ("b", b"p1")), "ia"))
    assert [a.error for a in answers] == [0] and grp.state == STABLE
    return pair


def test_the_sync_group_waits_for_the_group_record_to_pass_the_high_watermark():
    pair = _static_joined()
    coord = pair.coords[1]
    pair.hold = True  # broker 2 does not hear of the record yet
    assert pair.request(1, SyncGroupRequest("sync-a", "g", 1, "a", (("a", b"p0"), ("b", b"p1")), "ia")) == []
    assert coord.groups["g"].state == COMPLETING and coord.group_writes
    (hb,) = pair.request(1, HeartbeatRequest("hb-b", "g", 1, "b", "ib"))
    assert hb.error == 0 and coord.groups["g"].commit_error("b", 1, "ib") == E.REBALANCE_IN_PROGRESS
    pair.release()  # broker 2 fetches it; the high watermark passes it
    pair.at(pair.now + 1)
    assert [a.assignment for a in pair.answers if isinstance(a, SyncGroupResponse)] == [b"p0"]
    assert coord.groups["g"].state == STABLE and not coord.group_writes


def test_a_new_coordinator_after_failover_keeps_the_generation_members_and_assignments():
    pair = _static_pair()
    pair.fail_over_to(2)
    assert "g" not in pair.coords[1].groups
    grp = pair.coords[2].groups["g"]
    assert grp.state == STABLE and grp.generation_id == 1 and grp.leader == "a"
    assert {m: x.assignment for m, x in grp.members.items()} == {"a": b"p0", "b": b"p1"}
    assert grp.static_members == {"ia": "a", "ib": "b"}
    (hb,) = pair.request(2, HeartbeatRequest("hb-a", "g", 1, "a", "ia"))
    assert hb.error == 0  # the member goes on in its generation: no rebalance
    tp = TopicPartition("orders", 0)
    (commit,) = pair.request(2, OffsetCommitRequest("commit-a", "g", 1, "a", (CommittedOffset(tp, 3),), "ia"))
    assert commit.results == ((tp, 0),)


def test_a_static_member_rejoining_the_new_coordinator_gets_its_assignment_back_without_a_rebalance():
    pair = _static_pair()
    pair.fail_over_to(2)
    pair.coords[2]._new_member_id = lambda client_id: "b2"
    (join,) = pair.request(2, _join(pair, "ib", "b-restarted"))  # b's process restarted
    assert join.error == 0 and join.member_id == "b2" and join.generation_id == 1 and join.leader == "a"
    (synced,) = pair.request(2, SyncGroupRequest("sync-b2", "g", 1, "b2", (), "ib"))
    assert synced.error == 0 and synced.assignment == b"p1"
    (hb,) = pair.request(2, HeartbeatRequest("hb-a", "g", 1, "a", "ia"))
    assert hb.error == 0 and pair.coords[2].groups["g"].generation_id == 1  # a was not made to rejoin
    (fenced,) = pair.request(2, HeartbeatRequest("hb-b", "g", 1, "b", "ib"))
    assert fenced.error == E.FENCED_INSTANCE_ID
    # the new member id is itself recorded: once broker 1, a follower again,
    # has fetched it, a failover back keeps it
    for _ in range(3):
        pair.at(pair.now + 600)
    pair.fail_over_to(1)
    assert pair.coords[1].groups["g"].static_members == {"ia": "a", "ib": "b2"}


def test_a_member_that_never_returns_to_the_new_coordinator_is_dropped_by_its_session_timeout():
    pair = _static_pair()
    pair.fail_over_to(2)
    start = pair.now
    for t in range(start + 2_000, start + SESSION + 1, 2_000):
        pair.at(t)
        pair.request(2, HeartbeatRequest(("hb-a", t), "g", 1, "a", "ia"), settle=0)
    pair.at(start + SESSION + 1)
    grp = pair.coords[2].groups["g"]
    assert "b" not in grp.members and grp.static_members == {"ia": "a"} and grp.state == PREPARING


def test_an_emptied_group_is_loaded_empty_with_its_generation():
    pair = _static_pair()
    pair.request(1, LeaveGroupRequest("leave", "g", ("a", "b"), ("ia", "ib")))
    assert pair.coords[1].groups["g"].state == EMPTY
    pair.fail_over_to(2)
    grp = pair.coords[2].groups["g"]
    assert grp.state == EMPTY and grp.generation_id == 2 and grp.members == {}


def test_a_group_tombstone_loads_as_no_group():
    pair = _static_pair()
    _, payload = group_batch("g", None, pair.now)
    pair.route(1, pair.brokers[1].handle_produce(
        ProduceRequest("tombstone", OT, -1, 1, payload, 5000, max_timestamp=pair.now), pair.now))
    pair.at(pair.now + 1)
    pair.fail_over_to(2)
    assert "g" not in pair.coords[2].groups
    (hb,) = pair.request(2, HeartbeatRequest("hb-a", "g", 1, "a", "ia"))
    assert hb.error == E.UNKNOWN_MEMBER_ID


# -- whole nodes: the coordinator's process dies -----------------------------------------

def test_after_the_coordinators_node_crashes_its_successor_restores_the_group_and_times_out_a_silent_member():
    """Three combined nodes; a static member forms a group on the
    coordinator, whose node then crashes. The node that takes over the
    offsets partition has the group (generation, member, assignment) from the
    log, and with no member ever reaching it drops the member by its session
    timeout."""
    cfg = ProtocolConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
    loop, voters = Loop(latency=2), (1, 2, 3)
    for i in voters:
        loop.add(i, build(i, {"broker", "controller"}, voters, cfg=cfg))
    assert loop.run_until_true(lambda: all(loop.nodes[b].broker.broker_epoch >= 0 for b in voters), 30_000)

    def coordinator():
        loop.deliver(1, FindCoordinatorRequest(("find", loop.now), ("g",)))
        loop.run_for(200)
        found = [c for r in replies_of(loop, FindCoordinatorResponse) for c in r.coordinators if c.error == 0]
        return found[-1].node_id if found else None

    assert loop.run_until_true(lambda: coordinator() is not None, 30_000)
    c = coordinator()
    loop.deliver(c, JoinGroupRequest("join", "g", SESSION, REBALANCE, "", "consumer", PROTOCOLS, client_id="c",
                                     group_instance_id="ia"))
    assert loop.run_until_true(lambda: replies_of(loop, JoinGroupResponse_), 10_000)
    (joined,) = replies_of(loop, JoinGroupResponse_)
    assert joined.error == 0 and joined.generation_id == 1
    loop.deliver(c, SyncGroupRequest("sync", "g", 1, joined.member_id, ((joined.member_id, b"p0"),), "ia"))
    assert loop.run_until_true(lambda: replies_of(loop, SyncGroupResponse), 10_000)
    assert replies_of(loop, SyncGroupResponse)[0].assignment == b"p0"

    loop.crash(c)
    crashed_at = loop.now
    others = [n for n in voters if n != c]

    def successor():
        return next((n for n in others if "g" in loop.nodes[n].groups.groups), None)

    assert loop.run_until_true(lambda: successor() is not None, 30_000)
    grp = loop.nodes[successor()].groups.groups["g"]
    assert grp.state == STABLE and grp.generation_id == 1 and grp.members[joined.member_id].assignment == b"p0"
    assert loop.run_until_true(lambda: joined.member_id not in grp.members, 3 * SESSION)
    assert grp.generation_id == 2 and grp.state == EMPTY and loop.now - crashed_at > SESSION
