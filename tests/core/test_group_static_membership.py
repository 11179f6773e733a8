"""Static membership (KIP-345, ``group.instance.id``) in the classic group
protocol, sans-IO (core/groups/group.py), as Kafka's ClassicGroup does it:

* a static member joins without KIP-394's MEMBER_ID_REQUIRED round trip;
* the same instance joining again without a member id (its process
  restarted) takes a new member id, keeps its assignment and, in a Stable
  group whose selected protocol stays the same, gets its generation back with
  no rebalance, even with a changed subscription (Kafka compares the
  protocol only: GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin);
* the old member id is fenced: FENCED_INSTANCE_ID on join, sync,
  heartbeat, commit and leave;
* a static member that does not come back leaves by its session timeout
  (then the group rebalances), or by a LeaveGroup naming its instance.
"""

from __future__ import annotations

from reference_impl.core.groups.group import PREPARING, STABLE, ClassicGroup
from reference_impl.core.groups.messages import GroupErrors as E, JoinGroupRequest, SyncGroupRequest
from tests.core.groupkit import durable, sync

SESSION = 10_000
REBALANCE = 30_000
DELAY = 100


def join(grp: ClassicGroup, member_id: str, inst: str | None, now: int, fresh: str, protocols=(("range", b"r"),)):
    req = JoinGroupRequest(("join", fresh, now), "g", SESSION, REBALANCE, member_id, "consumer", protocols,
                           group_instance_id=inst)
    return grp.join(req, fresh, now) + durable(grp, now)


def stable(grp: ClassicGroup) -> None:
    """Two static members a (instance ia, the leader) and b (ib), Stable in generation 1."""
    assert join(grp, "", "ia", 0, fresh="a") == []  # parked for the initial delay
    assert join(grp, "", "ib", 0, fresh="b") == []
    answers = {r.member_id: r for _, r in grp.expire(DELAY)}
    assert set(answers) == {"a", "b"} and all(r.error == 0 for r in answers.values())
    leader = answers["a"].leader
    assert leader == "a" and {m.group_instance_id for m in answers["a"].members} == {"ia", "ib"}
    out = sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", (("a", b"p0"), ("b", b"p1")), "ia"), DELAY)
    assert [r.error for _, r in out] == [0] and grp.state == STABLE


def test_a_static_member_joins_without_the_member_id_round_trip():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=0)
    (_, resp), = join(grp, "", "ia", 0, fresh="a")
    assert resp.error == 0 and resp.member_id == "a" and grp.static_members == {"ia": "a"}


def test_a_restarted_static_member_gets_its_assignment_back_without_a_rebalance():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    stable(grp)
    (_, resp), = join(grp, "", "ib", 5_000, fresh="b2")  # b's process restarted, within its session
    assert resp.error == 0 and resp.member_id == "b2" and resp.generation_id == 1
    assert grp.state == STABLE and grp.generation_id == 1 and grp.static_members == {"ia": "a", "ib": "b2"}
    (_, synced), = sync(grp, SyncGroupRequest(("s", "b2"), "g", 1, "b2", (), "ib"), 5_000)
    assert synced.error == 0 and synced.assignment == b"p1"


def test_a_restarted_static_leader_is_told_it_need_not_assign():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    stable(grp)
    (_, resp), = join(grp, "", "ia", 5_000, fresh="a2")
    assert resp.error == 0 and resp.leader == "a2" and resp.skip_assignment
    assert {m.member_id for m in resp.members} == {"a2", "b"}
    (_, synced), = sync(grp, SyncGroupRequest(("s", "a2"), "g", 1, "a2", (("a2", b"x"),), "ia"), 5_000)
    assert synced.assignment == b"p0" and grp.state == STABLE  # the standing assignment, not a new one


def test_the_old_member_id_of_a_replaced_instance_is_fenced():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    stable(grp)
    join(grp, "", "ib", 5_000, fresh="b2")
    (_, hb), = grp.heartbeat("hb", "b", 1, 5_001, "ib")
    assert hb.error == E.FENCED_INSTANCE_ID
    (_, synced), = sync(grp, SyncGroupRequest(("s", "b"), "g", 1, "b", (), "ib"), 5_001)
    assert synced.error == E.FENCED_INSTANCE_ID
    assert grp.commit_error("b", 1, "ib") == E.FENCED_INSTANCE_ID
    (_, rejoin), = join(grp, "b", "ib", 5_001, fresh="zz")
    assert rejoin.error == E.FENCED_INSTANCE_ID
    results, _ = grp.leave(("b",), 5_001, ("ib",))
    assert results == [("b", E.FENCED_INSTANCE_ID)] and "b2" in grp.members
    assert grp.commit_error("b2", 1, "ib") == 0 and grp.state == STABLE


def test_a_restarted_static_member_with_a_changed_subscription_keeps_its_generation_without_a_rebalance():
    """Kafka checks whether the group's selected protocol would change, not
    the member's metadata: a restart with another subscription under the same
    protocol gets generation 1 back, and the record stores the new metadata."""
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    stable(grp)
    (_, resp), = join(grp, "", "ib", 5_000, fresh="b2", protocols=(("range", b"other"),))
    assert resp.error == 0 and resp.member_id == "b2" and resp.generation_id == 1
    assert grp.state == STABLE and grp.generation_id == 1 and "b" not in grp.members
    assert grp.members["b2"].metadata_for("range") == b"other"
    (_, synced), = sync(grp, SyncGroupRequest(("s", "b2"), "g", 1, "b2", (), "ib"), 5_000)
    assert synced.error == 0 and synced.assignment == b"p1"


def test_a_restart_that_changes_the_selected_protocol_rebalances():
    """Both members prefer range; b comes back supporting only roundrobin, so
    the next generation's protocol would change: Kafka rebalances."""
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    both = (("range", b"r"), ("roundrobin", b"r"))
    join(grp, "", "ia", 0, fresh="a", protocols=both)
    join(grp, "", "ib", 0, fresh="b", protocols=both)
    grp.expire(DELAY)
    sync(grp, SyncGroupRequest(("s", "a"), "g", 1, "a", (("a", b"p0"), ("b", b"p1")), "ia"), DELAY)
    assert grp.state == STABLE and grp.protocol_name == "range"
    assert join(grp, "", "ib", 5_000, fresh="b2", protocols=(("roundrobin", b"r"),)) == []
    assert grp.state == PREPARING and "b2" in grp.members and "b" not in grp.members


def test_a_restart_while_the_group_completes_a_rebalance_starts_another():
    """In CompletingRebalance the leader may already be assigning to the old
    member id, so the restarted member's join rebalances (Kafka's
    COMPLETING_REBALANCE branch)."""
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    join(grp, "", "ia", 0, fresh="a")
    join(grp, "", "ib", 0, fresh="b")
    grp.expire(DELAY)
    assert grp.state != STABLE and grp.generation_id == 1
    assert join(grp, "", "ib", DELAY + 1, fresh="b2") == []
    assert grp.state == PREPARING and "b2" in grp.members


def test_a_static_member_that_does_not_return_leaves_by_its_session_timeout():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    stable(grp)
    grp.heartbeat("hb", "a", 1, SESSION, "ia")
    grp.expire(DELAY + SESSION)  # b was last heard when the join completed
    assert "b" not in grp.members and grp.static_members == {"ia": "a"} and grp.state != STABLE


def test_leave_group_by_instance_id_removes_that_instances_member():
    grp = ClassicGroup("g", initial_rebalance_delay_ms=DELAY)
    stable(grp)
    results, _ = grp.leave(("",), 1, ("ib",))
    assert results == [("", 0)] and "b" not in grp.members and "ib" not in grp.static_members
    results, _ = grp.leave(("",), 1, ("never",))
    assert results == [("", E.UNKNOWN_MEMBER_ID)]
