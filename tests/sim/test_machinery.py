"""The simulator's own machinery, without the protocol core: event order,
clocks, network grudges, page-cache disks, nemesis vocabulary (what TCP
makes of a cut: tests/sim/test_tcp_network.py)."""

from __future__ import annotations

import random

import pytest

from reference_impl.core.effects import FileDelete, FileWrite, Fsync, LogAppend, LogTruncate, LogTruncateFully
from reference_impl.core.messages import Batch, MetadataEntry, NoOpRecord
from reference_impl.core.storage import QuorumState
from reference_impl.sim.clients import choose
from reference_impl.sim.clock import NodeClock
from reference_impl.sim.disk import Disk
from reference_impl.sim.events import _WHEEL, EventLoop, StopFlag, TimeoutQueue
from nemesis.partition import complete_grudge, isolate, majorities_ring
from reference_impl.sim.network import LinkProfile, Network


def b(off: int, epoch: int = 0, count: int = 1) -> Batch:
    return Batch(off, epoch, count, tuple(range(off, off + count)))


# -- event loop --------------------------------------------------------------------------------


def test_events_at_the_same_time_run_in_scheduling_order() -> None:
    loop = EventLoop()
    seen: list[str] = []
    for name in "abcde":
        loop.at(5, seen.append, name)
    loop.at(3, seen.append, "first")
    loop.run_until(10)
    assert seen == ["first", "a", "b", "c", "d", "e"]
    assert loop.now == 10


def test_run_until_stops_when_condition_holds_and_keeps_later_events() -> None:
    loop = EventLoop()
    seen: list[int] = []
    for t in (1, 2, 3, 4):
        loop.at(t, seen.append, t)
    loop.run_until(100, stop=lambda: len(seen) == 2)
    assert seen == [1, 2] and loop.now == 2 and loop.pending() == 2


def test_a_stop_flag_stops_the_loop_after_the_event_that_raised_it_as_a_condition_would() -> None:
    """The flag form of ``stop`` (``StopFlag``, what the virtual-time
    interpreter hands the loop): read after every event, it stops the run
    right after the event that raised it, inside its millisecond, and the
    next run resumes at the next event; called, it answers the condition."""
    loop = EventLoop()
    flag = StopFlag()
    seen: list[str] = []

    def raise_flag() -> None:
        seen.append("raise")
        flag.up = True

    loop.at(3, seen.append, "a")
    loop.at(5, raise_flag)
    loop.at(5, seen.append, "b")
    loop.at(9, seen.append, "c")
    assert not flag()
    loop.run_until(100, flag)
    assert seen == ["a", "raise"] and loop.now == 5 and loop.pending() == 2 and flag()
    loop.run_until(100, flag)  # still up: stops after the next event
    assert seen == ["a", "raise", "b"] and loop.now == 5
    flag.up = False
    loop.run_until(100, flag)
    assert seen == ["a", "raise", "b", "c"] and loop.now == 100


def test_events_scheduled_in_the_past_run_now_not_before() -> None:
    loop = EventLoop()
    loop.run_until(50)
    got: list[int] = []
    loop.at(10, lambda: got.append(loop.now))
    loop.run_until(60)
    assert got == [50]


def test_a_stop_inside_a_millisecond_resumes_at_its_next_event_and_runs_none_twice() -> None:
    loop = EventLoop()
    seen: list[str] = []
    for name in "abcde":
        loop.at(5, seen.append, name)
    loop.run_until(100, stop=lambda: len(seen) == 2)
    assert seen == ["a", "b"] and loop.now == 5 and loop.pending() == 3
    loop.at(5, seen.append, "f")  # due now, scheduled after the others
    loop.run_until(100)
    assert seen == ["a", "b", "c", "d", "e", "f"] and loop.pending() == 0


def test_a_milliseconds_emptied_bucket_serves_later_ones_and_runs_none_of_its_old_events_again() -> None:
    """The loop keeps a millisecond's emptied bucket for a later one
    (``EventLoop._spare``): each later millisecond runs its own events, in
    the order they were set, and nothing that ran before runs again, nor
    does a bucket a stop left in its slot go to two milliseconds."""
    loop = EventLoop()
    ran: list[tuple[int, str]] = []

    def note(tag: str) -> None:
        ran.append((loop.now, tag))
        if tag == "1a":
            loop.at(3, note, "3a")  # set while its millisecond 1 runs: a bucket taken from the spares
        if tag == "3a":
            loop.at(3, note, "3b")

    loop.at(1, note, "1a")
    loop.at(1, note, "1b")
    loop.at(2, note, "2a")
    loop.run_until(2)
    loop.at(5, note, "5a")
    loop.at(4, note, "4a")
    flag = StopFlag()
    loop.at(4, flag.__setattr__, "up", True)
    loop.at(4, note, "4b")
    loop.run_until(10, flag)  # stops inside 4: its bucket keeps 4b in its slot
    loop.at(6, note, "6a")
    loop.run_until(10)
    assert ran == [(1, "1a"), (1, "1b"), (2, "2a"), (3, "3a"), (3, "3b"), (4, "4a"), (4, "4b"), (5, "5a"),
                   (6, "6a")]


def test_an_event_that_raises_is_not_run_again_and_the_rest_of_its_millisecond_still_runs() -> None:
    loop = EventLoop()
    seen: list[str] = []

    def boom() -> None:
        seen.append("boom")
        raise RuntimeError("boom")

    loop.at(5, seen.append, "a")
    loop.at(5, boom)
    loop.at(5, seen.append, "c")
    with pytest.raises(RuntimeError):
        loop.run_until(10)
    loop.run_until(10)
    assert seen == ["a", "boom", "c"] and loop.now == 10


@pytest.mark.parametrize("seed", range(8))
def test_events_run_in_time_then_sequence_order_whoever_schedules_them(seed: int) -> None:
    """The calendar against the order it promises, ``(time, seq)``: events
    due now, later or in the past, scheduled from inside other events, some
    put back under a sequence number taken earlier (as a TimeoutQueue does),
    and the run stopped and resumed twice."""
    rng = random.Random(seed)
    loop = EventLoop()
    ran: list[int] = []
    expected: list[tuple[int, int]] = []  # (time, seq) of everything scheduled
    held: list[tuple[int, int]] = []  # sequence numbers taken, placed later

    def schedule(when: int) -> None:
        loop.at(when, event, loop._seq + 1)
        expected.append((max(when, loop.now), loop._seq))

    def event(seq: int) -> None:
        ran.append(seq)
        if len(ran) > 400:
            return
        for _ in range(rng.choice((1, 2, 2))):
            r = rng.random()
            if r < 0.5:
                schedule(loop.now + rng.choice((0, 0, 1, 2, 7)))
            elif r < 0.6:
                schedule(loop.now - 3)  # in the past: runs now
            elif r < 0.8:
                loop._seq += 1  # taken now, placed later
                held.append((loop.now + rng.choice((0, 1, 3, 9)), loop._seq))
            elif held:
                # placed before its place comes up, as a TimeoutQueue does
                when, s = held.pop(rng.randrange(len(held)))
                if (when, s) > (loop.now, seq):
                    loop.place(when, s, event, (s,))
                    expected.append((when, s))

    for _ in range(5):
        schedule(rng.randrange(4))
    loop.run_until(10_000, stop=lambda: len(ran) >= 37)
    loop.run_until(10_000, stop=lambda: len(ran) >= 80)
    loop.run_until(10_000)
    placed_early = [s for (_, s), (_, e) in zip(expected, expected[1:]) if s > e]
    assert len(ran) > 100 and placed_early
    assert ran == [s for _, s in sorted(expected)]
    assert loop.pending() == 0


@pytest.mark.parametrize("seed", range(8))
def test_events_near_and_far_across_the_wheels_span_run_in_time_then_sequence_order(seed: int) -> None:
    """The calendar's two parts (``events.py``: the wheel of ``_WHEEL`` ms
    slots, and the far buckets for times further ahead) against the order it
    promises, ``(time, seq)``: events set just inside, at and beyond the
    span, some put back under a sequence number taken earlier into either
    part, a far time's later events set once it is near (they share its
    millisecond), and the run stopped and resumed."""
    rng = random.Random(seed)
    loop = EventLoop()
    ran: list[int] = []
    expected: list[tuple[int, int]] = []
    held: list[tuple[int, int]] = []
    spans = (0, 1, 5, _WHEEL - 1, _WHEEL, _WHEEL + 3, 2 * _WHEEL + 1, 3 * _WHEEL)

    def schedule(when: int) -> None:
        loop.at(when, event, loop._seq + 1)
        expected.append((max(when, loop.now), loop._seq))

    def event(seq: int) -> None:
        ran.append(seq)
        if len(ran) > 300:
            return
        for _ in range(rng.choice((1, 2, 2, 3))):
            r = rng.random()
            if r < 0.45:
                schedule(loop.now + rng.choice(spans))
            elif r < 0.6:
                # a far time already scheduled, now within the span or not
                far = [t for t, _ in expected if t >= loop.now]
                schedule(rng.choice(far) if far else loop.now)
            elif r < 0.8:
                loop._seq += 1  # taken now, placed later
                held.append((loop.now + rng.choice(spans), loop._seq))
            elif held:
                when, s = held.pop(rng.randrange(len(held)))
                if (when, s) > (loop.now, seq):
                    loop.place(when, s, event, (s,))
                    expected.append((when, s))

    for _ in range(8):
        schedule(rng.choice(spans))
    loop.run_until(50 * _WHEEL, stop=lambda: len(ran) >= 41)
    loop.run_until(50 * _WHEEL, stop=lambda: len(ran) >= 90)
    loop.run_until(50 * _WHEEL)
    assert len(ran) > 100 and max(t for t, _ in expected) > 2 * _WHEEL
    assert ran == [s for _, s in sorted(expected)]
    assert loop.pending() == 0 and loop.now == 50 * _WHEEL


def test_an_arrival_is_reused_only_once_its_millisecond_has_run_to_the_end() -> None:
    """The network takes a message's arrival entry back for the next message
    (``Event.done``) only after every entry of its millisecond has run,
    never while it runs (its seq must not change under a bisection), and not
    the entries a stopped run left behind it (they are gone from the
    calendar); a reused entry delivers its new message, from its sender."""
    loop = EventLoop()
    net = Network(loop, random.Random(1), LinkProfile(min_ms=5, jitter_ms=0.0))
    got: list[tuple[object, str]] = []
    net.attach(2, lambda src, msg: got.append((src, msg)))
    net.attach("c1", lambda src, msg: got.append((src, msg)))
    for m in ("a", "b", "c"):
        net.send(1, 2, m)  # all due at 5 ms
    loop.run_until(100, stop=lambda: len(got) >= 2)
    assert got == [(1, "a"), (1, "b")] and net._spares == []
    net.send(1, 2, "d")  # a new entry: none is spare
    loop.run_until(100)
    assert got[2:] == [(1, "c"), (1, "d")] and len(net._spares) == 2  # "c"'s and "d"'s
    net.send(2, "c1", "e")
    net.send(1, 2, "f")
    assert net._spares == []
    loop.run_until(200)
    assert got[4:] == [(2, "e"), (1, "f")] and len(net._spares) == 2


def test_a_first_event_runs_ahead_of_its_milliseconds_other_events_whenever_it_was_set() -> None:
    """Set long before (a replay's step, at its op) or just before (the
    told story's step, after its looks), it acts at the same point: ahead
    of the millisecond's ordinary events, after the first events set for
    it before, though they were set later."""
    for set_at in (0, 18):
        loop = EventLoop()
        seen: list[str] = []
        loop.at(10, lambda: loop.at(20, seen.append, "set at 10"))
        loop.at(19, lambda: loop.at(20, seen.append, "set at 19"))
        loop.at(set_at, lambda: loop.first(20, seen.append, "first"))
        loop.at(19, lambda: loop.first(20, seen.append, "first, set at 19"))
        loop.run_until(30)
        assert seen == ["first", "first, set at 19", "set at 10", "set at 19"], set_at


def test_a_first_event_set_for_now_by_a_first_event_joins_the_head_and_by_any_other_runs_after_those_due() -> None:
    """A story's look that finds its moment and acts at once (a delay of 0)
    acts ahead of the millisecond's ordinary events, as a replay's step set
    earlier for that millisecond does; an ordinary event, whose millisecond
    has started, cannot go back to its head."""
    loop = EventLoop()
    seen: list[str] = []
    loop.at(20, seen.append, "ordinary")
    loop.at(20, lambda: loop.first(20, seen.append, "set by an ordinary event"))
    loop.first(20, lambda: loop.first(20, seen.append, "set by a first event"))
    loop.first(20, seen.append, "first, set earlier")
    loop.run_until(30)
    assert seen == ["first, set earlier", "set by a first event", "ordinary", "set by an ordinary event"]
    assert loop.pending() == 0


def _timeout_schedule(seed: int, lazy: bool) -> tuple[list[tuple[int, str]], int]:
    """A random mix of plain events and timeouts (most cancelled before they
    are due, some re-armed from inside a firing one), run with per-timeout
    ``loop.after`` events or with :class:`TimeoutQueue`s; what ran, and when."""
    rng = random.Random(seed)
    loop = EventLoop()
    seen: list[tuple[int, str]] = []
    pending: set[int] = set()
    queues: dict[int, TimeoutQueue] = {}
    next_key = [0]

    def fire(key: int) -> None:
        pending.discard(key)
        seen.append((loop.now, f"timeout {key}"))
        if key % 3 == 0:  # a retry from inside the firing timeout
            arm(rng.choice((5, 9)))

    def arm(delay: int) -> None:
        next_key[0] += 1
        key = next_key[0]
        pending.add(key)
        if lazy:
            q = queues.get(delay)
            if q is None:
                q = queues[delay] = TimeoutQueue(loop, delay, fire, pending)
            q.add(key)
        else:
            loop.after(delay, lambda k=key: fire(k) if k in pending else None)

    def step(i: int) -> None:
        seen.append((loop.now, f"event {i}"))
        r = rng.random()
        if r < 0.5:
            arm(rng.choice((5, 9)))
        elif r < 0.8 and pending:
            pending.discard(rng.choice(sorted(pending)))  # the reply came first
        if i < 400:
            loop.after(rng.choice((0, 1, 2, 5)), step, i + 1)

    loop.at(0, step, 0)
    loop.run_until(10_000)
    return seen, loop.steps


@pytest.mark.parametrize("seed", range(6))
def test_a_timeout_queue_fires_each_live_timeout_exactly_where_loop_after_would(seed: int) -> None:
    eager, eager_steps = _timeout_schedule(seed, lazy=False)
    lazy, lazy_steps = _timeout_schedule(seed, lazy=True)
    assert any(what.startswith("timeout") for _, what in eager)
    assert lazy == eager
    assert lazy_steps < eager_steps  # the cancelled ones never became events


def test_a_timeout_queue_keeps_only_its_oldest_entry_in_the_heap() -> None:
    loop = EventLoop()
    live = {1, 2, 3}
    fired: list[tuple[int, int]] = []
    q = TimeoutQueue(loop, 100, lambda k: fired.append((loop.now, k)), live)
    for k in (1, 2, 3):
        q.add(k)
        loop.run_until(loop.now + 10)
    assert loop.pending() == 1 and len(q) == 3
    live.discard(2)
    loop.run_until(1000)
    assert fired == [(100, 1), (120, 3)]
    assert len(q) == 0 and loop.pending() == 0


def test_a_timeout_queue_that_drops_its_spent_head_still_fires_each_live_one_in_its_place() -> None:
    """A queue that never empties (a timeout armed every millisecond, each
    living 100 ms) drops the entries it has passed now and then
    (``_COMPACT_AT``), and every live timeout still fires at its own time,
    in order; the dead ones never do."""
    from reference_impl.sim.events import _COMPACT_AT
    loop = EventLoop()
    n = 3 * _COMPACT_AT
    live = {k for k in range(n) if k % 7}
    fired: list[tuple[int, int]] = []
    q = TimeoutQueue(loop, 100, lambda k: fired.append((loop.now, k)), live)
    for k in range(n):
        loop.at(k, q.add, k)
    loop.run_until(n + 50)
    assert len(q) == 49 and len(q._keys) < n  # the head was dropped along the way
    loop.run_until(n + 1000)
    assert fired == [(k + 100, k) for k in range(n) if k % 7]
    assert len(q) == 0 and loop.pending() == 0


def test_choose_draws_exactly_what_random_choice_draws() -> None:
    """The clients pick brokers with a compiled copy of Random.choice; a
    seed's history depends on it taking the same element and leaving the
    generator in the same state."""
    for seed in range(20):
        ours, theirs = random.Random(seed), random.Random(seed)
        for n in list(range(1, 70)) + [127, 128, 129, 1000]:
            seq = list(range(n))
            assert choose(ours, seq) == theirs.choice(seq)
        assert ours.getstate() == theirs.getstate()
    with pytest.raises(IndexError):
        choose(random.Random(1), [])


# -- clocks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset,drift", [(0, 0.0), (1234, 0.0), (-5000, 0.01), (77, -0.003)])
def test_node_timer_converts_back_to_earliest_virtual_time(offset: int, drift: float) -> None:
    c = NodeClock(offset, drift)
    for node_ms in (0, 1, 999, 10_000, 123_457):
        vt = c.virtual_time(node_ms)
        assert c.node_time(vt) >= node_ms
        assert vt == 0 or c.node_time(vt - 1) < node_ms or vt <= 0


def test_clock_offset_and_drift_shape_node_time() -> None:
    c = NodeClock(offset_ms=100, drift=0.5)
    assert c.node_time(0) == 100
    assert c.node_time(1000) == 1600


# -- network -----------------------------------------------------------------------------------------


def _net(profile: LinkProfile | None = None) -> tuple[EventLoop, Network, dict[object, list]]:
    loop = EventLoop()
    net = Network(loop, random.Random(1), profile or LinkProfile(1, 5.0))
    inbox: dict[object, list] = {1: [], 2: [], 3: [], "c0": []}
    for ep in inbox:
        net.attach(ep, lambda src, msg, ep=ep: inbox[ep].append((src, msg)))
    return loop, net, inbox


def test_links_are_fifo_like_a_tcp_connection() -> None:
    loop, net, inbox = _net()
    for i in range(200):
        net.send(1, 2, i)
    loop.run_until(10_000)
    assert [m for _, m in inbox[2]] == list(range(200))


def test_one_way_grudge_stops_only_its_direction() -> None:
    loop, net, inbox = _net()
    net.cut({(1, 2)})
    net.send(1, 2, "held")
    net.send(2, 1, "arrives")
    loop.run_until(1000)
    assert inbox[2] == [] and inbox[1] == [(2, "arrives")] and net.held() == 1


def test_partition_starting_mid_flight_holds_the_message() -> None:
    """The cut is met where the message would arrive, so one in flight as
    the cut starts is held (tests/sim/test_tcp_network.py: until the heal)."""
    loop, net, inbox = _net(LinkProfile(min_ms=50, jitter_ms=0))
    net.send(1, 2, "in flight")
    loop.run_until(10)
    net.cut(complete_grudge([[1], [2]]))
    loop.run_until(100)
    assert inbox[2] == [] and net.held() == 1 and net.dropped == 0


def test_clients_are_endpoints_that_can_be_cut() -> None:
    loop, net, inbox = _net()
    net.cut(isolate("c0", [1, 2, 3]))
    net.send(1, "c0", "reply")
    net.send("c0", 2, "request")
    net.send(3, 2, "fine")
    loop.run_until(1000)
    assert inbox["c0"] == [] and inbox[2] == [(3, "fine")]


def test_heal_restores_every_link() -> None:
    loop, net, inbox = _net()
    net.cut(complete_grudge([[1], [2, 3]]))
    net.heal()
    net.send(1, 3, "x")
    loop.run_until(1000)
    assert inbox[3] == [(1, "x")]


def test_loss_delays_roughly_the_configured_fraction_by_a_retransmission() -> None:
    """A lost packet is retransmitted after the minimum RTO: about a quarter
    of the messages sent one per 10 s (nothing queued behind another) arrive
    200 ms late or later, none is lost."""
    loop, net, inbox = _net(LinkProfile(1, 0, loss=0.25))
    late = 0
    for i in range(2000):
        net.send(1, 2, i)
        loop.run_until(loop.now + 199)
        late += not inbox[2] or inbox[2][-1] != (1, i)
        loop.run_until(loop.now + 9_801)
    assert [m for _, m in inbox[2]] == list(range(2000)) and net.dropped == 0
    assert 400 < late < 600


def test_majorities_ring_gives_each_node_a_different_majority() -> None:
    nodes = [1, 2, 3, 4, 5]
    cut = majorities_ring(nodes)
    visible = {x: frozenset(y for y in nodes if (x, y) not in cut) for x in nodes}
    assert all(len(v) >= 3 for v in visible.values())
    assert len(set(visible.values())) == 5


# -- disk ------------------------------------------------------------------------------------------------


def test_kill_keeps_the_page_cache() -> None:
    d = Disk()
    d.apply(LogAppend("t-0", (b(0), b(1))))
    d.apply(FileWrite("replication-offset-checkpoint", "hw"))
    st = d.stored_state()
    assert [x.base_offset for x in st.logs["t-0"]] == [0, 1]
    assert st.files["replication-offset-checkpoint"] == "hw"


def test_power_loss_drops_what_was_not_fsynced() -> None:
    d = Disk()
    d.apply(LogAppend("t-0", (b(0), b(1))))
    d.apply(Fsync("t-0"))
    d.apply(LogAppend("t-0", (b(2),)))
    d.apply(FileWrite("x", 1))
    lost = d.lose_unfsynced()
    st = d.stored_state()
    assert [x.base_offset for x in st.logs["t-0"]] == [0, 1]
    assert "x" not in st.files and lost == {"t-0": 1}


def test_unsynced_truncation_is_undone_by_power_loss() -> None:
    d = Disk()
    d.apply(LogAppend("t-0", (b(0), b(1), b(2))))
    d.apply(Fsync())
    d.apply(LogTruncate("t-0", 1))
    d.apply(LogAppend("t-0", (b(1, epoch=3),)))
    assert [(x.base_offset, x.leader_epoch) for x in d.stored_state().logs["t-0"]] == [(0, 0), (1, 3)]
    d.lose_unfsynced()
    assert [(x.base_offset, x.leader_epoch) for x in d.stored_state().logs["t-0"]] == [(0, 0), (1, 0), (2, 0)]


def test_fsync_after_truncation_makes_the_new_tail_durable() -> None:
    d = Disk()
    d.apply(LogAppend("t-0", (b(0), b(1), b(2))))
    d.apply(Fsync("t-0"))
    d.apply(LogTruncate("t-0", 1))
    d.apply(LogAppend("t-0", (b(1, epoch=3),)))
    d.apply(Fsync("t-0"))
    d.lose_unfsynced()
    assert [(x.base_offset, x.leader_epoch) for x in d.stored_state().logs["t-0"]] == [(0, 0), (1, 3)]


def test_metadata_log_entries_truncate_by_offset_and_files_fsync_by_path() -> None:
    d = Disk()
    d.apply(LogAppend("__cluster_metadata-0", tuple(MetadataEntry(i, 1, NoOpRecord()) for i in range(5))))
    d.apply(LogTruncate("__cluster_metadata-0", 3))
    d.apply(FileWrite("q", QuorumState(4, 101)))
    d.apply(Fsync("q"))
    d.apply(FileWrite("other", 1))
    d.lose_unfsynced()
    st = d.stored_state()
    assert st.logs["__cluster_metadata-0"] == []
    assert st.files == {"q": QuorumState(4, 101)}


def test_truncate_fully_restarts_the_log_at_a_new_start_offset() -> None:
    d = Disk()
    d.apply(LogAppend("t-0", (b(0), b(1))))
    d.apply(LogTruncateFully("t-0", 7))
    d.apply(LogAppend("t-0", (b(7),)))
    d.apply(FileDelete("gone"))
    st = d.stored_state()
    assert st.log_start_offsets["t-0"] == 7 and [x.base_offset for x in st.logs["t-0"]] == [7]


# -- nemesis vocabulary -----------------------------------------------------------------------------------


def test_the_cyclic_gc_is_off_while_the_loop_runs_and_restored_after():
    import gc

    seen: list[bool] = []
    loop = EventLoop()
    loop.at(5, lambda: seen.append(gc.isenabled()))
    was = gc.isenabled()
    try:
        gc.enable()
        loop.run_until(10)
        assert seen == [False] and gc.isenabled()
        gc.disable()  # a caller that had it off keeps it off
        loop.at(15, lambda: seen.append(gc.isenabled()))
        loop.run_until(20)
        assert seen == [False, False] and not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_a_timeout_queue_places_its_entries_exactly_past_the_short_stamps() -> None:
    """An entry's place is kept as one int (time and seq); past 2**22 ms
    the int is a long one, and each timeout still fires at its time, in
    seq order among the events due then."""
    loop = EventLoop()
    loop.run_until((1 << 23) + 5)
    live = {1, 2}
    seen: list[tuple[int, object]] = []
    q = TimeoutQueue(loop, 100, lambda k: seen.append((loop.now, k)), live)
    q.add(1)
    loop.after(100, lambda: seen.append((loop.now, "after")))
    q.add(2)
    loop.run_until(1 << 24)
    t = (1 << 23) + 105
    assert seen == [(t, 1), (t, "after"), (t, 2)]
