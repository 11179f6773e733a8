"""The virtual-time interpreter keeps the real interpreter's rules on the
simulator's event loop: one completion per invocation, in time order; an op
past its timeout is info and its late answer dropped; an info gives the
thread a new process and a new client; nemesis ops and sleeps interleave;
the same generator and seed give the same history."""

from __future__ import annotations

import random
from typing import Any, Callable

import generator as g
from checkers.history.recorder import Recorder
from harness.lifecycle.virtual import VirtualInterpreter
from reference_impl.sim.clients import VirtualClock
from reference_impl.sim.events import EventLoop


class LogClient:
    """An append-only log shared by the processes, answering after a delay
    on the loop (a tiny system under test with latency, not a stand-in for
    Kafka): ``hang`` never answers, ``boom`` answers info."""

    def __init__(self, loop: EventLoop, log: list, made: list, thread: int, process: int) -> None:
        self.loop, self.log = loop, log
        made.append((thread, process))

    def invoke(self, op: dict[str, Any], done: Callable[[dict[str, Any]], None]) -> None:
        if op["f"] == "hang":
            return
        if op["f"] == "boom":
            self.loop.after(3, done, {"type": "info", "error": "boom"})
            return
        self.log.append(op["value"])
        self.loop.after(1 + op["value"] % 7, done, {"type": "ok", "value": [op["value"], len(self.log) - 1]})


def play(gen: g.Gen, concurrency: int = 3, op_timeout: float = 5.0, nemesis: Any = None, seed: int = 1):
    loop, log, made = EventLoop(), [], []
    rec = Recorder(None, keep=True, clock=VirtualClock(loop), epoch=0, background=False)
    it = VirtualInterpreter(gen, rec, concurrency, lambda t, p: LogClient(loop, log, made, t, p), nemesis,
                            random.Random(seed), op_timeout, loop, t0_ms=0)
    it.start()
    loop.run_until(10**9, it.stopped)
    # the flag the loop reads stops it as soon as the run is done, not at the horizon
    assert it.done and it.stopped.up and it.finished() and loop.now < 10**9
    return rec.ops, made, it


def test_every_invoke_has_one_completion_in_time_order():
    ops, _, _ = play(g.clients(g.limit(30, lambda c: {"f": "w", "value": c.rng.randint(0, 99)})))
    assert [o.index for o in ops] == list(range(60))
    assert sum(o.type == "invoke" for o in ops) == sum(o.type == "ok" for o in ops) == 30
    open_ = {}
    for o in ops:
        if o.type == "invoke":
            assert o.process not in open_  # a process runs one op at a time
            open_[o.process] = o
        else:
            assert open_.pop(o.process).f == o.f
    assert all(a.time <= b.time for a, b in zip(ops, ops[1:]))


def test_an_op_past_its_timeout_is_info_at_the_timeout_and_its_thread_gets_a_new_process_and_client():
    gen = g.clients(g.seq(g.Once({"f": "hang", "process": 0}),
                          g.limit(20, g.delay(0.05, lambda c: {"f": "w", "value": 1}))))
    ops, made, _ = play(gen, concurrency=2, op_timeout=0.3)
    hang = [o for o in ops if o.f == "hang"]
    assert [(o.type, o.error) for o in hang] == [("invoke", None), ("info", "timeout")]
    assert hang[1].time - hang[0].time == 300_000_000
    assert 0 not in {o.process for o in ops if o.f == "w"}  # process 0 never reused
    assert (0, 2) in made  # thread 0's new process has a client of its own


def test_an_info_completion_retires_the_process():
    gen = g.clients(g.seq(g.Once({"f": "boom", "process": 1}), g.limit(6, lambda c: {"f": "w", "value": 2})))
    ops, _, it = play(gen, concurrency=2)
    assert [o.type for o in ops if o.f == "boom"] == ["invoke", "info"]
    assert 1 not in {o.process for o in ops if o.f == "w"} and it.process_of[1] == 3


def test_nemesis_ops_are_info_pairs_at_their_time_and_sleeps_hold_a_thread():
    faults: list = []

    def nemesis(op: dict[str, Any]) -> dict[str, Any]:
        faults.append(op["f"])
        return {"value": {"did": op["f"]}}

    nem = g.nemesis(g.seq({"f": "start-x", "time": 40_000_000}, g.sleep(0.05), {"f": "stop-x"}))
    ops, _, _ = play(g.any_(g.clients(g.limit(20, g.delay(0.01, lambda c: {"f": "w", "value": 3}))), nem),
                     nemesis=nemesis)
    nem_ops = [(o.f, o.type, o.time // 1_000_000, o.value) for o in ops if o.process == "nemesis"]
    assert nem_ops == [("start-x", "info", 40, None), ("start-x", "info", 40, {"did": "start-x"}),
                       ("stop-x", "info", 90, None), ("stop-x", "info", 90, {"did": "stop-x"})]
    assert faults == ["start-x", "stop-x"] and sum(o.f == "w" and o.type == "ok" for o in ops) == 20


def test_phases_wait_for_every_op_in_flight():
    gen = g.phases(g.clients(g.limit(9, lambda c: {"f": "w", "value": 6})), g.clients(g.Once({"f": "last", "value": 0})))
    ops, _, _ = play(gen)
    last = next(o for o in ops if o.f == "last")
    assert all(o.time <= last.time for o in ops if o.f == "w" and o.type == "ok")


def test_the_same_generator_and_seed_give_the_same_history():
    def history(seed: int) -> list:
        gen = g.clients(g.time_limit(2, g.rate(100, g.mix(lambda c: {"f": "w", "value": c.rng.randint(0, 99)},
                                                           lambda c: {"f": "w", "value": 5}))))
        return [o.to_dict() for o in play(gen, concurrency=4, seed=seed)[0]]

    assert history(7) == history(7) != history(8)


class SeenFree(g.Gen):
    """Ops one at a time, each noting the free threads its ask was shown
    (listed by the interpreter) beside those listed anew from the free set,
    for the whole view and for the clients' view."""

    def __init__(self, seen: list, n: int) -> None:
        self.seen, self.n = seen, n

    def op(self, ctx):
        if self.n == 0:
            return None
        def listed(c):
            return list(c.free_threads()), [t for t in sorted(c.threads, key=str) if t in c.free]

        clients = ctx.restrict(lambda t: t != "nemesis")
        self.seen += [listed(ctx), listed(clients), listed(ctx.restrict(lambda t: t != "nemesis" and t != 1)),
                      listed(clients.restrict(lambda t: t != 1)), listed(ctx.restrict(lambda t: t == "nemesis"))]
        free = clients.free_threads()
        if not free:
            return g.PENDING, self
        t = free[ctx.rng.randrange(len(free))]
        return {"f": "w", "value": self.n, "process": ctx.process_of[t], "time": ctx.time}, SeenFree(self.seen, self.n - 1)


def test_the_free_threads_the_interpreter_lists_are_those_of_the_free_set_sorted_by_name():
    for nemesis in (None, lambda op: {"type": "info"}):
        seen: list = []
        play(g.seq(SeenFree(seen, 40)), concurrency=12, nemesis=nemesis)  # 10, 11 sort before 2
        assert len(seen) >= 200 and any(len(s[0]) < 12 for s in seen)
        for shown, anew in seen:
            assert shown == anew


def test_the_contexts_free_threads_are_the_free_ones_sorted_by_name_however_taken_and_freed():
    loop = EventLoop()
    rec = Recorder(None, keep=True, clock=VirtualClock(loop), epoch=0, background=False)
    it = VirtualInterpreter(g.clients(g.limit(1, {"f": "w", "value": 1})), rec, 12, lambda t, p: None,
                            lambda op: {}, random.Random(0), 5.0, loop, t0_ms=0)
    rng = random.Random(7)
    threads = list(range(12)) + ["nemesis"]
    for _ in range(300):
        t = rng.choice(threads)
        (it._take if rng.random() < 0.5 else it._give)(t)  # taking a busy thread or freeing a free one changes nothing
        it._changed()
        assert it._ctx().free_threads() == sorted(it.free, key=str)


def test_the_free_threads_stay_sorted_by_name_with_more_threads_than_a_machine_word_has_bits():
    """The free threads' places come from one bit per rank: with 70 client
    threads and the nemesis the mask is past 64 bits, and taking and
    freeing threads (the first and last ranks too) must still list exactly
    the free ones, sorted by name."""
    loop = EventLoop()
    rec = Recorder(None, keep=True, clock=VirtualClock(loop), epoch=0, background=False)
    it = VirtualInterpreter(g.clients(g.limit(1, {"f": "w", "value": 1})), rec, 70, lambda t, p: None,
                            lambda op: {}, random.Random(0), 5.0, loop, t0_ms=0)
    rng = random.Random(11)
    threads = list(range(70)) + ["nemesis"]
    for t in (0, "nemesis", 9, 69):
        it._take(t)
    for _ in range(600):
        t = rng.choice(threads)
        (it._take if rng.random() < 0.55 else it._give)(t)
        it._changed()
        assert it._ctx().free_threads() == sorted(it.free, key=str)


def test_an_op_asked_for_ahead_of_its_time_is_invoked_at_its_time_though_completions_come_first():
    """An op the generator gives for a later time waits for that time
    (Jepsen's rule, as the real interpreter's); completions meanwhile look
    at it again (the interpreter keeps its time beside it) and leave it
    waiting: every invocation at the generator's time, 200 ms apart."""
    ops, _, _ = play(g.clients(g.limit(6, g.delay(0.2, lambda c: {"f": "w", "value": 7}))), concurrency=2)
    invokes = [o.time // 1_000_000 for o in ops if o.type == "invoke"]
    assert invokes == [0, 200, 400, 600, 800, 1000]
    assert [o.time // 1_000_000 for o in ops if o.type == "ok"] == [t + 1 for t in invokes]


def test_a_late_answer_to_an_op_that_timed_out_is_dropped_and_the_next_op_completes_on_its_own():
    """Each open op is one object, its client's callback (the interpreter's
    ``_Job``): an answer after the op timed out finds another job open on
    its thread (or none) and is dropped; the thread's next op completes by
    its own answer, with its own fields."""
    loop = EventLoop()
    rec = Recorder(None, keep=True, clock=VirtualClock(loop), epoch=0, background=False)
    dones: list = []

    class Slow:
        def invoke(self, op: dict[str, Any], done: Callable[[dict[str, Any]], None]) -> None:
            dones.append(done)
            late = op["value"] == 0
            # the late answer comes while the thread's next op is open
            loop.after(900 if late else 400, done, {"type": "ok", "value": op["value"] * 10, "late": late})

    gen = g.clients(g.limit(2, g.delay(0.2, lambda c: {"f": "w", "value": len(dones)})))
    it = VirtualInterpreter(gen, rec, 1, lambda t, p: Slow(), None, random.Random(1), 0.6, loop, t0_ms=0)
    it.start()
    # the open op (by job id) is the callback its client holds
    assert list(it.jobs.values()) == [dones[0]] and dones[0].t == 0
    loop.run_until(10**9, it.stopped)
    got = [(o.type, o.value, o.error, o.extra.get("late")) for o in rec.ops]
    assert got == [("invoke", 0, None, None), ("info", 0, "timeout", None),
                   ("invoke", 1, None, None), ("ok", 10, None, False)]
    assert [o.time // 1_000_000 for o in rec.ops] == [0, 600, 600, 1000]


class OkClient(LogClient):
    """LogClient completing ``ok`` as the simulated clients do
    (``reference_impl.sim.endpoint.complete_ok``: the value alone to the
    interpreter's callback, a :class:`Completion`)."""

    def invoke(self, op: dict[str, Any], done: Callable[[dict[str, Any]], None]) -> None:
        from reference_impl.sim.endpoint import Completion, complete_ok

        assert isinstance(done, Completion)
        self.log.append(op["value"])
        self.loop.after(1 + op["value"] % 7, complete_ok, done, [op["value"], len(self.log) - 1])


def test_an_ok_completion_handed_its_value_alone_records_what_the_fields_would():
    """A client handing ``ok`` and the value (Completion.ok) completes the
    op as the fields ``{"type": "ok", "value": ...}`` would: the same
    history, extra fields and all, byte for byte (its line recorded from
    the invocation's: Recorder.append_ok), each Op's extra its own dict, and the
    generator and observer shown the same completions."""
    def run(client: type) -> tuple[list, list, list]:
        loop, log, made = EventLoop(), [], []
        seen: list = []
        rec = Recorder(None, keep=True, clock=VirtualClock(loop), epoch=0, background=False)
        gen = g.clients(g.limit(12, g.delay(0.01, lambda c: {"f": "w", "value": c.rng.randint(0, 99),
                                                             "acks": "all", "_timeout": 3})))
        it = VirtualInterpreter(gen, rec, 3, lambda t, p: client(loop, log, made, t, p), None,
                                random.Random(5), 5.0, loop, t0_ms=0,
                                observe=lambda state, comp: seen.append(dict(comp)))
        it.start()
        loop.run_until(10**9, it.stopped)
        assert it.done
        return rec.ops, [o.to_dict() for o in rec.ops] + [rec.digest()], seen

    ops, fields, seen = run(OkClient)
    _, want, want_seen = run(LogClient)
    assert fields == want and seen == want_seen  # the digest of the lines' bytes too
    assert sum(o.type == "ok" for o in ops) == 12 and all(o.extra == {"acks": "all"} for o in ops)
    assert len({id(o.extra) for o in ops}) == len(ops)
    assert all(c["type"] == "ok" and len(c["value"]) == 2 for c in seen)
