"""Why a partition stayed unavailable after the final heal, from the
cluster's state at the moment the bound ran out (or at the end of the run).

A partition without a leader is *down by design* when the election rules
name no replica that may lead: no ISR member and no ELR member is left
(KIP-966 takes a broker that registered after an unclean shutdown out of
the ELR), the last known leader is not there to be elected either, and
unclean election is off (or unclean recovery waits for an operator). Kafka
4.4's order is ``PartitionChangeBuilder.electAnyLeader`` in
``kafka-metadata-4.4.0.jar``: an acceptable ISR member, then
``canElectLastKnownLeader`` (ELR on, ISR and ELR empty, LastKnownELR holding
exactly the one last leader, which must be acceptable), then an unclean
election only if the topic allows one; the reference follows the same order
(``reference_impl/core/partition_change.py``).

Everything else is *stuck*: a live replica the rules would elect exists,
yet the partition had no leader, or had one and still took no acks=all
write. The classes, in the order they are tried:

* ``quorum-leaderless``: the controller quorum had no leader, so nothing
  could be elected or registered;
* ``eligible-not-elected``: an ISR/ELR member (or the last known leader, or
  any replica with unclean election on) ran, registered and unfenced, and was
  not elected;
* ``broker-not-back``: the replicas that may lead ran but were not
  registered or were fenced (or did not run at all) when the bound ran out;
* ``isr-below-min``: a leader, but fewer than min.insync.replicas in its ISR
  while other replicas ran: their fetches did not bring them back;
* ``leader-not-serving``: the leader the metadata names was fenced or down;
* ``client``: leader and ISR could take the write, the client's writes
  failed anyway (their errors are named).

``undetermined`` when no state was seen at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .leaders import PartitionState

BY_DESIGN = "no-eligible-leader"


@dataclass
class BrokerState:
    """A broker as the snapshot saw it (None: not known)."""

    name: str
    running: bool | None = None
    registered: bool | None = None
    fenced: bool | None = None
    #: what the runtime saw of it besides (a stalled fetch, its clock), in words
    detail: str | None = None

    @property
    def active(self) -> bool | None:
        """Registered, unfenced and running (an acceptable leader); None if unknown."""
        if self.running is False or self.registered is False or self.fenced is True:
            return False
        if self.fenced is False:
            return True
        return None

    def why_not(self) -> str:
        if self.running is False:
            return f"{self.name} not running"
        if self.registered is False:
            return f"{self.name} not registered"
        if self.fenced is True:
            return f"{self.name} fenced"
        return f"{self.name} in an unknown state"


@dataclass
class FinalState:
    """The cluster when the bound ran out: partitions, brokers, quorum and
    the election rules in force (``rules``: ``unclean_election``, ``elr``,
    ``recovery_strategy``)."""

    partitions: dict[str, PartitionState] = field(default_factory=dict)
    brokers: dict[int, BrokerState] = field(default_factory=dict)
    #: the quorum leader's name; None: none; ``"?"``: not known
    quorum_leader: Any = "?"
    #: each controller's process: ``running``, ``paused`` or ``down``
    controllers: dict[str, str] = field(default_factory=dict)
    rules: dict[str, Any] = field(default_factory=dict)
    min_isr: int = 1
    source: str = ""
    t_ns: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FinalState":
        parts = {str(k): PartitionState.of(v) for k, v in (d.get("partitions") or {}).items() if isinstance(v, dict)}
        brokers = {}
        for k, v in (d.get("brokers") or {}).items():
            if isinstance(v, dict):
                brokers[int(k)] = BrokerState(str(v.get("name", f"n{k}")), v.get("running"), v.get("registered"),
                                              v.get("fenced"), v.get("detail"))
        return cls(parts, brokers, d.get("quorum_leader", "?"), dict(d.get("controllers") or {}),
                   dict(d.get("rules") or {}), int(d.get("min_isr") or 1), str(d.get("source") or ""), d.get("t_ns"))

    def name(self, b: int) -> str:
        s = self.brokers.get(b)
        return s.name if s is not None else f"n{b}"

    def active(self, b: int) -> bool | None:
        s = self.brokers.get(b)
        return s.active if s is not None else None

    def broker(self, b: int) -> BrokerState:
        return self.brokers.get(b) or BrokerState(f"n{b}")


@dataclass
class Cause:
    """Why one partition was unavailable: a class (module docstring),
    whether the protocol's rules made it so, and the reason in words."""

    kind: str
    by_design: bool | None
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "by_design": self.by_design, "text": self.text}


def _names(fs: FinalState, ids: list[int]) -> str:
    return ", ".join(fs.name(b) for b in ids) or "none"


def _last_known_leader(p: PartitionState) -> int:
    """The reference traces the LastKnownLeader itself; Kafka keeps it as
    the single member of LastKnownELR (``canElectLastKnownLeader``)."""
    if p.last_known_leader >= 0:
        return p.last_known_leader
    return p.last_known_elr[0] if len(p.last_known_elr) == 1 else -1


def classify(key: str, fs: FinalState | None, errors: list[str]) -> Cause:
    """The cause of ``key``'s unavailability (module docstring); ``errors``
    are the errors its writes after the heal met."""
    if fs is None or (not fs.partitions and fs.quorum_leader == "?"):
        return Cause("undetermined", None, "no metadata of the cluster was seen after the heal")
    if fs.quorum_leader is None:
        states = ", ".join(f"{n} {st}" for n, st in sorted(fs.controllers.items()))
        return Cause("quorum-leaderless", False, "the controller quorum had no leader"
                     + (f" ({states})" if states else "") + ": no broker could register and nothing be elected")
    p = fs.partitions.get(key)
    if p is None:
        return Cause("undetermined", None, f"no metadata of {key} was seen")
    if p.leader < 0:
        return _leaderless(fs, p)
    return _led(key, fs, p, errors)


def _leaderless(fs: FinalState, p: PartitionState) -> Cause:
    eligible = list(dict.fromkeys(p.isr + p.elr))
    ready = [b for b in eligible if fs.active(b)]
    if ready:
        return Cause("eligible-not-elected", False,
                     f"no leader, though {_names(fs, ready)} (ISR {_names(fs, p.isr)}, ELR {_names(fs, p.elr)}) "
                     "ran, registered and unfenced")
    if eligible:
        why = "; ".join(fs.broker(b).why_not() + _detail(fs, b) for b in eligible)
        return Cause("broker-not-back", False,
                     f"no leader: the replicas that may lead (ISR {_names(fs, p.isr)}, ELR {_names(fs, p.elr)}) "
                     f"were not back: {why}")
    rules = fs.rules
    lkl = _last_known_leader(p)
    strategy = rules.get("recovery_strategy")
    live = [r for r in p.replicas if fs.active(r)]
    if rules.get("elr", True) and strategy is None and lkl >= 0:
        if fs.active(lkl):
            return Cause("eligible-not-elected", False,
                         f"no leader, though the last known leader {fs.name(lkl)} ran, registered and unfenced")
        return Cause("broker-not-back", False,
                     f"no leader: the last known leader {fs.name(lkl)} was not back: "
                     f"{fs.broker(lkl).why_not()}{_detail(fs, lkl)}")
    if rules.get("unclean_election") or strategy == "Aggressive" or (
            strategy == "Balanced" and p.last_known_elr and all(fs.active(r) for r in p.last_known_elr)):
        if live:
            return Cause("eligible-not-elected", False,
                         f"no leader, though {_names(fs, live)} ran, registered and unfenced and the rules "
                         f"({'unclean election' if strategy is None else 'unclean recovery ' + str(strategy)}) "
                         "allow electing them")
        return Cause("broker-not-back", False, "no leader: no replica was back: "
                     + "; ".join(fs.broker(r).why_not() + _detail(fs, r) for r in p.replicas))
    return Cause(BY_DESIGN, True, _design_words(fs, p, lkl, strategy))


def _design_words(fs: FinalState, p: PartitionState, lkl: int, strategy: Any) -> str:
    parts = ["ISR empty", "ELR empty" if fs.rules.get("elr", True) else "no ELR (KIP-966 off)"]
    if p.last_known_elr:
        parts[-1] += (f" (LastKnownELR {_names(fs, p.last_known_elr)}: a broker that registers after an "
                      "unclean shutdown leaves the ELR)")
    if strategy is not None:
        parts.append(f"unclean recovery strategy {strategy}"
                     + (" waits for an operator" if strategy == "None" else " waits for every LastKnownELR member"))
    elif lkl < 0:
        parts.append("no last known leader")
    parts.append("unclean election off")
    return "no eligible leader by the election rules: " + ", ".join(parts)


def _led(key: str, fs: FinalState, p: PartitionState, errors: list[str]) -> Cause:
    leader = p.leader
    if fs.active(leader) is False:
        return Cause("leader-not-serving", False,
                     f"its leader {fs.name(leader)} was not serving: {fs.broker(leader).why_not()}")
    if len(p.isr) < fs.min_isr:
        out = [r for r in p.replicas if r not in p.isr]
        running = [r for r in out if fs.broker(r).running is not False]
        why = "; ".join(f"{fs.name(r)}" + _detail(fs, r) for r in running)
        return Cause("isr-below-min", False,
                     f"leader {fs.name(leader)} with ISR {_names(fs, p.isr)}, below min.insync.replicas "
                     f"{fs.min_isr}" + (f", while {why} ran out of it: their fetches did not bring them back"
                                       if running else ": the other replicas were not running"))
    errs = ", ".join(sorted(set(errors))) or "no answer"
    return Cause("client", False,
                 f"leader {fs.name(leader)} with ISR {_names(fs, p.isr)} could take the write; "
                 f"the writes to {key} failed anyway ({errs})")


def _detail(fs: FinalState, b: int) -> str:
    d = fs.broker(b).detail
    return f" ({d})" if d else ""
