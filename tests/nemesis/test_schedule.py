"""Nemesis schedules: one fault at a time, every start followed by its stop,
on a timetable drawn from the seed alone; the final generator heals every
fault type in use; scripted scenarios are ordinary start/stop ops."""

import random

import generator as g
from nemesis import Nemesis, NemesisPlan, sequential
from nemesis.faults import expand, pick_nodes
from nemesis.scenarios import SCENARIOS, duration, generator as scenario_generator


def ctx(seed=1):
    return g.Context(time=0, rng=random.Random(seed), free=frozenset(["nemesis"]),
                     process_of={"nemesis": "nemesis"}, threads=frozenset(["nemesis"]), state={})


def ops_of(gen, n=40):
    out, c = [], ctx()
    while gen is not None and len(out) < n:
        r = gen.op(c)
        if r is None:
            break
        op, gen = r
        out.append(op)
    return out


def test_sequential_schedule_alternates_start_and_stop_of_the_same_fault_spaced_by_the_interval():
    ops = ops_of(sequential(expand(["partition", "kill", "clock", "leader-kill"]), 2 * g.NS, seed=3), n=40)
    nominal = [0] + [o["nominal_ms"] for o in ops]
    gaps = [b - a for a, b in zip(nominal, nominal[1:])]
    assert all(1000 <= gap < 3000 for gap in gaps)  # interval * [0.5, 1.5)
    for start, stop in zip(ops[::2], ops[1::2]):
        assert start["f"].startswith("start-") and stop["f"].startswith("stop-")
        assert start["f"][6:] == stop["f"][5:] and start["value"]["fault"] == stop["value"]["fault"]


def test_sequential_schedule_is_drawn_from_the_seed_alone_not_from_the_clients_rng():
    """The generator's rng (what the clients draw from) and how late the
    nemesis is asked move nothing: the same seed gives the same faults at
    the same nominal times; a start's own draws (``_draw``) too."""
    def timetable(rng_seed: int, late_ns: int) -> list[tuple]:
        gen, out = sequential(expand(["partition", "kill", "clock"]), g.NS, seed=11), []
        for _ in range(20):
            c = g.Context(time=late_ns + (out[-1][1] * 1_000_000 if out else 0), rng=random.Random(rng_seed),
                          free=frozenset(["nemesis"]), process_of={"nemesis": "nemesis"},
                          threads=frozenset(["nemesis"]), state={})
            op, gen = gen.op(c)
            out.append((op["f"], op["nominal_ms"], op["value"]["fault"], op.get("_draw")))
        return out

    assert timetable(1, 0) == timetable(2, 0) == timetable(3, 700_000_000)
    assert timetable(1, 0) != [(f, n, fault, d) for f, n, fault, d in
                               (lambda gen: [(o["f"], o["nominal_ms"], o["value"]["fault"], o.get("_draw"))
                                             for o in ops_of(gen, 20)])(sequential(expand(["partition", "kill", "clock"]),
                                                                                   g.NS, seed=12))]


def test_an_op_whose_nominal_time_passed_goes_at_once_and_keeps_its_nominal_time():
    gen = sequential(expand(["kill"]), g.NS, seed=1)
    early, _ = gen.op(ctx())
    late_ctx = g.Context(time=early["time"] + 5 * g.NS, rng=random.Random(1), free=frozenset(["nemesis"]),
                         process_of={"nemesis": "nemesis"}, threads=frozenset(["nemesis"]), state={})
    late, _ = gen.op(late_ctx)
    assert late["time"] == late_ctx.time and late["nominal_ms"] == early["nominal_ms"] == early["time"] // 1_000_000


def test_a_step_waiting_for_its_time_answers_every_ask_alike_and_builds_its_successor_once():
    """Under any_ the nemesis is asked on every client op while its step
    waits: each ask before the step's nominal time gets the same op and
    the same successor, made once."""
    gen = sequential(expand(["kill", "partition"]), g.NS, seed=5)
    first = gen.op(ctx())
    op, nxt = first
    again = gen.op(g.Context(time=op["time"], rng=random.Random(9), free=frozenset(["nemesis"]),
                             process_of={"nemesis": "nemesis"}, threads=frozenset(["nemesis"]), state={}))
    assert again is first and again[1] is nxt
    assert op["time"] == op["nominal_ms"] * 1_000_000 and op["process"] == "nemesis"
    assert nxt.op(ctx())[0]["nominal_ms"] > op["nominal_ms"]


def test_leader_and_controller_kills_are_recorded_as_kills():
    ops = ops_of(sequential(expand(["leader-kill", "controller-kill"]), g.NS, seed=1))
    assert {o["f"] for o in ops} == {"start-kill", "stop-kill"}


def test_final_heals_each_fault_type_once():
    plan = NemesisPlan(faults=expand(["partition", "kill", "leader-kill", "pause"]))
    nem = Nemesis(plan, cluster=None, seed=1)
    fs = [o["f"] for o in ops_of(nem.final())]
    assert fs == ["stop-partition", "stop-kill", "stop-pause"]


def test_scenarios_are_start_stop_ops_with_their_step():
    for name in SCENARIOS:
        ops = [o for o in ops_of(scenario_generator(name), n=200) if "_sleep" not in o]
        assert all(o["f"].split("-", 1)[0] in ("start", "stop") for o in ops)
        assert [o["value"]["step"] for o in ops] == sorted(o["value"]["step"] for o in ops)
        assert duration(name) > 10


def test_node_specs_one_minority_majority_all():
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    r = random.Random(1)
    assert [len(pick_nodes(nodes, s, r)) for s in ("one", "minority", "majority", "all")] == [1, 2, 3, 5]


def test_overlap_mode_runs_each_fault_group_on_its_own_timetable():
    from nemesis import overlapping

    gen = overlapping(expand(["partition", "kill", "leader-kill", "pause"]), 2 * g.NS, seed=5)
    c, ops = ctx(), []
    while len(ops) < 60:
        op, gen = gen.op(c)
        ops.append(op)
        c = g.Context(time=op["time"], rng=c.rng, free=c.free, process_of=c.process_of, threads=c.threads, state={})
    times = [o["time"] for o in ops]
    assert times == sorted(times)
    active, overlapped = set(), False
    for o in ops:
        action, name = o["f"].split("-", 1)
        if action == "start":
            assert name not in active  # a group never starts twice before stopping
            overlapped |= bool(active)
            active.add(name)
        else:
            active.remove(name)
    assert overlapped, "faults of different groups overlap"
    assert {o["f"] for o in ops} == {"start-partition", "stop-partition", "start-kill", "stop-kill",
                                      "start-pause", "stop-pause"}


def test_timed_cycle_is_pure_asking_later_does_not_move_the_next_op():
    from nemesis import TimedCycle

    cyc = TimedCycle(expand(["partition"]), g.NS, seed=1)
    a, _ = cyc.op(ctx())
    later = g.Context(time=10_000, rng=random.Random(2), free=frozenset(["nemesis"]),
                      process_of={"nemesis": "nemesis"}, threads=frozenset(["nemesis"]), state={})
    b, _ = cyc.op(later)
    assert a["time"] == b["time"] >= g.NS // 2
