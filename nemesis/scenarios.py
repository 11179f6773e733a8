"""Scripted fault schedules: the protocol documents' data-loss narratives,
played against real processes with targets chosen by role at run time.

A random schedule finds these losses only by luck; a scenario makes the exact
sequence happen, so a run with the historical variant switched on must report
lost acknowledged writes and the same run with today's rules must not. Roles
are bound when the first step runs: ``L`` is the leader of the first key, ``F``
and ``G`` its other replicas (sorted). Each step is recorded as an ordinary
``start-<fault>``/``stop-<fault>`` nemesis op with the scenario, the step and
the nodes in its value.

A recorded scenario's schedule replays as plain faults of the shared
vocabulary (:func:`as_fault`: an isolate is a ``partition`` with its cut, a
power loss a ``lose-unfsynced`` of its nodes, a heal or restart that
fault's stop), with the roles bound again from the cluster the replay finds
(:class:`Rebinding`): a real cluster elects another first leader from run
to run, and the narrative is about the leader, not about ``n1``.

* ``unclean-loss`` — seed 003, "Data Loss Scenario Walkthrough": F is cut off
  from the other brokers and leaves the ISR while L and G keep acknowledging
  acks=all writes; L and G crash; the cut heals. With unclean election F (the
  laggard) becomes leader and L, G truncate to its log when they return: the
  writes only they had are gone. Without it the partition stays offline until
  an ISR member returns, and nothing is lost.
* ``last-replica-standing`` — seed 002 (KIP-966 motivation): F, then G are cut
  off from L; L is alone in the ISR; L loses power (un-fsynced data gone); the
  cut heals; L restarts. Without KIP-966 L is re-elected from the ISR it never
  left and the others truncate to its empty log. With ELR, G is elected.
* ``acks1-leader-kill`` — the leader is cut off from its followers for less
  than replica.lag.time.max.ms (they stay in the ISR), acknowledging acks=1
  writes alone while acks=all writes wait; then the leader is killed, a
  follower is elected cleanly, and the old leader truncates on return. Repeated
  three times. acks=1 loses writes; acks=all must lose none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import generator as g

from .control import Cluster, Observer

Step = tuple[str, str, dict[str, Any]]  # (history f, action, args)

SCENARIOS: dict[str, list[Step | tuple[str, float]]] = {
    "unclean-loss": [
        ("sleep", 3.0),
        ("start-partition", "isolate", {"who": "F", "from": ["L", "G"]}),
        ("sleep", 8.0),
        ("start-kill", "kill", {"who": ["L", "G"]}),
        ("stop-partition", "heal", {}),
        ("sleep", 10.0),
        ("stop-kill", "restart", {"who": ["L", "G"]}),
        ("sleep", 8.0),
    ],
    "last-replica-standing": [
        ("sleep", 3.0),
        ("start-partition", "isolate", {"who": "F", "from": ["L"]}),
        ("sleep", 6.0),
        ("start-partition", "isolate", {"who": "G", "from": ["L"]}),
        ("sleep", 6.0),
        ("start-lose-unfsynced", "power-loss", {"who": ["L"]}),
        ("sleep", 5.0),
        ("stop-partition", "heal", {}),
        ("sleep", 5.0),
        ("stop-lose-unfsynced", "restart", {"who": ["L"]}),
        ("sleep", 10.0),
    ],
    "acks1-leader-kill": [
        *[
            step
            for _ in range(3)
            for step in (
                ("sleep", 3.0),
                ("start-partition", "isolate", {"who": "L", "from": ["F", "G"], "rebind": True}),
                ("sleep", 2.0),
                ("start-kill", "kill", {"who": ["L"]}),
                ("stop-partition", "heal", {}),
                ("sleep", 6.0),
                ("stop-kill", "restart", {"who": ["L"]}),
            )
        ],
        ("sleep", 6.0),
    ],
}

#: scenarios that need the broker's power-loss storage mode
NEEDS_PAGECACHE = {"last-replica-standing"}

#: the roles a scenario binds, each a node of the first key's replica set
ROLES = ("L", "F", "G")

#: a recorded step's history name -> the fault of the shared vocabulary
#: that does the same (its start as the step did; its stop heals every cut,
#: or starts every dead node, as a heal or restart step does)
STEP_FAULTS = {"partition": "partition", "kill": "kill", "lose-unfsynced": "lose-unfsynced"}


def duration(name: str) -> float:
    return sum(s[1] for s in SCENARIOS[name] if s[0] == "sleep")  # type: ignore[misc]


def generator(name: str) -> g.Gen:
    ops: list[Any] = []
    for i, step in enumerate(SCENARIOS[name]):
        if step[0] == "sleep":
            ops.append(g.sleep(float(step[1])))  # type: ignore[arg-type]
        else:
            f, action, args = step  # type: ignore[misc]
            ops.append(g.Once({"f": f, "process": "nemesis",
                               "value": {"fault": "scenario", "scenario": name, "step": i}}))
    return g.Seq(tuple(ops))


def bind(obs: Observer, key: str) -> dict[str, str]:
    """The roles as the cluster's metadata names them now: ``L`` the
    leader of ``key``, ``F`` and ``G`` its other replicas (sorted)."""
    leader, replicas = obs.leader_of(key), obs.replicas_of(key)
    if leader is None or len(replicas) < 3:
        raise RuntimeError(f"cannot bind roles for {key}: leader {leader}, replicas {replicas}")
    others = sorted(r for r in replicas if r != leader)
    return {"L": leader, "F": others[0], "G": others[1], "key": key}


def is_step(entry: dict[str, Any]) -> bool:
    """Whether a schedule entry is a scripted scenario's recorded step."""
    return entry.get("fault") == "scenario"


def as_fault(entry: dict[str, Any]) -> dict[str, Any]:
    """A scripted scenario's recorded step as an entry of the shared
    vocabulary: its history name's fault (``start-partition`` ->
    ``partition``), the cut or nodes it recorded, and the scenario, step
    and roles kept beside them (:class:`Rebinding` reads the roles). A
    step of another name stays as it is, and the vocabulary refuses it."""
    op = str(entry.get("f", "")).split("-", 1)[-1]
    return {**entry, "fault": STEP_FAULTS.get(op, str(entry.get("fault")))}


class Rebinding:
    """A replayed scenario's roles, bound again from the cluster the replay
    finds, as the script bound them: once, at the first step, and again at
    each step the script rebinds at (``rebind``). Each recorded node is
    renamed by its role (the recorded ``L`` becomes the leader now), so a
    replay cuts and powers off the leader it meets, not the node that led
    in the recorded run. Shared by the faults of one nemesis."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.now: dict[str, str] = {}

    def recast(self, entry: dict[str, Any]) -> dict[str, Any]:
        """``entry`` with its cut and nodes renamed by role, the roles now
        in place of the recorded ones, and ``recorded_roles``,
        ``recorded_nodes`` and ``recorded_cut`` where those differ. If no leader is known to
        bind from, the recorded nodes are kept and ``unbound`` says why."""
        was = entry.get("roles")
        if not isinstance(was, dict) or not all(isinstance(was.get(r), str) for r in (*ROLES, "key")):
            return entry
        if not self.now or self._rebinds(entry):
            try:
                self.now = bind(self.cluster.observer, str(was["key"]))
            except RuntimeError as e:
                return {**entry, "unbound": str(e)}
        rename = {was[r]: self.now[r] for r in ROLES}
        out = {**entry, "roles": dict(self.now)}
        if "cut" in entry:
            out["cut"] = sorted([rename.get(a, a), rename.get(b, b)] for a, b in entry["cut"])
        if "nodes" in entry:
            out["nodes"] = [rename.get(n, n) for n in entry["nodes"]]
        if any(rename[n] != n for n in rename):
            out["recorded_roles"] = dict(was)
        if out.get("nodes") != entry.get("nodes"):
            out["recorded_nodes"] = list(entry["nodes"])
        if {tuple(p) for p in out.get("cut", ())} != {tuple(p) for p in entry.get("cut", ())}:
            out["recorded_cut"] = [list(p) for p in entry["cut"]]
        return out

    @staticmethod
    def _rebinds(entry: dict[str, Any]) -> bool:
        steps, i = SCENARIOS.get(str(entry.get("scenario"))), entry.get("step")
        if steps is None or not isinstance(i, int) or not 0 <= i < len(steps) or steps[i][0] == "sleep":
            return False
        return bool(steps[i][2].get("rebind"))  # type: ignore[misc]


@dataclass
class ScenarioRunner:
    """Runs one scenario's steps against the cluster (the nemesis worker calls it)."""

    name: str
    cluster: Cluster

    def __post_init__(self) -> None:
        self.roles: dict[str, str] = {}
        self.cut: set[tuple[str, str]] = set()

    def bind(self) -> dict[str, str]:
        obs = self.cluster.observer
        self.roles = bind(obs, obs.keys()[0])
        return self.roles

    def _names(self, who: Any) -> list[str]:
        return [self.roles[w] for w in ([who] if isinstance(who, str) else who)]

    def run(self, step_index: int) -> dict[str, Any]:
        step = SCENARIOS[self.name][step_index]
        f, action, args = step  # type: ignore[misc]
        if not self.roles or args.get("rebind"):
            self.bind()
        out: dict[str, Any] = {"action": action, "roles": dict(self.roles)}
        if action == "isolate":
            (a,) = self._names(args["who"])
            for b in self._names(args["from"]):
                self.cut |= {(a, b), (b, a)}
            self.cluster.net.cut(self.cut)
            out["cut"] = sorted([list(p) for p in self.cut])
        elif action == "heal":
            self.cut.clear()
            self.cluster.net.cut([])
        elif action == "kill":
            out["nodes"] = self._names(args["who"])
            for n in out["nodes"]:
                self.cluster.nodes.kill(n)
        elif action == "power-loss":
            out["nodes"] = self._names(args["who"])
            for n in out["nodes"]:
                self.cluster.nodes.power_loss(n)
        elif action == "restart":
            out["nodes"] = self._names(args["who"])
            for n in out["nodes"]:
                self.cluster.nodes.start(n)
        else:
            raise ValueError(f"unknown scenario action {action!r}")
        return out

    def heal_all(self) -> dict[str, Any]:
        self.cut.clear()
        self.cluster.net.cut([])
        dead = self.cluster.nodes.dead_nodes()
        for n in dead:
            self.cluster.nodes.start(n)
        return {"healed": True, "restarted": dead}
