"""The classic group protocol's rules, sans-IO (core/groups): Kafka's
ClassicGroup states, KIP-394 member ids, KIP-62 session and rebalance
timeouts, KIP-134's initial delay, commit validation, and the
``__consumer_offsets`` record format and partitioning."""

from __future__ import annotations

from reference_impl.core.groups.group import COMPLETING, EMPTY, PREPARING, STABLE, ClassicGroup
from reference_impl.core.groups.messages import (
    CommittedOffset,
    GroupErrors as E,
    JoinGroupRequest,
    SyncGroupRequest,
)
from reference_impl.core.groups.offsets_log import commit_batch, decode_batches, partition_for
from reference_impl.core.messages import TopicPartition
from tests.core.groupkit import durable, sync

SESSION = 10_000
REBALANCE = 30_000


def join(grp: ClassicGroup, member_id: str, now: int, ref=None, protocols=(("range", b"r"),), fresh="new"):
    req = JoinGroupRequest(ref or ("join", member_id or fresh, now), "g", SESSION, REBALANCE, member_id,
                           "consumer", protocols)
    return grp.join(req, fresh, now)


def joined(grp: ClassicGroup, *ids: str, now: int = 0) -> dict:
    """Members ``ids`` joined through MEMBER_ID_REQUIRED; their join answers by member."""
    out = {}
    for mid in ids:
        first = join(grp, "", now, fresh=mid)
        assert first[0][1].error == E.MEMBER_ID_REQUIRED and first[0][1].member_id == mid
    for mid in ids:
        for _, resp in join(grp, mid, now):
            out[resp.member_id] = resp
    return out


def test_a_member_without_an_id_is_given_one_and_must_join_again():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    (ref, resp), = join(grp, "", 0, fresh="m-1")
    assert resp.error == E.MEMBER_ID_REQUIRED and resp.member_id == "m-1"
    assert grp.members == {} and grp.state == EMPTY
    answers = join(grp, "m-1", 0)
    assert [r.error for _, r in answers] == [0]
    assert grp.state == COMPLETING and grp.generation_id == 1


def test_an_unknown_member_id_is_refused():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    (_, resp), = join(grp, "never-issued", 0)
    assert resp.error == E.UNKNOWN_MEMBER_ID


def test_the_join_completes_once_every_member_rejoined_and_only_the_leader_gets_the_subscriptions():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    joined(grp, "a", now=0)
    sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", (("a", b"all"),)), 0)
    assert grp.state == STABLE
    join(grp, "", 1, fresh="b")
    assert join(grp, "b", 1) == []  # b waits: a has not rejoined yet
    assert grp.state == PREPARING
    answers = {r.member_id: r for _, r in join(grp, "a", 2)}
    assert set(answers) == {"a", "b"} and grp.generation_id == 2
    assert answers["a"].leader == "a" and {m.member_id for m in answers["a"].members} == {"a", "b"}
    assert answers["b"].members == ()


def test_the_initial_rebalance_delay_holds_the_first_join():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=3000)
    join(grp, "", 0, fresh="a")
    assert join(grp, "a", 0) == []
    assert grp.next_deadline() == 3000
    assert grp.expire(2999) == []
    answers = grp.expire(3000)
    assert [r.member_id for _, r in answers] == ["a"] and grp.state == COMPLETING


def test_followers_wait_in_sync_group_for_the_leaders_assignment():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    joined(grp, "a", "b")
    assert grp.state == COMPLETING and grp.leader == "a"
    assert sync(grp, SyncGroupRequest(("s", "b"), "g", 1, "b"), 0) == []
    answers = dict(sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", (("a", b"p0"), ("b", b"p1"))), 0))
    assert answers[("s", "b")].assignment == b"p1" and answers[("s", "a")].assignment == b"p0"
    assert grp.state == STABLE


def test_a_heartbeat_during_a_rebalance_tells_the_member_to_rejoin():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    joined(grp, "a")
    sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", ()), 0)
    assert grp.heartbeat("h1", "a", 1, 100)[0][1].error == 0
    join(grp, "", 100, fresh="b")
    join(grp, "b", 100)
    assert grp.heartbeat("h2", "a", 1, 200)[0][1].error == E.REBALANCE_IN_PROGRESS
    assert grp.heartbeat("h3", "a", 0, 200)[0][1].error == E.ILLEGAL_GENERATION
    assert grp.heartbeat("h4", "zz", 1, 200)[0][1].error == E.UNKNOWN_MEMBER_ID


def test_a_member_silent_for_its_session_timeout_is_removed_and_the_rest_rebalance():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    joined(grp, "a", "b")
    sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", ()), 0)
    grp.heartbeat("h", "a", 1, SESSION - 1)
    assert grp.expire(SESSION) == []  # a parked nothing: nobody is answered yet
    assert "b" not in grp.members and grp.state == PREPARING
    answers = join(grp, "a", SESSION + 1)
    assert [r.member_id for _, r in answers] == ["a"] and grp.generation_id == 2


def test_members_that_do_not_rejoin_by_the_rebalance_timeout_are_removed():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    joined(grp, "a", "b")
    sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", ()), 0)
    join(grp, "a", 1000)  # a rejoins; b keeps heartbeating but never rejoins
    for t in range(2000, 1000 + REBALANCE, 2000):
        grp.heartbeat("h", "b", 1, t)
    answers = grp.expire(1000 + REBALANCE)
    assert [r.member_id for _, r in answers] == ["a"]
    assert set(grp.members) == {"a"} and grp.generation_id == 2


def test_leave_removes_the_member_at_once_and_an_emptied_group_is_empty():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    joined(grp, "a")
    results, answers = grp.leave(("a", "ghost"), 5)
    assert results == [("a", 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert grp.state == EMPTY and grp.members == {} and grp.generation_id == 2


def test_commits_need_the_current_generation_and_a_known_member():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    assert grp.commit_error("", -1) == 0  # a simple consumer commits to an Empty group
    joined(grp, "a")
    assert grp.commit_error("a", 1) == E.REBALANCE_IN_PROGRESS  # the assignment is being computed
    sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", ()), 0)
    assert grp.commit_error("a", 1) == 0
    assert grp.commit_error("a", 0) == E.ILLEGAL_GENERATION
    assert grp.commit_error("zz", 1) == E.UNKNOWN_MEMBER_ID
    assert grp.commit_error("", -1) == E.UNKNOWN_MEMBER_ID  # not while the group has members


def test_members_must_share_a_protocol():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    joined(grp, "a")
    (_, resp), = join(grp, "", 0, protocols=(("roundrobin", b""),))
    assert resp.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_offset_commit_records_round_trip_in_kafkas_schema():
    tp = TopicPartition("orders", 3)
    n, payload = commit_batch("g", [CommittedOffset(tp, 42, 7, "meta")], 1_700_000_000_000)
    assert n == 1
    assert list(decode_batches([payload])) == [("g", tp, CommittedOffset(tp, 42, 7, "meta"))]


def test_a_group_maps_to_its_partition_by_javas_string_hash():
    # "test".hashCode() == 3556498 in Java
    assert partition_for("test", 50) == 3556498 % 50
    # a negative hash is made non-negative by masking the sign bit (Kafka's Utils.abs)
    h = 0
    for ch in "polygenelubricants":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    assert h >= 1 << 31 and partition_for("polygenelubricants", 7) == (h & 0x7FFFFFFF) % 7


# -- the coordinator on a broker: offsets as replicated records ------------------

def _coordinated_broker():
    from reference_impl.core.groups.coordinator import GroupCoordinator
    from tests.core.brokerkit import MetaFeed, make_broker

    b = make_broker(1)
    b.apply_committed(MetaFeed().cluster(brokers=(1, 2), topic="__consumer_offsets", replicas=(1, 2)), 0)
    coord = GroupCoordinator(b)
    coord.sync_leadership()
    return b, coord


def _fetch(coord, group="g"):
    from reference_impl.core.groups.messages import OffsetFetchRequest

    return {o.tp: o.offset for o in coord.fetch_offsets(OffsetFetchRequest("f", group, None)).offsets}


def test_an_offset_commit_is_answered_and_visible_only_once_the_high_watermark_passes_it():
    from reference_impl.core.groups.messages import OffsetCommitRequest, OffsetCommitResponse
    from tests.core.brokerkit import replica_fetch, replies

    b, coord = _coordinated_broker()
    tp = TopicPartition("orders", 0)
    fx = coord.intercept(coord.commit(OffsetCommitRequest("c", "g", -1, "", (CommittedOffset(tp, 5),)), 10, 10))
    assert replies(fx, OffsetCommitResponse) == [] and _fetch(coord) == {}  # acks=all: waiting for replica 2
    fx, _ = replica_fetch(b, 2, 1, 20, tp=TopicPartition("__consumer_offsets", 0))
    (resp,) = replies(coord.intercept(fx), OffsetCommitResponse)
    assert resp.ref == "c" and resp.results == ((tp, 0),)
    assert _fetch(coord) == {tp: 5}


def test_a_new_coordinator_rebuilds_committed_offsets_from_the_partition_log():
    from reference_impl.core.groups.coordinator import GroupCoordinator
    from reference_impl.core.groups.messages import OffsetCommitRequest
    from tests.core.brokerkit import replica_fetch

    b, coord = _coordinated_broker()
    tp = TopicPartition("orders", 1)
    for off in (3, 9):
        coord.intercept(coord.commit(OffsetCommitRequest("c", "g", -1, "", (CommittedOffset(tp, off),)), 10, 10))
    replica_fetch(b, 2, 2, 20, tp=TopicPartition("__consumer_offsets", 0))
    fresh = GroupCoordinator(b)  # the partition's next leader: nothing in memory
    assert _fetch(fresh) == {}
    fresh.sync_leadership()
    assert _fetch(fresh) == {tp: 9}  # the last commit of each partition wins


def test_a_broker_that_does_not_lead_the_groups_partition_is_not_its_coordinator():
    from reference_impl.core.groups.coordinator import GroupCoordinator
    from reference_impl.core.groups.messages import HeartbeatRequest, HeartbeatResponse
    from tests.core.brokerkit import MetaFeed, make_broker, replies

    b = make_broker(2)
    b.apply_committed(MetaFeed().cluster(brokers=(1, 2), topic="__consumer_offsets", replicas=(1, 2)), 0)
    coord = GroupCoordinator(b)
    coord.sync_leadership()
    (resp,) = replies(coord.handle(HeartbeatRequest("h", "g", 1, "m"), 0, 0), HeartbeatResponse)
    assert resp.error == E.NOT_COORDINATOR
