"""KRaft quorum rules (seed 004), proven on RaftReplica and the in-memory loop."""

from __future__ import annotations

import random

import pytest

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import FileWrite, Fsync, LogAppend, LogTruncate, Send, Timer
from reference_impl.core.errors import CommittedTruncation
from reference_impl.core.messages import (
    BeginQuorumEpochRequest,
    Errors,
    MetadataEntry,
    NoOpRecord,
    RaftFetchRequest,
    RaftFetchResponse,
    TopicRecord,
    VoteRequest,
    VoteResponse,
)
from reference_impl.core.raft import FETCH_MAX_WAIT_MS, RaftReplica
from reference_impl.core.raft.replica import FETCH_RESEND_MS, RETRY_BACKOFF_MS
from reference_impl.core.raft.testkit import Loop, MemoryDisk
from reference_impl.core.storage import METADATA_LOG, QUORUM_STATE, QuorumState, StoredState

VOTERS = (1, 2, 3)
CFG = ProtocolConfig()


def entry(offset: int, epoch: int, name: str | None = None) -> MetadataEntry:
    return MetadataEntry(offset, epoch, TopicRecord(name or f"t{offset}"))


def stored(entries=(), epoch=0, voted_for=-1, leader=-1) -> StoredState:
    s = StoredState()
    s.logs[METADATA_LOG] = list(entries)
    s.files[QUORUM_STATE] = QuorumState(epoch, voted_for, leader)
    return s


def replica(node_id=1, st: StoredState | None = None, seed=0, observer=False, voters=VOTERS) -> RaftReplica:
    r = RaftReplica(node_id, voters, st or StoredState(), CFG, random.Random(seed), observer=observer)
    r.start(0)
    return r


def sends(effects, cls=None):
    return [e for e in effects if isinstance(e, Send) and (cls is None or isinstance(e.msg, cls))]


def vote_reply(effects) -> VoteResponse:
    (s,) = sends(effects, VoteResponse)
    return s.msg


# ---------------------------------------------------------------------------
# votes
# ---------------------------------------------------------------------------


def test_vote_refused_to_candidate_whose_last_epoch_is_older():
    r = replica(2, stored([entry(0, 1), entry(1, 2)], epoch=2))
    resp = vote_reply(r.handle(VoteRequest(1, 3, last_offset_epoch=1, last_offset=10), 5, 1))
    assert not resp.vote_granted
    assert r.voted_for == -1 and r.epoch == 3  # the epoch is adopted, the vote withheld


def test_vote_refused_to_candidate_with_shorter_log_in_same_epoch():
    r = replica(2, stored([entry(0, 1), entry(1, 1), entry(2, 1)], epoch=1))
    resp = vote_reply(r.handle(VoteRequest(1, 2, last_offset_epoch=1, last_offset=2), 5, 1))
    assert not resp.vote_granted


def test_vote_granted_to_candidate_at_least_as_up_to_date():
    r = replica(2, stored([entry(0, 1), entry(1, 1)], epoch=1))
    resp = vote_reply(r.handle(VoteRequest(1, 2, last_offset_epoch=1, last_offset=2), 5, 1))
    assert resp.vote_granted and r.voted_for == 1


def test_vote_is_persisted_and_fsynced_before_the_response_is_sent():
    r = replica(2)
    effects = r.handle(VoteRequest(1, 1, -1, 0), 5, 1)
    i_send = next(i for i, e in enumerate(effects) if isinstance(e, Send))
    writes = [i for i, e in enumerate(effects[:i_send]) if isinstance(e, FileWrite)]
    syncs = [i for i, e in enumerate(effects[:i_send]) if isinstance(e, Fsync)]
    assert writes and syncs and writes[-1] < syncs[-1] < i_send
    write = effects[writes[-1]]
    assert write.path == QUORUM_STATE and write.data == QuorumState(1, 1, -1)


def test_one_vote_per_epoch_survives_a_restart():
    disk = MemoryDisk()
    r = RaftReplica(2, VOTERS, StoredState(), CFG, random.Random(1))
    for e in r.start(0):
        disk.apply(e)
    effects = r.handle(VoteRequest(1, 4, -1, 0), 5, 1)
    for e in effects:
        disk.apply(e)
    assert vote_reply(effects).vote_granted
    # power loss: only what was fsynced survives
    r2 = RaftReplica(2, VOTERS, disk.after_crash(lose_unfsynced=True), CFG, random.Random(2))
    r2.start(10)
    assert (r2.epoch, r2.voted_for) == (4, 1)
    assert not vote_reply(r2.handle(VoteRequest(3, 4, 5, 100), 11, 3)).vote_granted
    assert vote_reply(r2.handle(VoteRequest(1, 4, -1, 0), 12, 1)).vote_granted  # same candidate: idempotent


def test_stale_epoch_vote_request_is_fenced():
    r = replica(2, stored(epoch=5))
    resp = vote_reply(r.handle(VoteRequest(1, 3, -1, 0), 1, 1))
    assert resp.error == Errors.FENCED_EPOCH and resp.epoch == 5 and not resp.vote_granted


def test_observer_never_votes():
    r = replica(7, observer=True)
    resp = vote_reply(r.handle(VoteRequest(1, 1, -1, 0), 1, 1))
    assert not resp.vote_granted


# ---------------------------------------------------------------------------
# elections among three voters
# ---------------------------------------------------------------------------


class Cluster:
    """Three voters (and optional observers) on the in-memory loop, recording
    every entry each replica hands upward as committed."""

    def __init__(self, seed: int = 0, voters=VOTERS, observers=()):
        self.loop = Loop(latency=2)
        self.rng = random.Random(seed)
        self.voters = voters
        self.committed: dict[int, list[MetadataEntry]] = {}
        self.ever_committed: dict[int, tuple[int, object]] = {}
        self.loop.on_effects = self._collect
        for v in voters:
            self.loop.add(v, self._build(v, StoredState()))
        for o in observers:
            self.loop.add(o, self._build(o, StoredState(), observer=True))

    def _build(self, node_id: int, st: StoredState, observer: bool = False) -> RaftReplica:
        return RaftReplica(node_id, self.voters, st, CFG, random.Random(self.rng.random()), observer=observer)

    def _collect(self, node_id, effects) -> None:
        node = self.loop.nodes[node_id]
        fresh = node.take_committed()
        self.committed.setdefault(node_id, []).extend(fresh)
        for e in fresh:  # committed once means committed forever, on every node
            seen = self.ever_committed.setdefault(e.offset, (e.epoch, e.record))
            assert seen == (e.epoch, e.record), f"node {node_id} committed {e} over {seen}"

    def r(self, node_id: int) -> RaftReplica:
        return self.loop.nodes[node_id]  # type: ignore[return-value]

    def leaders(self, among=None) -> list[int]:
        ids = among or self.voters
        return [v for v in ids if v not in self.loop.down and self.r(v).is_leader]

    def wait_leader(self, among=None, limit=30_000) -> int:
        assert self.loop.run_until_true(lambda: len(self.leaders(among)) == 1, limit)
        return self.leaders(among)[0]

    def append(self, node_id: int, *records) -> tuple[MetadataEntry, ...]:
        r = self.r(node_id)
        out = r.append(records, self.loop.now)
        self.loop._apply(node_id, r.drain_effects())
        return out

    def restart(self, node_id: int, lose_unfsynced=False) -> RaftReplica:
        self.committed[node_id] = []
        return self.loop.restart(node_id, lambda st: self._build(node_id, st), lose_unfsynced)  # type: ignore[return-value]


def test_three_voters_elect_exactly_one_leader_per_epoch():
    c = Cluster(seed=3)
    leader = c.wait_leader()
    c.loop.run_for(3000)
    assert c.leaders() == [leader]
    epoch = c.r(leader).epoch
    for v in VOTERS:
        assert c.r(v).epoch == epoch and c.r(v).leader_id == leader
    leaders_by_epoch: dict[int, set[int]] = {}
    for _t, node, ev in c.loop.traces:
        if ev.kind == "raft_state" and ev.data["role"] == "leader":
            leaders_by_epoch.setdefault(ev.data["epoch"], set()).add(node)
    assert all(len(s) == 1 for s in leaders_by_epoch.values())


def test_new_leader_appends_noop_and_it_commits_on_every_voter():
    c = Cluster(seed=4)
    leader = c.wait_leader()
    c.loop.run_for(2000)
    for v in VOTERS:
        assert [type(e.record) for e in c.committed[v]] == [NoOpRecord]
        assert c.r(v).high_watermark == 1


def test_single_voter_quorum_elects_itself():
    c = Cluster(seed=1, voters=(5,))
    assert c.wait_leader() == 5
    c.append(5, TopicRecord("a"))
    assert [e.record for e in c.committed[5]][-1] == TopicRecord("a")


def test_follower_starts_election_after_fetch_timeout():
    c = Cluster(seed=5)
    leader = c.wait_leader()
    c.loop.run_for(1000)
    epoch = c.r(leader).epoch
    c.loop.crash(leader)
    t0 = c.loop.now
    new = c.wait_leader(among=[v for v in VOTERS if v != leader])
    assert c.r(new).epoch > epoch
    # the last good fetch answer came at most one parked-fetch wait before the crash
    assert c.loop.now - t0 >= CFG.controller_quorum_fetch_timeout_ms - FETCH_MAX_WAIT_MS


def test_leader_steps_down_on_a_higher_epoch():
    r = replica(1, seed=1)
    r.tick(10_000)  # pre-vote
    effects = r.handle(VoteResponse(2, Errors.NONE, 0, -1, True, pre_vote=True), 10_001, 2)  # election
    epoch = r.epoch
    r.handle(VoteResponse(2, Errors.NONE, epoch, -1, True), 10_001, 2)
    assert r.is_leader
    r.handle(BeginQuorumEpochRequest(3, epoch + 1), 10_002, 3)
    assert not r.is_leader and r.leader_id == 3 and r.epoch == epoch + 1
    assert effects  # the election did emit vote requests
    assert sends(effects, VoteRequest)


def test_partitioned_leader_resigns_when_it_cannot_hear_a_majority():
    c = Cluster(seed=6)
    leader = c.wait_leader()
    c.loop.isolate(leader)
    c.loop.run_for(CFG.controller_quorum_fetch_timeout_ms * 2 + 500)
    assert not c.r(leader).is_leader


# ---------------------------------------------------------------------------
# commitment and replication
# ---------------------------------------------------------------------------


def _elect(r: RaftReplica, now: int) -> int:
    """Drive ``r`` through a pre-vote and an election it wins with voter 2's vote."""
    r.tick(now + 10_000)
    r.handle(VoteResponse(2, Errors.NONE, r.epoch, -1, True, pre_vote=True), now + 10_001, 2)
    r.handle(VoteResponse(2, Errors.NONE, r.epoch, -1, True), now + 10_001, 2)
    assert r.is_leader
    return now + 10_001


def test_old_epoch_entries_commit_only_after_a_current_epoch_entry():
    # leader 1 inherits two epoch-1 entries; voter 2 already holds both
    r = replica(1, stored([entry(0, 1), entry(1, 1)], epoch=1), seed=2)
    now = _elect(r, 0)
    assert r.end_offset == 3 and r.log[2].epoch == r.epoch  # the NoOp
    r.handle(RaftFetchRequest(2, r.epoch, fetch_offset=2, last_fetched_epoch=1), now + 1, 2)
    # a majority (1 and 2) hold offsets 0-1, but those are from epoch 1
    assert r.high_watermark == 0 and r.take_committed() == []
    r.handle(RaftFetchRequest(2, r.epoch, fetch_offset=3, last_fetched_epoch=r.epoch), now + 2, 2)
    assert r.high_watermark == 3
    assert [e.offset for e in r.take_committed()] == [0, 1, 2]


def test_high_watermark_is_the_majority_fetch_offset():
    r = replica(1, seed=3)
    now = _elect(r, 0)
    r.append([TopicRecord("a"), TopicRecord("b")], now)
    r.handle(RaftFetchRequest(3, r.epoch, 2, r.epoch), now + 1, 3)
    assert r.high_watermark == 2  # leader (3) and voter 3 (2): majority holds 2
    r.handle(RaftFetchRequest(2, r.epoch, 3, r.epoch), now + 2, 2)
    assert r.high_watermark == 3


def test_observer_fetch_offsets_do_not_count_towards_the_high_watermark():
    r = replica(1, seed=3)
    now = _elect(r, 0)
    r.handle(RaftFetchRequest(9, r.epoch, 1, r.epoch), now + 1, 9)
    assert r.high_watermark == 0


def test_fetch_with_diverging_log_gets_the_epoch_end_offset():
    leader = replica(1, stored([entry(0, 1), entry(1, 1)], epoch=2), seed=4)
    now = _elect(leader, 0)  # epoch 3, NoOp at offset 2
    effects = leader.handle(RaftFetchRequest(2, leader.epoch, fetch_offset=4, last_fetched_epoch=2), now + 1, 2)
    (s,) = sends(effects, RaftFetchResponse)
    assert s.msg.diverging_epoch == (1, 2)


def test_divergent_follower_truncates_and_then_matches_the_leader():
    # voter 2 holds uncommitted epoch-2 entries of a deposed leader; the new
    # leader (3, epoch 3) never saw them
    common = [entry(0, 1, "a"), entry(1, 1, "b")]
    c = Cluster(seed=7)
    for v in VOTERS:
        c.loop.crash(v)
    c.loop.nodes.clear()
    logs = {
        1: common,
        2: common + [entry(2, 2, "zombie1"), entry(3, 2, "zombie2")],
        3: common + [entry(2, 3, "new")],
    }
    for v in VOTERS:
        st = stored(logs[v], epoch=3, voted_for=3, leader=3 if v != 3 else -1)
        c.loop.disks[v] = MemoryDisk(cache=st, durable=stored(logs[v], epoch=3, voted_for=3))
    # 3 must win epoch 4: its last epoch (3) beats everyone
    for v in VOTERS:
        c.loop.add(v, c._build(v, c.loop.disks[v].after_crash(False)))
    c.loop.cut(2, 1)  # 2 cannot help 1 win
    leader = c.wait_leader()
    c.loop.heal()
    c.loop.run_for(3000)
    assert leader == 3
    logs_after = {v: [(e.offset, e.epoch, e.record) for e in c.r(v).log] for v in VOTERS}
    assert logs_after[1] == logs_after[2] == logs_after[3]
    assert all(e.record.name not in ("zombie1", "zombie2") for e in c.r(2).log if isinstance(e.record, TopicRecord))
    truncations = [ev for _t, n, ev in c.loop.traces if n == 2 and ev.kind == "raft_truncate"]
    assert truncations and truncations[0].data["to"] == 2
    # the disk saw the truncation too
    assert [e.offset for e in c.loop.disks[2].durable.logs[METADATA_LOG]] == [e.offset for e in c.r(3).log]


def test_restarted_voter_recovers_its_log_and_redelivers_committed_entries():
    c = Cluster(seed=8)
    leader = c.wait_leader()
    c.loop.run_for(500)
    for i in range(5):
        c.append(c.leaders()[0], TopicRecord(f"x{i}"))
        c.loop.run_for(50)
    follower = next(v for v in VOTERS if v != leader)
    c.loop.run_for(1000)
    before = [e.record for e in c.committed[follower]]
    c.restart(follower, lose_unfsynced=True)
    assert c.r(follower).end_offset >= len(before)
    c.loop.run_for(2000)
    assert [e.record for e in c.committed[follower]] == before


def test_observer_discovers_the_leader_from_any_voter_and_sees_only_committed_entries():
    c = Cluster(seed=9, observers=(10,))
    leader = c.wait_leader()
    c.loop.run_for(1000)
    assert c.r(10).leader_id == leader
    c.append(leader, TopicRecord("x"))
    c.loop.run_for(500)
    assert [e.record for e in c.committed[10]][-1] == TopicRecord("x")
    assert [e.offset for e in c.committed[10]] == [e.offset for e in c.committed[leader]]
    # an isolated leader's uncommitted entry never reaches the observer as committed
    c.loop.isolate(leader)
    c.loop.heal()
    c.loop.cut(leader, 2)
    c.loop.cut(leader, 3)
    c.append(leader, TopicRecord("never"))
    c.loop.run_for(300)
    assert TopicRecord("never") not in [e.record for e in c.committed[10]]


# ---------------------------------------------------------------------------
# failover: no committed record is lost
# ---------------------------------------------------------------------------


def _stable_leader(c: Cluster) -> int | None:
    """A leader every voter follows, whose epoch's first entry has committed."""
    leaders = c.leaders()
    if len(leaders) != 1:
        return None
    r = c.r(leaders[0])
    if r.high_watermark <= r.epoch_start_offset:
        return None
    if any(c.r(v).epoch != r.epoch or c.r(v).leader_id != leaders[0] for v in VOTERS):
        return None
    return leaders[0]


def _check_committed_prefixes(c: Cluster) -> list[MetadataEntry]:
    """Every replica delivered a prefix of one common committed sequence."""
    longest: list[MetadataEntry] = []
    for seq in c.committed.values():
        if len(seq) > len(longest):
            longest = seq
    for node, seq in c.committed.items():
        assert [(e.offset, e.epoch, e.record) for e in seq] == [
            (e.offset, e.epoch, e.record) for e in longest[: len(seq)]
        ], f"node {node} delivered a different committed history"
    return longest


def test_controller_failover_elects_a_complete_log_and_loses_no_committed_record():
    c = Cluster(seed=11)
    first = c.wait_leader()
    c.loop.run_for(300)
    for i in range(10):
        c.append(first, TopicRecord(f"before{i}"))
        c.loop.run_for(20)
    c.loop.run_for(500)
    committed_before = [e for e in c.committed[first]]
    assert len(committed_before) == 11
    # cut the leader off; it keeps appending, but nothing it appends can commit
    c.loop.isolate(first)
    for i in range(3):
        c.append(first, TopicRecord(f"orphan{i}"))
    second = c.wait_leader(among=[v for v in VOTERS if v != first])
    # the new leader's log holds every committed record
    new_log = [(e.offset, e.record) for e in c.r(second).log]
    for e in committed_before:
        assert (e.offset, e.record) in new_log
    for i in range(5):
        c.append(second, TopicRecord(f"after{i}"))
        c.loop.run_for(20)
    c.loop.heal()
    c.loop.run_for(5000)
    final = _check_committed_prefixes(c)
    names = [e.record.name for e in final if isinstance(e.record, TopicRecord)]
    assert names[:10] == [f"before{i}" for i in range(10)]
    assert [n for n in names if n.startswith("after")] == [f"after{i}" for i in range(5)]
    assert not any(n.startswith("orphan") for n in names)
    # and the deposed leader's log converged (orphans truncated)
    assert [(e.offset, e.record) for e in c.r(first).log] == [(e.offset, e.record) for e in c.r(second).log]


@pytest.mark.parametrize("seed", range(int(__import__("os").environ.get("RAFT_SEEDS", "20"))))
def test_no_committed_record_lost_under_random_drops_crashes_and_partitions(seed):
    rnd = random.Random(seed)
    c = Cluster(seed=seed, observers=(20,))
    c.loop.drop = lambda src, dst, msg: rnd.random() < 0.1
    written = 0
    for step in range(40):
        c.loop.run_for(rnd.randint(50, 400))
        leaders = c.leaders()
        if leaders:
            c.append(leaders[0], TopicRecord(f"w{written}"))
            written += 1
        roll = rnd.random()
        if roll < 0.1:
            victim = rnd.choice(VOTERS)
            c.restart(victim, lose_unfsynced=rnd.random() < 0.5)
        elif roll < 0.2:
            c.loop.cuts.clear()
            a, b = rnd.sample(VOTERS, 2)
            c.loop.cut(a, b)
        elif roll < 0.25:
            c.loop.cuts.clear()
    c.loop.heal()
    # once healed, a stable leader commits a new record (retry if leadership moves meanwhile)
    for _attempt in range(5):
        assert c.loop.run_until_true(lambda: _stable_leader(c) is not None, 60_000)
        c.append(_stable_leader(c), TopicRecord("final"))
        c.loop.run_for(3000)
        if any(e.record == TopicRecord("final") for seq in c.committed.values() for e in seq):
            break
    final = _check_committed_prefixes(c)
    assert TopicRecord("final") in [e.record for e in final]
    for v in VOTERS:
        assert [(e.offset, e.record) for e in c.r(v).log][: len(final)] == [(e.offset, e.record) for e in final]
    # one leader per epoch, ever
    leaders_by_epoch: dict[int, set[int]] = {}
    for _t, node, ev in c.loop.traces:
        if ev.kind == "raft_state" and ev.data["role"] == "leader":
            leaders_by_epoch.setdefault(ev.data["epoch"], set()).add(node)
    assert all(len(s) == 1 for s in leaders_by_epoch.values())


def test_log_append_precedes_the_fetch_that_acknowledges_it():
    """A voter's fetch offset is a durable acknowledgement: the LogAppend and
    Fsync of fetched entries come before the next RaftFetchRequest."""
    f = RaftReplica(2, VOTERS, stored(epoch=1, leader=1), CFG, random.Random(1))
    (fetch,) = sends(f.start(1), RaftFetchRequest)  # a follower of a known leader fetches at once
    resp = RaftFetchResponse(1, 1, Errors.NONE, fetch.msg.correlation_id, 0, (entry(0, 1),))
    out = f.handle(resp, 2, 1)
    kinds = [type(e) for e in out if isinstance(e, (LogAppend, Fsync, Send))]
    assert kinds.index(LogAppend) < kinds.index(Fsync) < kinds.index(Send)
    nxt = sends(out, RaftFetchRequest)[0].msg
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (1, 1)


def test_follower_never_truncates_when_the_leader_log_matches():
    f = RaftReplica(2, VOTERS, stored([entry(0, 1), entry(1, 1)], epoch=1, leader=1), CFG, random.Random(1))
    (fetch,) = sends(f.start(1), RaftFetchRequest)
    assert (fetch.msg.fetch_offset, fetch.msg.last_fetched_epoch) == (2, 1)
    out = f.handle(RaftFetchResponse(1, 1, Errors.NONE, fetch.msg.correlation_id, 2), 2, 1)
    assert not [e for e in out if isinstance(e, LogTruncate)]
    assert f.high_watermark == 2


def _follower_at_hw(hw: int) -> tuple[RaftReplica, RaftFetchRequest]:
    """A follower of leader 1 holding offsets 0-2 of epoch 1, told ``hw``
    by its first fetch answer, and the fetch it sends next."""
    f = RaftReplica(2, VOTERS, stored([entry(0, 1), entry(1, 1), entry(2, 1)], epoch=1, leader=1), CFG,
                    random.Random(1))
    (fetch,) = sends(f.start(1), RaftFetchRequest)
    out = f.handle(RaftFetchResponse(1, 1, Errors.NONE, fetch.msg.correlation_id, hw), 2, 1)
    assert f.high_watermark == hw
    (fetch2,) = sends(out, RaftFetchRequest)
    return f, fetch2.msg


def test_follower_refuses_to_truncate_below_its_high_watermark():
    """Seed 004's Leader Completeness: committed entries are never removed. A
    diverging-epoch answer that would cut below the follower's high watermark
    is refused with an error, as Kafka's Raft client and metadata log refuse
    it, and the log keeps every entry."""
    f, fetch = _follower_at_hw(3)
    with pytest.raises(CommittedTruncation, match="to offset 1 is below the high watermark 3"):
        f.handle(RaftFetchResponse(1, 1, Errors.NONE, fetch.correlation_id, 3, diverging_epoch=(1, 1)), 3, 1)
    assert [e.offset for e in f.log] == [0, 1, 2]


def test_follower_truncates_down_to_its_high_watermark_but_no_further():
    """The boundary of the rule above: uncommitted entries (at or above the
    high watermark) are truncated on a diverging-epoch answer."""
    f, fetch = _follower_at_hw(1)
    out = f.handle(RaftFetchResponse(1, 1, Errors.NONE, fetch.correlation_id, 1, diverging_epoch=(1, 1)), 3, 1)
    assert [e.offset for e in f.log] == [0]
    assert [e.offset for e in out if isinstance(e, LogTruncate)] == [1]


def test_restarted_replica_hands_up_nothing_until_caught_up_with_the_leader_hw():
    """After a restart the image must not pass through stale intermediate
    states: committed entries are withheld until the log reaches the HW the
    leader first reported, then handed up in one go."""
    f = RaftReplica(9, VOTERS, stored([entry(0, 1), entry(1, 1), entry(2, 1)], epoch=1, leader=1), CFG,
                    random.Random(1), observer=True)
    (fetch,) = sends(f.start(0), RaftFetchRequest)
    out = f.handle(RaftFetchResponse(1, 1, Errors.NONE, fetch.msg.correlation_id, 5, (entry(3, 1),)), 1, 1)
    assert f.high_watermark == 4 and not f.caught_up
    assert f.take_committed() == []
    (fetch2,) = sends(out, RaftFetchRequest)
    f.handle(RaftFetchResponse(1, 1, Errors.NONE, fetch2.msg.correlation_id, 6, (entry(4, 1),)), 2, 1)
    assert f.caught_up
    assert [e.offset for e in f.take_committed()] == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------------------
# pre-vote (KIP-996)
# ---------------------------------------------------------------------------


def test_prevote_changes_no_state_and_is_refused_while_the_leader_is_heard():
    f = RaftReplica(2, VOTERS, stored([entry(0, 1)], epoch=1, leader=1), CFG, random.Random(1))
    f.start(0)
    out = f.handle(VoteRequest(3, 2, 1, 1, pre_vote=True), 10, 3)
    resp = vote_reply(out)
    assert resp.pre_vote and not resp.vote_granted
    assert (f.epoch, f.voted_for, f.leader_id) == (1, -1, 1)
    assert not [e for e in out if isinstance(e, (FileWrite, Fsync))]
    # once the leader has been silent for the fetch timeout, the pre-vote is granted
    resp = vote_reply(f.handle(VoteRequest(3, 2, 1, 1, pre_vote=True), CFG.controller_quorum_fetch_timeout_ms + 1, 3))
    assert resp.vote_granted and f.epoch == 1 and f.voted_for == -1


def test_prevote_refused_to_a_shorter_log():
    f = replica(2, stored([entry(0, 1), entry(1, 1)], epoch=1))
    assert not vote_reply(f.handle(VoteRequest(3, 2, 1, 1, pre_vote=True), 10, 3)).vote_granted


def test_prospective_candidate_bumps_its_epoch_only_after_a_majority_of_prevotes():
    r = replica(1, seed=1)
    out = r.tick(10_000)
    reqs = sends(out, VoteRequest)
    assert reqs and all(s.msg.pre_vote and s.msg.candidate_epoch == 1 for s in reqs)
    assert r.epoch == 0 and not [e for e in out if isinstance(e, FileWrite)]
    r.handle(VoteResponse(2, Errors.NONE, 0, -1, False, pre_vote=True), 10_001, 2)
    assert r.epoch == 0
    out = r.handle(VoteResponse(3, Errors.NONE, 0, -1, True, pre_vote=True), 10_002, 3)
    assert r.epoch == 1 and r.role == "candidate"
    assert all(not s.msg.pre_vote for s in sends(out, VoteRequest))


def test_isolated_voter_rejoining_does_not_disrupt_the_leader():
    c = Cluster(seed=12)
    leader = c.wait_leader()
    c.loop.run_for(1000)
    epoch = c.r(leader).epoch
    follower = next(v for v in VOTERS if v != leader)
    c.loop.isolate(follower)
    c.loop.run_for(10_000)
    assert c.r(follower).epoch == epoch  # pre-votes failed: no epoch inflation
    c.loop.heal()
    c.loop.run_for(5_000)
    assert c.leaders() == [leader] and c.r(leader).epoch == epoch
    assert c.r(follower).leader_id == leader


def test_resigning_leader_hands_over_without_waiting_for_the_fetch_timeout():
    c = Cluster(seed=13)
    leader = c.wait_leader()
    c.loop.run_for(1000)
    epoch = c.r(leader).epoch
    c.loop._apply(leader, c.r(leader).resign(c.loop.now))
    c.loop.crash(leader)
    t0 = c.loop.now
    new = c.wait_leader(among=[v for v in VOTERS if v != leader])
    assert c.r(new).epoch == epoch + 1
    assert c.loop.now - t0 < CFG.controller_quorum_fetch_timeout_ms


# ---------------------------------------------------------------------------
# clocks (docs/architecture.md, "Clocks")
# ---------------------------------------------------------------------------


def _leader_with_parked_fetch(observer: int = 9) -> RaftReplica:
    """A single-voter leader holding one observer's fetch parked (nothing new
    since its last answer), at wall 1000 = monotonic 1000."""
    r = RaftReplica(1, (1,), StoredState(), CFG, random.Random(0))
    r.start(0, 0)
    assert r.is_leader
    req = RaftFetchRequest(observer, r.epoch, r.end_offset, r.last_epoch, correlation_id=1)
    assert sends(r.handle(req, 1000, observer, 1000), RaftFetchResponse)  # first answer: the HW is news
    parked = r.handle(RaftFetchRequest(observer, r.epoch, r.end_offset, r.last_epoch, correlation_id=2), 1000, observer, 1000)
    assert sends(parked, RaftFetchResponse) == []
    return r


def test_forward_wall_jump_does_not_answer_a_parked_raft_fetch_early_its_expiry_is_monotonic():
    """Kafka's Raft client parks a fetch with nothing new in a purgatory whose
    expiration service runs on a SystemTimer (``hiResClockMs``, monotonic): a
    wall-clock jump of ten seconds answers nothing; the fetch is answered when
    the monotonic clock reaches fetch max wait."""
    r = _leader_with_parked_fetch()
    jumped = r.tick(1000 + 10_000, 1100)
    assert sends(jumped, RaftFetchResponse) == []
    # the wake-up for the parked fetch is its monotonic deadline in wall time
    assert min(t.at for t in jumped if isinstance(t, Timer)) == 1000 + FETCH_MAX_WAIT_MS + 10_000 - 100
    assert sends(r.tick(1000 + 10_000 + FETCH_MAX_WAIT_MS - 100, 1000 + FETCH_MAX_WAIT_MS), RaftFetchResponse)


def test_backward_wall_jump_does_not_hold_a_parked_raft_fetch_past_fetch_max_wait():
    """The other direction: the wall clock going back a minute does not keep
    the parked fetch waiting; it is answered at fetch max wait, monotonic."""
    r = _leader_with_parked_fetch()
    assert sends(r.tick(1000 - 60_000 + FETCH_MAX_WAIT_MS, 1000 + FETCH_MAX_WAIT_MS), RaftFetchResponse)


def test_forward_wall_jump_on_a_raft_follower_starts_an_election_its_fetch_timeout_is_wall_clock():
    """KafkaRaftClient.poll reads ``time.milliseconds()``: a follower whose
    wall clock jumps past controller.quorum.fetch.timeout.ms since its last
    good fetch starts a (pre-)vote at once, though no time has passed."""
    r = replica(2, stored([entry(0, 1)], epoch=1, leader=1))
    assert r.role == "follower" and r.leader_id == 1
    effects = r.tick(CFG.controller_quorum_fetch_timeout_ms + 1, 1)
    votes = sends(effects, VoteRequest)
    assert votes and all(v.msg.pre_vote for v in votes)


def _follower_fetched_at(now: int) -> RaftReplica:
    """Voter 2 following leader 1 in epoch 1, its fetch answered at wall ``now``."""
    r = RaftReplica(2, VOTERS, stored([entry(0, 1)], epoch=1, leader=1), CFG, random.Random(0))
    r.start(0)
    r.tick(now)
    (req,) = sends(r.tick(now), RaftFetchRequest) or [None]
    corr = req.msg.correlation_id if req is not None else r._inflight[0]
    r.handle(RaftFetchResponse(1, 1, Errors.NONE, corr, 1), now, 1)
    return r


def test_backward_wall_jump_holds_a_raft_followers_fetch_timeout_until_the_clock_catches_up():
    """Kafka's follower fetch timer never moves backwards (``Timer.update``
    keeps the larger time): a fetch answered after the wall clock went back a
    minute resets the timeout from the time the follower had already seen, so
    the follower stands for election only a fetch timeout after its clock is
    back there, not a fetch timeout after the answer."""
    fetch_timeout = CFG.controller_quorum_fetch_timeout_ms
    r = _follower_fetched_at(60_000)
    r.tick(0)  # the wall clock jumps back a minute
    (req,) = sends(r.tick(0), RaftFetchRequest) or [None]
    corr = req.msg.correlation_id if req is not None else r._inflight[0]
    r.handle(RaftFetchResponse(1, 1, Errors.NONE, corr, 1), 0, 1)
    assert sends(r.tick(fetch_timeout + 1), VoteRequest) == []
    assert sends(r.tick(60_000 + fetch_timeout), VoteRequest)


def test_backward_wall_jump_on_the_quorum_leader_delays_its_check_quorum_resignation():
    """The leader's check-quorum timer is reset from the largest time the
    leader state has seen: with the voters heard right after a backward jump
    of a minute and silent from then on, the leader resigns 1.5 fetch
    timeouts after its clock is back where it was, not after the silence."""
    limit = CFG.controller_quorum_fetch_timeout_ms * 3 // 2
    r = replica(1)
    _elect(r, 0)  # leader at wall 10,001
    for v in (2, 3):  # a minute of fetches later
        r.handle(RaftFetchRequest(v, r.epoch, 0, -1), 70_000, v)
    assert r.is_leader
    r.tick(10_000)  # the wall clock jumps back a minute; the voters fetch once more
    for v in (2, 3):
        r.handle(RaftFetchRequest(v, r.epoch, 0, -1), 10_000, v)
    r.tick(10_000 + limit + 1)
    assert r.is_leader
    r.tick(70_000 + limit)
    assert not r.is_leader


def test_forward_wall_jump_on_a_leaderless_voter_starts_an_election_its_election_timer_is_wall_clock():
    """A voter without a leader waits a randomised election timeout on
    ``time.milliseconds()``: a wall-clock jump of twice the largest timeout
    starts its pre-vote at the next poll, with no time passed."""
    r = replica(2)
    assert r.leader_id == -1 and sends(r.tick(1, 1), VoteRequest) == []
    votes = sends(r.tick(2 * 2 * CFG.controller_quorum_election_timeout_ms, 2), VoteRequest)
    assert votes and all(v.msg.pre_vote for v in votes)


def test_backward_wall_jump_on_a_leaderless_voter_holds_its_election_until_the_clock_catches_up():
    """The other direction: the election deadline is a wall-clock instant,
    so a voter whose clock went back a minute does not stand for election a
    timeout later, only once its clock is past the deadline again."""
    r = replica(2)
    t = 2 * 2 * CFG.controller_quorum_election_timeout_ms
    assert sends(r.tick(t - 60_000, t), VoteRequest) == []
    assert sends(r.tick(t, t + 60_000), VoteRequest)


def test_a_leader_that_steps_down_answers_its_parked_fetches_not_leader_or_follower():
    """KafkaRaftClient completes its fetch purgatory exceptionally when it
    resigns or becomes a follower, so fetchers send again at once instead of
    waiting out their own request timeout, which a backward jump of their
    wall clock can stretch by the whole jump. Dropping the parked fetch left
    an observer without metadata until its clock caught up again."""
    r = _leader_with_parked_fetch(observer=9)
    (answer,) = sends(r.resign(1100, 1100), RaftFetchResponse)
    assert answer.dst == 9
    assert (answer.msg.error, answer.msg.correlation_id) == (Errors.NOT_LEADER_OR_FOLLOWER, 2)
    assert sends(r.tick(1100 + FETCH_MAX_WAIT_MS, 1100 + FETCH_MAX_WAIT_MS), RaftFetchResponse) == []


def test_an_observer_told_not_leader_fetches_again_after_the_retry_backoff_not_its_resend_timeout():
    """The observer's side of the rule above: with its wall clock gone back a
    minute since it sent the fetch, the error answer lets it fetch again a
    retry backoff later; without an answer it would resend only when its
    wall clock is back where it sent the fetch."""
    o = replica(9, stored([entry(0, 1)], epoch=1, leader=1), observer=True)
    (req,) = sends(o.tick(60_000), RaftFetchRequest)
    assert sends(o.tick(1_000), RaftFetchRequest) == []  # the clock went back: the fetch is still in flight
    o.handle(RaftFetchResponse(-1, 1, Errors.NOT_LEADER_OR_FOLLOWER, req.msg.correlation_id, 1), 1_000, 1)
    assert sends(o.tick(1_000 + RETRY_BACKOFF_MS), RaftFetchRequest)


def test_backward_wall_jump_holds_an_observers_lost_fetch_until_its_wall_clock_request_timeout():
    """A broker's metadata fetch (a Raft observer's) sent while its wall
    clock ran 55 s ahead and lost on the way is given up only when the wall
    clock, set back, reaches the send time plus the request timeout: about
    55 s of silence on the metadata path, though the monotonic clock moved a
    few seconds. Kafka 4.4 does the same (docs/architecture.md, "Clocks"):
    ``KafkaRaftClient.poll`` passes ``time.milliseconds()`` to its
    ``RequestManager``, whose ``hasRequestTimedOut`` compares it with the
    wall time of the send, and ``NetworkClient`` times an in-flight request
    out by ``max(0, now - sendTimeMs)`` on the same wall clock. Seen in the
    simulator's swarm seed 308 (tests/sim/schedules/
    terminated-brokers-outlast-their-grace.json), where broker n3 heard no
    metadata for 55.8 s."""
    jump = 55_101
    o = replica(9, stored([entry(0, 1)], epoch=1, leader=1), observer=True)
    sent_at = 3_000 + jump  # wall; monotonic 3000
    (req,) = sends(o.tick(sent_at, 3_000), RaftFetchRequest)
    assert req.dst == 1  # and it never arrives (a partition dropped it)
    back = o.tick(3_300, 3_300)  # the clock nemesis sets the wall clock back
    assert sends(back, RaftFetchRequest) == []
    # its next wake-up is the request timeout on the wall clock, a jump away
    assert min(t.at for t in back if isinstance(t, Timer)) == sent_at + FETCH_RESEND_MS
    assert sends(o.tick(sent_at + FETCH_RESEND_MS - 1, sent_at + FETCH_RESEND_MS - 1 - jump), RaftFetchRequest) == []
    assert sends(o.tick(sent_at + FETCH_RESEND_MS, sent_at + FETCH_RESEND_MS - jump), RaftFetchRequest)
