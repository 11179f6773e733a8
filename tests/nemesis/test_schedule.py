"""Nemesis schedules: one fault at a time, every start followed by its stop,
spaced by sleeps; the final generator heals every fault type in use; scripted
scenarios are ordinary start/stop ops."""

import random

import generator as g
from nemesis import Nemesis, NemesisPlan, Schedule
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


def test_schedule_alternates_sleep_start_sleep_stop_of_the_same_fault():
    ops = ops_of(Schedule(expand(["partition", "kill", "clock", "leader-kill"]), 2 * g.NS), n=40)
    real = [o for o in ops if "_sleep" not in o]
    sleeps = [o for o in ops if "_sleep" in o]
    assert len(sleeps) == len(real)
    assert all(g.NS <= s["_sleep"] <= 3 * g.NS for s in sleeps)  # interval * [0.5, 1.5)
    for start, stop in zip(real[::2], real[1::2]):
        assert start["f"].startswith("start-") and stop["f"].startswith("stop-")
        assert start["f"][6:] == stop["f"][5:] and start["value"]["fault"] == stop["value"]["fault"]


def test_leader_and_controller_kills_are_recorded_as_kills():
    ops = [o for o in ops_of(Schedule(expand(["leader-kill", "controller-kill"]), g.NS)) if "_sleep" not in o]
    assert {o["f"] for o in ops} == {"start-kill", "stop-kill"}


def test_final_heals_each_fault_type_once():
    plan = NemesisPlan(faults=expand(["partition", "kill", "leader-kill", "pause"]))
    nem = Nemesis(plan, cluster=None, rng=random.Random(1))
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
