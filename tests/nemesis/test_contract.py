"""Every fault kind x target against both implementations of the cluster
contract: the simulator (``reference_impl.sim.control.SimCluster``) and real
node processes on this machine (``harness.dbs.reference.local.ProxiedCluster``).

The faults are the nemesis's own (``nemesis.faults.Fault``), driven only
through the contract; what each did is read back from the runtime itself
(its hosts, processes, proxy, clocks), so ``kill:majority`` is seen to take
a majority on both. One cluster per runtime serves every case: each case
starts its fault, checks it, stops it and waits for the cluster to be whole
again before the next.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from harness.lifecycle.runner import sim_run
from harness.config import TestConfig
from harness.dbs import reference
from harness.dbs.reference.db import ReferenceDB
from harness.rundir.state import RunState
from nemesis import partition as grudges
from nemesis import scenarios
from nemesis.control import Cluster
from nemesis.faults import KINDS, STATE_TARGETS, Fault, FaultSpec, state_nodes
from nemesis.stories import Timings
from reference_impl.core.config import ProtocolConfig
from reference_impl.sim.control import node_id, node_name

NODES = 6  # 3 brokers + 3 controllers
COUNT = {"one": 1, "minority": 2, "majority": 4, "all": 6, "primaries": 1, "controller": 1}


@dataclass
class Runtime:
    name: str
    cluster: Cluster
    settle: Callable[[float], None]  # let time pass (virtual or real)
    cut: Callable[[], set[tuple[str, str]]]  # the grudge the runtime holds
    delayed: Callable[[], set[tuple[str, str]]]  # links with added latency or loss
    offset: Callable[[str], int]  # a node's clock offset
    #: the protocol timeouts the runtime's nodes run with (what a story waits on)
    timings: Timings
    #: the last case ended by finding the cluster whole (``whole(closing=True)``)
    left_whole: bool = False
    #: what the running case started (faults, scenario runners): stopped if it fails
    opened: list[Any] = field(default_factory=list)


def timings_of(pc: ProtocolConfig) -> Timings:
    return Timings(lag_ms=pc.replica_lag_time_max_ms, session_ms=pc.broker_session_timeout_ms)


def _sim_runtime() -> Any:
    cfg = TestConfig(backend="sim", partitions=2, seed=1)
    run = sim_run(cfg, 1)
    assert run.setup()
    sim = run.sim

    def named(pairs: Any) -> set[tuple[str, str]]:
        return {(node_name(a) if isinstance(a, int) else "client", node_name(b) if isinstance(b, int) else "client")
                for a, b in pairs}

    yield Runtime("sim", run.cluster, lambda s: sim.run_for(int(s * 1000)), lambda: named(sim.net.grudge),
                  lambda: named(sim.net.links), lambda n: sim.hosts[node_id(n)].clock.offset_ms, timings_of(sim.config))
    run.release()


def _local_runtime(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("contract")
    run_dir = out / "run"
    (run_dir / "nodes").mkdir(parents=True)
    state = RunState.create(out, "contract", run_dir)
    cfg = TestConfig(partitions=2, seed=1, storage="pagecache")
    db = ReferenceDB(cfg, run_dir, state)
    try:
        db.setup()
        c, proxy, status = db.cluster, db.local.proxy if db.local else None, db.endpoints.status if db.endpoints else None
        assert c is not None and proxy is not None and status is not None

        def stats() -> dict[str, Any]:
            return proxy.call(cmd="stats")

        def delayed() -> set[tuple[str, str]]:
            return {tuple(name.split("->")) for name in stats()["delay"]}  # type: ignore[misc]

        def offset(n: str) -> int:
            return int((status(n) or {}).get("clock_offset_ms", 0))

        yield Runtime("local", c, time.sleep, lambda: {tuple(p) for p in stats()["cut"]}, delayed, offset,
                      timings_of(reference.protocol_config(cfg)))
    finally:
        db.teardown()
        state.remove()


@pytest.fixture(scope="module", params=["sim", pytest.param("local", marks=pytest.mark.integration)])
def rt(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    gen = _sim_runtime() if request.param == "sim" else _local_runtime(tmp_path_factory)
    yield next(gen)
    next(gen, None)


def whole(rt: Runtime, timeout: float = 60.0, closing: bool = False) -> None:
    """Wait until every node runs, none is paused, and every key has a
    leader, on two looks a second apart (a resumed node may still move a
    leadership just after the first). A case that passed and ended with
    ``closing=True`` made those two looks just now, so the next case's first
    look, if whole, is the third: it needs no second one."""
    c = rt.cluster
    deadline = time.monotonic() + timeout
    waited, steady = 0.0, 1 if rt.left_whole else 0
    rt.left_whole = False
    while True:
        ok = _is_whole(c)
        steady = steady + 1 if ok else 0
        if steady == 2:
            rt.left_whole = closing
            return
        if time.monotonic() > deadline or waited > timeout:
            pytest.fail(f"{rt.name}: the cluster is not whole after {timeout:.0f}s")
        rt.settle(1.0 if ok else 0.5)
        waited += 0.5


def _is_whole(c: Cluster) -> bool:
    """Every node runs, none is paused, every key has a leader and the
    quorum an active controller (one look)."""
    obs = c.observer
    return (not c.nodes.dead_nodes() and not c.nodes.paused_nodes()
            and all(obs.leader_of(k) for k in obs.keys()) and obs.active_controller() is not None)


@pytest.fixture(autouse=True)
def _failed_case_is_healed(request: pytest.FixtureRequest) -> Any:
    """A case that failed may have left its fault in place (a node down,
    a cut, a clock moved): it is stopped and the cluster healed here, so
    one failure stays one failure instead of leaving every later case on
    the shared cluster to wait out ``whole`` in vain. The next case then
    looks twice again."""
    failed = request.session.testsfailed
    yield
    for name in ("rt", "spare"):
        if name not in request.fixturenames:
            continue
        rt: Runtime = request.getfixturevalue(name)
        opened, rt.opened = rt.opened, []
        if request.session.testsfailed != failed:
            rt.left_whole = False
            heal(rt, opened)


def heal(rt: Runtime, opened: list[Any], timeout: float = 60.0) -> None:
    """Stop what a failed case started, then lift every fault the contract
    can name: cuts, latency, loss, clock offsets, paused and dead nodes
    (a node still in its controlled shutdown is started once it is down),
    until the cluster is whole or ``timeout`` passes."""
    for thing in opened:
        try:
            thing.heal_all() if isinstance(thing, scenarios.ScenarioRunner) else thing.stop()
        except Exception:
            pass  # lifted below, by the contract's own operations
    c = rt.cluster
    links = grudges.links(c.nodes.node_names())
    for lift in (lambda: c.net.cut([]), lambda: c.net.set_latency(links, 0, 0), lambda: c.net.set_loss(links, 0.0)):
        try:
            lift()
        except Exception:
            pass  # a runtime without latency or loss has none to lift
    waited, reset = 0.0, set[str]()
    while waited < timeout:
        dead, paused = c.nodes.dead_nodes(), c.nodes.paused_nodes()
        for n in paused:
            c.nodes.resume(n)
        for n in dead:
            c.nodes.start(n)
        for n in set(c.nodes.node_names()) - set(dead) - reset:
            try:
                c.clock.reset(n)
                reset.add(n)
            except Exception:
                pass  # a node just started may not answer yet: the next look
        if reset == set(c.nodes.node_names()) and _is_whole(c):
            return
        rt.settle(1.0)
        waited += 1.0


def full_isr(rt: Runtime, timeout: float = 90.0) -> None:
    """Wait until every partition's ISR holds all its replicas (an earlier
    case's victims rejoin every ISR after they run again)."""
    obs = rt.cluster.observer
    waited = 0.0
    while not all(len(obs.isr_of(k)) == len(obs.replicas_of(k)) > 1 for k in obs.keys()):
        if waited > timeout:
            pytest.fail(f"{rt.name}: an ISR is not full after {timeout:.0f}s")
        rt.settle(0.5)
        waited += 0.5


def fault(rt: Runtime, kind: str, target: str, seed: int = 7, **kw: Any) -> Fault:
    """The nemesis's fault on the runtime's cluster, stopped by
    :func:`heal` if the case fails."""
    f = Fault(FaultSpec(kind, target), rt.cluster, random.Random(seed), rt.timings, **kw)
    rt.opened.append(f)
    return f


def cases(kinds: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(k, t) for k in kinds for t in KINDS[k].targets]


def _expected_nodes(rt: Runtime, target: str) -> tuple[int, set[str] | None]:
    """How many nodes the target takes, and which when the protocol names
    them (a whole cluster: every ISR full, so no sole ISR member and no
    out-of-sync replica: those targets take nothing)."""
    obs = rt.cluster.observer
    if target == "primaries":
        return 1, {obs.leader_of(k) for k in obs.keys()}  # type: ignore[misc]
    if target == "controller":
        return 1, {obs.active_controller()}  # type: ignore[arg-type]
    if target == "isr-followers":
        return 2, {n for k in obs.keys() for n in obs.isr_of(k) if n != obs.leader_of(k)}
    if target == "busiest-leader":
        return 1, {obs.leader_of(k) for k in obs.keys()}  # type: ignore[misc]
    if target in STATE_TARGETS:
        return 0, set()
    return COUNT[target], None


def _as_the_fault_saw(rt: Runtime, target: str, value: dict[str, Any], count: int,
                      which: set[str] | None) -> tuple[int, set[str] | None]:
    """On real nodes under load a follower may fall out of an ISR between
    full_isr's look and the fault's. An ISR target names its nodes from the
    ISR the fault saw (recorded as ``isr``, with its ``key``), so the case
    holds it to that ISR: its followers, its sole member, or the replicas
    outside it (a power loss of one of three replicas is allowed). The
    simulator holds to the full ISR."""
    seen = value.get("isr")
    if rt.name == "sim" or seen is None or len(seen) == len(rt.cluster.observer.replicas_of(value["key"])):
        return count, which
    if target == "isr-followers":
        return len(seen) - 1, set(seen)
    if target == "sole-isr":
        return (1, set(seen)) if len(seen) == 1 else (count, which)
    if target == "out-of-sync":
        outside = set(rt.cluster.observer.replicas_of(value["key"])) - set(seen)
        return len(outside), outside
    return count, which


@pytest.mark.parametrize("kind,target", cases(("kill", "terminate", "lose-unfsynced", "pause")))
def test_a_process_fault_takes_its_targets_count_and_its_stop_brings_them_back(rt: Runtime, kind: str,
                                                                                 target: str) -> None:
    whole(rt)
    full_isr(rt)  # what _expected_nodes counts on
    count, which = _expected_nodes(rt, target)
    if kind == "lose-unfsynced" and target == "isr-followers":
        count, which = 0, set()  # two of three replicas: a power loss refuses that unless asked for a majority
    f = fault(rt, kind, target)
    value = f.start()
    count, which = _as_the_fault_saw(rt, target, value, count, which)
    if kind == "terminate" and rt.name != "sim":  # the grace runs beside the nemesis, as in the simulator
        deadline = time.monotonic() + 35.0
        while not set(value["nodes"]) <= set(rt.cluster.nodes.dead_nodes()) and time.monotonic() < deadline:
            time.sleep(0.2)
    rt.settle(1.0 if kind != "terminate" else 35.0 if rt.name == "sim" else 0.0)
    hit = rt.cluster.nodes.paused_nodes() if kind == "pause" else rt.cluster.nodes.dead_nodes()
    assert sorted(hit) == sorted(value["nodes"]) and len(hit) == count
    if which is not None:
        assert set(hit) <= which
    f.stop()
    assert rt.cluster.nodes.dead_nodes() == [] and rt.cluster.nodes.paused_nodes() == []
    whole(rt, closing=True)


@pytest.mark.parametrize("kind,target", cases(("clock", "clock-strobe")))
def test_a_clock_fault_moves_its_targets_clocks_and_its_stop_resets_them(rt: Runtime, kind: str, target: str) -> None:
    whole(rt)
    full_isr(rt)
    count, which = _expected_nodes(rt, target)
    f = fault(rt, kind, target)
    value = f.start()
    count, which = _as_the_fault_saw(rt, target, value, count, which)
    assert len(value["nodes"]) == count and (which is None or set(value["nodes"]) <= which)
    if kind == "clock":
        assert {n: rt.offset(n) for n in value["nodes"]} == {n: int(ms) for n, ms in value["offsets_ms"].items()}
    else:
        # a strobe ends at zero (its flips run on, on the simulator's loop or
        # a thread of their own: let them)
        rt.settle(value["duration_ms"] / 1000 + 0.3)
        assert all(rt.offset(n) == 0 for n in value["nodes"])
    f.stop()
    assert all(rt.offset(n) == 0 for n in rt.cluster.nodes.node_names())


@pytest.mark.parametrize("kind,target", cases(("partition",)))
def test_a_partition_makes_its_grudge_on_the_runtime_and_its_stop_heals_it(rt: Runtime, kind: str, target: str) -> None:
    whole(rt)
    f = fault(rt, kind, target)
    value = f.start()
    cut = {tuple(p) for p in value["cut"]}
    if target in ("sole-isr", "out-of-sync"):  # a whole cluster has none
        assert cut == set() == rt.cut() and "skipped" in value
        return
    assert cut, f"{target}: an empty grudge"
    assert rt.cut() == cut
    nodes = rt.cluster.nodes.node_names()
    if target in grudges.NODE_SHAPES:
        r = random.Random(7)  # the fault's own draws: its target, then the order
        r.choice((target,))
        desc = {k: v for k, v in value.items() if k not in ("target", "cut")}
        assert (cut, desc) == grudges.shaped(target, nodes, r)
    elif target == "clients":
        assert cut == grudges.from_clients(value["isolated"][0])
    elif target in STATE_TARGETS:
        isolated = value["isolated"]
        assert cut == grudges.complete_grudge([isolated, [n for n in nodes if n not in isolated]])
    else:
        assert cut == grudges.isolate(value["isolated"][0], nodes)
    f.stop()
    assert rt.cut() == set()
    whole(rt, closing=True)


def test_latency_delays_every_node_link_and_its_stop_removes_it(rt: Runtime) -> None:
    whole(rt)
    f = fault(rt, "latency", "all")
    f.start()
    assert rt.delayed() == set(grudges.links(rt.cluster.nodes.node_names()))
    f.stop()
    assert rt.delayed() == set()


def test_loss_is_the_simulators_alone(rt: Runtime) -> None:
    if rt.name != "sim":
        assert "loss" not in rt.cluster.capabilities
        return
    f = fault(rt, "loss", "all")
    value = f.start()
    assert 0 < value["probability"] < 1 and rt.delayed() == set(grudges.links(rt.cluster.nodes.node_names()))
    f.stop()
    assert rt.delayed() == set()


@pytest.mark.parametrize("story", KINDS["story"].targets)
def test_a_story_plays_its_steps_on_the_runtimes_clock_and_its_stop_heals_all(rt: Runtime, story: str) -> None:
    whole(rt)
    steps: list[tuple[str, dict[str, Any]]] = []
    f = fault(rt, "story", story, record=lambda op, v: steps.append((op, v)))
    value = f.start()
    leader, nodes = value["leader"], rt.cluster.nodes.node_names()
    first = rt.cut()
    assert first and all(leader in p or value.get("laggard") in p or value.get("fenced") in p for p in first)
    assert value["cut"] == grudges.as_lists(first), "the start records the cut it made"
    # past the story's wait, on the runtime's own timeouts, with 1.5 s to
    # spare: 1.5 x the lag time before a power loss or a kill, 1.5 x the
    # session timeout before the fence is swapped, and a successor elected
    # once the isolated leader's session has expired
    waits_ms = rt.timings.lag_ms if story in ("last-replica-standing", "isr-crash") else rt.timings.session_ms
    rt.settle(1.5 * waits_ms / 1000 + 1.5)
    # every follow-up step that acted is recorded, in the shared vocabulary
    assert steps and all(op == "step-partition" and v["fault"] == f"story:{story}" and v["story"] == story
                         for op, v in steps)
    last = steps[-1][1]
    if story == "leader-churn":
        assert rt.cut() > grudges.isolate(leader, nodes), "the successor is isolated too"
        assert last["step"] == "isolate-successor" and last["cut"] == grudges.as_lists(rt.cut())
    elif story == "last-replica-standing":
        assert leader in rt.cluster.nodes.dead_nodes()
        assert [v["step"] for _, v in steps] == ["power-loss"] and last["nodes"] == [leader]
    elif story == "isr-crash":
        assert leader in rt.cluster.nodes.dead_nodes() and value["laggard"] not in rt.cluster.nodes.dead_nodes()
        assert [v["step"] for _, v in steps] == ["kill"] and leader in last["nodes"]
        assert set(last["nodes"]) <= set(rt.cluster.nodes.dead_nodes())
    else:
        assert rt.cut() == grudges.isolate(leader, nodes), "the fence is lifted, the leader isolated"
        assert [v["step"] for _, v in steps] == ["unfence-isolate-leader"]
        assert last["cut"] == grudges.as_lists(rt.cut())
    f.stop()
    assert rt.cut() == set() and rt.cluster.nodes.dead_nodes() == []
    whole(rt, closing=True)


def test_protocol_state_targets_name_the_nodes_the_metadata_names(rt: Runtime) -> None:
    """Kill a partition's ISR followers (``kill:isr-followers``); once its
    ISR has shrunk to the leader, ``sole-isr`` names that leader,
    ``out-of-sync`` the followers, and ``pause:sole-isr`` takes the sole
    member and nothing else, on both runtimes. (Killed, not cut off: a
    broker cut off from the others still answers the clients' Metadata
    requests with what it last knew.)"""
    whole(rt)
    full_isr(rt)
    obs = rt.cluster.observer
    kill = fault(rt, "kill", "isr-followers")
    value = kill.start()
    key, followers = value["key"], value["nodes"]
    leader = obs.leader_of(key)
    assert leader not in followers and sorted(followers) == sorted(set(obs.replicas_of(key)) - {leader})
    waited = 0.0
    while obs.isr_of(key) != [leader] and waited < 90:
        rt.settle(0.5)
        waited += 0.5
    assert obs.isr_of(key) == [leader], f"{rt.name}: the ISR of {key} never shrank to its leader"
    # each names its nodes by the partition, and records the ISR it saw
    assert state_nodes("out-of-sync", obs, random.Random(1)) == (sorted(followers), {"key": key, "isr": [leader]})
    assert state_nodes("sole-isr", obs, random.Random(1)) == ([leader], {"key": key, "isr": [leader]})
    pause = fault(rt, "pause", "sole-isr")
    assert pause.start()["nodes"] == [leader]
    assert rt.cluster.nodes.paused_nodes() == [leader]
    pause.stop()
    kill.stop()
    assert rt.cluster.nodes.dead_nodes() == [] and rt.cluster.nodes.paused_nodes() == []
    whole(rt, closing=True)


def test_heal_lifts_by_the_contract_alone_what_a_failed_case_left(rt: Runtime) -> None:
    """What the failure fixture relies on: with nothing of the case's to
    stop, :func:`heal` still restarts a killed node, resumes a paused one,
    lifts a cut and resets a moved clock, and leaves the cluster whole."""
    whole(rt)
    c = rt.cluster
    killed, paused, moved = c.nodes.brokers()[0], c.nodes.brokers()[1], c.nodes.controllers()[0]
    c.nodes.kill(killed)
    c.nodes.pause(paused)
    c.net.cut(grudges.isolate(moved, c.nodes.node_names()))
    c.clock.set_offset(moved, 5_000)
    assert c.nodes.dead_nodes() == [killed] and c.nodes.paused_nodes() == [paused] and rt.cut() and rt.offset(moved)
    heal(rt, [])
    assert c.nodes.dead_nodes() == [] and c.nodes.paused_nodes() == [] and rt.cut() == set()
    assert all(rt.offset(n) == 0 for n in c.nodes.node_names())
    whole(rt, closing=True)


def test_busiest_leader_leads_at_least_as_many_partitions_as_any_other(rt: Runtime) -> None:
    whole(rt)
    obs = rt.cluster.observer
    leaders = [obs.leader_of(k) for k in obs.keys()]
    (node,), desc = state_nodes("busiest-leader", obs, random.Random(3))
    assert leaders.count(node) == desc["leads"] == max(leaders.count(n) for n in leaders)


@pytest.mark.parametrize("target", ["brokers", "controllers"])
def test_a_rolling_restart_takes_each_node_down_cleanly_one_at_a_time_and_waits_for_it(rt: Runtime,
                                                                                        target: str) -> None:
    """Each node of the set in a seeded order: SIGTERM (controlled shutdown),
    started once down, the next only once it is back in sync; never two
    down at once. Its stop abandons the rest and starts whatever is down."""
    whole(rt)
    f = fault(rt, "rolling-restart", target)
    value = f.start()
    order = value["nodes"]
    pool = rt.cluster.nodes.brokers() if target == "brokers" else rt.cluster.nodes.controllers()
    assert sorted(order) == sorted(pool)
    most_down = 0
    for _ in range(240):  # up to 60 s, a look every 0.25 s
        most_down = max(most_down, len(rt.cluster.nodes.dead_nodes()))
        if f.roll.restarted == order and not rt.cluster.nodes.dead_nodes():
            break
        rt.settle(0.25)
    assert f.roll.restarted == order, f"{rt.name}: rolled {f.roll.restarted} of {order}"
    assert most_down <= 1
    stopped = f.stop()
    assert stopped["rolled"] == order and rt.cluster.nodes.dead_nodes() == []
    whole(rt, closing=True)


def test_a_brokers_epoch_is_its_running_incarnations_registration(rt: Runtime) -> None:
    """The Observer names the broker epoch the running process registered
    with: none while the broker is down, and after a restart only the new
    incarnation's own, a later one (seed 001 §1.2.2: the epoch is the offset
    of the registration record), never the previous incarnation's."""
    whole(rt)
    obs, nodes = rt.cluster.observer, rt.cluster.nodes
    broker = sorted(nodes.brokers())[0]
    # a whole cluster's broker names its epoch, though its /status may miss
    # one look on a loaded machine (None: "not answering"): looked for again
    seen: list[int | None] = [None]

    def registered() -> bool:
        seen[0] = obs.broker_epoch(broker)
        return seen[0] is not None

    until(rt, registered, f"{broker} named no broker epoch")
    before = seen[0]
    assert isinstance(before, int) and before >= 0
    nodes.kill(broker)
    assert obs.broker_epoch(broker) is None
    nodes.start(broker)
    after = None
    for _ in range(240):  # up to 60 s
        after = obs.broker_epoch(broker)
        if after is not None:
            break
        rt.settle(0.25)
    assert after is not None and after > before, f"{rt.name}: {broker} registered at {before}, then {after}"
    whole(rt, closing=True)


def until(rt: Runtime, pred: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Let the runtime's time pass until ``pred`` holds (a real process takes
    a moment to die or to start; the simulator's nodes act at once)."""
    waited = 0.0
    while not pred():
        if waited > timeout:
            pytest.fail(f"{rt.name}: {what} after {timeout:.0f}s")
        rt.settle(0.1)
        waited += 0.1


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_a_scenario_runner_plays_each_step_on_the_runtime_and_heal_all_restores_it(rt: Runtime, name: str) -> None:
    """``nemesis.scenarios.ScenarioRunner`` (``--scenario``) on both
    runtimes, its steps played back to back: the sleeps between them are the
    scenario's timing, not its mechanics, and the whole scenarios with their
    data-loss verdicts are bench/campaign_matrix.py's. Roles are bound from
    the observer (L leads the first key, F and G are its other replicas,
    sorted; bound again where a step says so); each isolate makes exactly
    the runner's grudge on the runtime, a heal lifts it, kill and power-loss
    take exactly the nodes the roles name and restart brings them back;
    ``heal_all`` leaves the cluster whole."""
    whole(rt)
    runner = scenarios.ScenarioRunner(name, rt.cluster)
    rt.opened.append(runner)
    obs, nodes = rt.cluster.observer, rt.cluster.nodes
    want_cut: set[tuple[str, str]] = set()
    for i, step in enumerate(scenarios.SCENARIOS[name]):
        if step[0] == "sleep":
            continue
        _, action, args = step  # type: ignore[misc]
        if not runner.roles or args.get("rebind"):
            whole(rt)  # the roles are bound now: the leader must be known
            key = obs.keys()[0]
            # a real cluster's leader is read through a client, which may
            # miss an answer on a loaded machine: the binding is tried again
            for _ in range(20):
                leader = obs.leader_of(key)
                try:
                    out = runner.run(i)
                    break
                except RuntimeError:  # "cannot bind roles": nothing was done
                    rt.settle(0.5)
            else:
                pytest.fail(f"{rt.name}: {key} has no leader to bind the roles to")
        else:
            out = runner.run(i)
        roles = out["roles"]
        assert roles["key"] == key and roles["L"] == leader
        assert [roles["F"], roles["G"]] == sorted(set(obs.replicas_of(key)) - {leader})
        who = [roles[w] for w in ([args["who"]] if isinstance(args.get("who"), str) else args.get("who", []))]
        if action == "isolate":
            want_cut |= {p for b in args["from"] for p in ((who[0], roles[b]), (roles[b], who[0]))}
            assert rt.cut() == want_cut and out["cut"] == sorted([list(p) for p in want_cut])
        elif action == "heal":
            want_cut.clear()
            assert rt.cut() == set()
        elif action in ("kill", "power-loss"):
            assert out["nodes"] == who
            until(rt, lambda: set(who) <= set(nodes.dead_nodes()), f"{who} not down after {action}")
        else:
            assert action == "restart" and out["nodes"] == who
            until(rt, lambda: not set(who) & set(nodes.dead_nodes()), f"{who} not back after restart")
    healed = runner.heal_all()
    assert healed["healed"] and rt.cut() == set() and nodes.dead_nodes() == []
    whole(rt, closing=True)


# -- membership: a cluster with a broker to spare (RF 2 on 3 brokers) ----------------------
def _spare_runtime(name: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    if name == "sim":
        run = sim_run(TestConfig(backend="sim", partitions=2, rf=2, min_isr=1, seed=1), 1)
        assert run.setup()
        sim = run.sim
        yield Runtime("sim", run.cluster, lambda s: sim.run_for(int(s * 1000)), lambda: set(), lambda: set(),
                      lambda n: 0, timings_of(sim.config))
        run.release()
        return
    out = tmp_path_factory.mktemp("membership")
    run_dir = out / "run"
    (run_dir / "nodes").mkdir(parents=True)
    state = RunState.create(out, "membership", run_dir)
    cfg = TestConfig(partitions=2, rf=2, min_isr=1, seed=1, storage="pagecache")
    db = ReferenceDB(cfg, run_dir, state)
    try:
        db.setup()
        assert db.cluster is not None
        yield Runtime("local", db.cluster, time.sleep, lambda: set(), lambda: set(), lambda n: 0,
                      timings_of(reference.protocol_config(cfg)))
    finally:
        db.teardown()
        state.remove()


@pytest.fixture(scope="module", params=["sim", pytest.param("local", marks=pytest.mark.integration)])
def spare(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    gen = _spare_runtime(request.param, tmp_path_factory)
    yield next(gen)
    next(gen, None)


def _until(rt: Runtime, done: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    for _ in range(int(timeout / 0.25)):
        if done():
            return
        rt.settle(0.25)
    pytest.fail(f"{rt.name}: {what} within {timeout:.0f}s")


def test_a_reassignment_moves_the_partition_to_its_target_replicas_kip455(spare: Runtime) -> None:
    """reassign:swap replaces one replica of a partition by the spare
    broker; the move completes (KIP-455: the target replicas in sync, the
    leaving one dropped), and the leader is one of the target's."""
    whole(spare)
    f = fault(spare, "reassign", "swap")
    value = f.start()
    key, target = value["key"], value["nodes"]
    assert len(target) == 2 and len(set(target) - set(value["from"])) == 1
    obs = spare.cluster.observer
    _until(spare, lambda: sorted(obs.replicas_of(key)) == sorted(target) and sorted(obs.isr_of(key)) == sorted(target),
           f"{key} did not move to {target}")
    assert obs.leader_of(key) in target
    assert f.stop() == {"kept": True}
    whole(spare, closing=True)


def test_a_decommission_moves_a_brokers_replicas_away_removes_it_and_its_stop_adds_it_back(spare: Runtime) -> None:
    """decommission:one (KIP-455 moves, a clean shutdown, then
    UnregisterBroker, KIP-631): once done no partition lists the broker and
    it is down; the stop starts it again and it registers afresh."""
    whole(spare)
    f = fault(spare, "decommission", "one")
    value = f.start()
    (node,) = value["nodes"]
    nodes, obs = spare.cluster.nodes, spare.cluster.observer
    _until(spare, lambda: node in nodes.dead_nodes() and all(node not in obs.replicas_of(k) for k in obs.keys()),
           f"{node} was not moved away and shut down")
    _until(spare, lambda: "unregistered" in f.decommission.done, f"{node} was not unregistered")
    f.stop()
    assert node not in nodes.dead_nodes()
    _until(spare, lambda: obs.broker_epoch(node) is not None, f"{node} did not register again")
    whole(spare, closing=True)
