"""Atomic batches of the metadata log (Kafka's ControllerResult.atomicOf and
the raft client's atomic append): a CreateTopics request's records are
appended as one batch, replicated whole and committed whole, so a failover
never leaves a topic without its partitions; a batch a crash cut short is
dropped on restart."""

from __future__ import annotations

import random

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import Fsync, LogAppend, LogTruncate, Send
from reference_impl.core.messages import (
    CreateTopicsRequest,
    Errors,
    MetadataEntry,
    NewTopic,
    NoOpRecord,
    RaftFetchRequest,
    RaftFetchResponse,
    TopicRecord,
    VoteResponse,
)
from reference_impl.core.raft import RaftReplica
from reference_impl.core.storage import METADATA_LOG, StoredState
from tests.core.controllerkit import CTL, OneController
from tests.core.test_controller import Cluster

VOTERS = (1, 2, 3)
CFG = ProtocolConfig()


def _leader(seed: int = 3) -> tuple[RaftReplica, int]:
    """Voter 1, elected with voter 2's vote (the NoOp of its epoch at offset 0)."""
    r = RaftReplica(1, VOTERS, StoredState(), CFG, random.Random(seed))
    r.start(0)
    r.tick(10_000)
    r.handle(VoteResponse(2, Errors.NONE, r.epoch, -1, True, pre_vote=True), 10_001, 2)
    r.handle(VoteResponse(2, Errors.NONE, r.epoch, -1, True), 10_001, 2)
    assert r.is_leader
    return r, 10_001


def _fetch(r: RaftReplica, offset: int, now: int, max_entries: int) -> tuple[MetadataEntry, ...]:
    req = RaftFetchRequest(2, r.epoch, offset, r.log[offset - 1].epoch if offset else -1, 9, max_entries=max_entries)
    (s,) = [e for e in r.handle(req, now, 2) if isinstance(e, Send) and isinstance(e.msg, RaftFetchResponse)]
    return s.msg.entries


def test_a_create_topics_request_is_appended_as_one_batch_one_log_append_and_one_fsync():
    c = OneController(ProtocolConfig(), 0)
    effects = c.loop.deliver(CTL, CreateTopicsRequest("r", (NewTopic("a", 3, 1), NewTopic("b", 2, 1))), 0)
    appends = [e for e in effects if isinstance(e, LogAppend)]
    assert len(appends) == 1 and len([e for e in effects if isinstance(e, Fsync)]) == 1
    (entries,) = [a.entries for a in appends]
    assert [type(e.record).__name__ for e in entries] == ["TopicRecord"] + ["PartitionRecord"] * 3 + [
        "TopicRecord"] + ["PartitionRecord"] * 2
    assert [e.ends_batch for e in entries] == [False] * 6 + [True]


def test_a_fetch_answer_never_ends_inside_a_batch_and_takes_a_first_batch_whole():
    r, now = _leader()
    r.append([TopicRecord("alone")], now)  # offset 1, a batch of its own
    r.append([TopicRecord(f"b{i}") for i in range(5)], now)  # offsets 2..6, one batch
    # the limit (3 entries) falls inside the batch: the answer stops before it
    assert [e.offset for e in _fetch(r, 0, now + 1, max_entries=3)] == [0, 1]
    # the batch comes first: taken whole though it holds more than the limit
    assert [e.offset for e in _fetch(r, 2, now + 2, max_entries=3)] == [2, 3, 4, 5, 6]
    # single-entry batches are cut at the limit exactly, as before
    assert [e.offset for e in _fetch(r, 0, now + 3, max_entries=1)] == [0]


def test_a_batch_cut_short_by_a_crash_is_dropped_from_memory_and_disk_on_restart():
    st = StoredState()
    st.logs[METADATA_LOG] = [MetadataEntry(0, 1, NoOpRecord()), MetadataEntry(1, 1, TopicRecord("t"), False),
                             MetadataEntry(2, 1, TopicRecord("u"), False)]
    r = RaftReplica(2, VOTERS, st, CFG, random.Random(1))
    assert [e.offset for e in r.log] == [0]
    effects = r.start(0)
    assert LogTruncate(METADATA_LOG, 1) in effects
    (trace,) = [e.data for e in effects if getattr(e, "kind", None) == "raft_truncate"]
    assert (trace["to"], trace["leo_before"], trace["reason"]) == (1, 3, "incomplete-batch")


def test_a_failover_right_after_create_topics_never_commits_a_topic_without_its_partitions():
    """Nothing reaches the active controller any more as soon as it has
    appended a CreateTopics of 40 partitions. Whatever its followers had fetched, the
    controller elected next commits the topic with all 40 partitions or not
    at all; appended one record at a time, a follower could hold the
    TopicRecord alone, and the next controller commit a topic with none."""
    outcomes = set()
    for seed in range(6):
        c = Cluster(voters=(100, 101, 102), seed=seed)
        c.start_brokers(0, 1, 2)
        old = c.active_id()
        c.loop.run_for(700)  # the followers' fetches are parked at the leader
        c.loop.deliver(old, CreateTopicsRequest("r", (NewTopic("big", 40, 3),)), 0)
        # what it sends still arrives, nothing reaches it: the followers get
        # the answers to their parked fetches, the leader never their acks
        c.loop.drop = lambda src, dst, msg, old=old: dst == old
        assert c.loop.run_until_true(lambda: c.active_id() not in (None, old), 30_000)
        c.loop.run_for(2000)
        for v in (100, 101, 102):
            parts = [tp for tp in c.ctl(v).image.partitions if tp.topic == "big"]
            assert ("big" in c.ctl(v).image.topics) == bool(parts)
            assert len(parts) in (0, 40), f"controller {v} committed big with {len(parts)} partitions"
        outcomes.add("big" in c.active.image.topics)
    assert outcomes == {True} or outcomes == {True, False}  # the batch reached a follower at least once
