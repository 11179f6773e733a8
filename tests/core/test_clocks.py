"""Which clock each broker timer reads, shown on the broker role with a
wall-clock jump (``now`` moves, ``mono`` does not), as Kafka 4.4's read it
(docs/architecture.md, "Clocks"). The simulator's and the real processes'
versions of these are tests/sim/test_clocks.py and tests/server/test_clocks.py.
"""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.effects import Halt
from reference_impl.core.messages import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    ClientFetchResponse,
    Errors,
    ReplicaFetchRequest,
    ReplicaFetchResponse,
)

from tests.core.brokerkit import TP, MetaFeed, make_broker, replies, replica_fetch, sends
from tests.core.test_broker import client_fetch, leader, produce

CFG = ProtocolConfig()
LAG = CFG.replica_lag_time_max_ms


def test_forward_wall_jump_does_not_expire_a_parked_consumer_fetch_delayed_fetch_is_monotonic():
    """DelayedFetch waits in a purgatory on a SystemTimer (``hiResClockMs``):
    a consumer's long poll outlives a wall-clock jump of a minute and ends
    empty when the monotonic clock reaches its max wait."""
    b, _ = leader()
    assert replies(client_fetch(b, 0, 1, max_wait_ms=500), ClientFetchResponse) == []
    assert replies(b.tick(60_001, 2), ClientFetchResponse) == []
    (resp,) = replies(b.tick(60_500, 501), ClientFetchResponse)
    assert resp.partitions[0].batches == ()


def test_forward_wall_jump_does_not_cut_short_the_controlled_shutdown_wait():
    """The broker waits for the controller's leave to shut down on a future's
    timed get (monotonic): a wall-clock jump of twice the wait does not end it."""
    b, _ = leader()
    assert sends(b.begin_controlled_shutdown(10, 10), BrokerHeartbeatRequest)
    assert not any(isinstance(e, Halt) for e in b.tick(10 + 2 * CFG.request_timeout_ms, 11))
    assert any(isinstance(e, Halt) for e in b.tick(20 + 2 * CFG.request_timeout_ms, 10 + CFG.request_timeout_ms))


def test_forward_wall_jump_on_the_leader_shrinks_the_isr_at_the_next_monotonic_isr_expiration_run():
    """ReplicaManager runs isr-expiration every replica.lag.time.max.ms / 2 on
    KafkaScheduler (monotonic), and Partition judges the lag on
    ``time.milliseconds()`` (wall): after a forward jump of twice the lag time
    nothing happens until the schedule's next run, which then proposes the
    shrink though no real time has passed."""
    b, _ = leader()
    assert produce(b, 1, acks=1) is not None
    due = LAG // 2
    assert sends(b.tick(2 * LAG, due - 1), AlterPartitionRequest) == []
    (req,) = sends(b.tick(2 * LAG + 1, due), AlterPartitionRequest)
    assert [r for r, _epoch in req.msg.items[0].new_isr] == [1]


def test_without_a_jump_the_same_isr_expiration_run_keeps_the_followers():
    """The contrast for the test above: at the same monotonic run, with the
    wall clock where it should be, the followers are within the lag time."""
    b, _ = leader()
    produce(b, 1, acks=1)
    replica_fetch(b, 2, 0, 2)
    replica_fetch(b, 3, 0, 2)
    assert sends(b.tick(LAG // 2, LAG // 2), AlterPartitionRequest) == []


def _follower_with_fetch_in_flight():
    b = make_broker(2)
    (s,) = sends(b.apply_committed(MetaFeed().cluster(leader=1), 0, 0), ReplicaFetchRequest)
    return b, s.msg


def test_forward_wall_jump_on_a_follower_times_out_its_replica_fetch_request_timeout_is_wall_clock():
    """NetworkClient times requests out on ``time.milliseconds()``: a forward
    jump past the fetch's request timeout gives the fetch up and sends
    another at once."""
    b, _ = _follower_with_fetch_in_flight()
    assert len(sends(b.tick(b.fetch_timeout_ms, 1), ReplicaFetchRequest)) == 1


def test_backward_wall_jump_on_a_follower_delays_its_fetch_backoff_by_the_jump():
    """A failed fetch delays the partitions by replica.fetch.backoff.ms on
    ``Time.SYSTEM.milliseconds()`` (Kafka 4.4's PartitionFetchState due
    time, wall): after the wall clock goes back a minute the follower waits
    for the wall clock to reach the due time again."""
    b, req = _follower_with_fetch_in_flight()
    b.handle(ReplicaFetchResponse(1, req.correlation_id, Errors.NOT_LEADER_OR_FOLLOWER, ()), 10, 1, 10)
    due = 10 + CFG.replica_fetch_backoff_ms
    assert sends(b.tick(due - 60_000, due), ReplicaFetchRequest) == []
    assert len(sends(b.tick(due, due + 60_000), ReplicaFetchRequest)) == 1


def test_the_clock_table_has_a_test_for_every_timer_and_names_only_tests_that_exist():
    """docs/architecture.md, "Clocks": every row names at least one test, and
    each named test is defined."""
    import re
    from pathlib import Path

    from tests.core.test_variants import _test_names

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("### Clocks"):doc.index("## Trace events")]
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| timer") and "---" not in r]
    assert len(rows) >= 12
    defined = _test_names()
    for row in rows:
        named = re.findall(r"`(test_\w+)`", row)
        assert named and [t for t in named if t not in defined] == [], row[:60]


def test_backward_wall_jump_does_not_postpone_a_refused_registrations_retry_it_is_monotonic():
    """BrokerLifecycleManager schedules its next communication on
    ``time.nanoseconds()`` (a deadline of its KafkaEventQueue): a broker whose
    registration was refused as a duplicate (its previous incarnation's
    session still lives) while its wall clock ran a minute ahead asks again a
    heartbeat interval later on the monotonic clock, even though the wall
    clock has meanwhile gone back by the minute. On the wall clock it would
    wait the minute out, with its power loss unknown to the controller."""
    import random

    from reference_impl.core.messages import BrokerEndpoint, BrokerRegistrationRequest, BrokerRegistrationResponse
    from reference_impl.core.replica_manager import BrokerRole
    from reference_impl.core.storage import StoredState

    b = BrokerRole(1, CFG, (100,), StoredState(), random.Random(1), "inc-2", BrokerEndpoint(1, "127.0.0.1", 9001))
    (first,) = sends(b.start(0, 0), BrokerRegistrationRequest)
    ahead = 60_000
    assert b.handle(BrokerRegistrationResponse(Errors.DUPLICATE_BROKER_REGISTRATION), ahead + 10, first.dst, 10) == []
    later = 10 + CFG.broker_heartbeat_interval_ms
    assert sends(b.tick(later - 1, later - 1), BrokerRegistrationRequest) == []
    (again,) = sends(b.tick(later, later), BrokerRegistrationRequest)
    assert again.dst == first.dst
