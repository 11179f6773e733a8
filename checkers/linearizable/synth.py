"""Synthetic linearizable histories from a simulated register (and from
simulated Kafka partition logs, for the kafka-log model).

Clients issue overlapping operations against one real (sequential)
cas-register. Each operation takes effect at a single instant between its
invocation and its completion — its linearization point — so the recorded
history is linearizable by construction. Crashes (``info``) are drawn both
before and after the effect, matching the "may or may not have happened"
semantics; a cas whose expected value does not match completes ``fail``.

Used by the benchmark and by property tests.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from checkers.history.op import Op

__all__ = ["register_history", "kafka_history"]


def _drive(
    n_ops: int,
    clients: int,
    rng: random.Random,
    crash_p: float,
    invoke: Callable[[int], tuple[str, Any, Any]],
    effect: Callable[[str, Any, Any], tuple[str, Any]],
) -> list[Op]:
    """Run ``clients`` concurrent client slots until ``n_ops`` operations are
    issued and completed. A slot goes idle -> invoked -> effect applied ->
    idle; ``invoke(issued)`` draws a new op ``(f, value, arg)`` and
    ``effect(f, value, arg)`` applies it at its linearization point,
    returning ``(type, completion value)``. With ``crash_p`` a slot crashes
    before or after the effect (``info``, the effect did or did not
    happen) and is replaced by a new process id, as Jepsen does."""
    history: list[Op] = []
    phase = [0] * clients
    proc = list(range(clients))
    next_proc = clients
    pending: list[Any] = [None] * clients  # (f, value, arg) of the in-flight op
    result: list[Any] = [None] * clients  # (type, value) decided at the effect
    issued = 0
    t = 0

    def emit(slot: int, typ: str, f: str, value: Any) -> None:
        nonlocal t
        t += rng.randint(1, 1000)
        history.append(Op(type=typ, f=f, value=value, process=proc[slot], time=t, index=len(history)))

    def crash(slot: int) -> None:
        nonlocal next_proc
        f, v, _ = pending[slot]
        emit(slot, "info", f, v)
        phase[slot] = 0
        proc[slot] = next_proc
        next_proc += 1

    while issued < n_ops or any(phase):
        slot = rng.randrange(clients)
        ph = phase[slot]
        if ph == 0:
            if issued >= n_ops:
                continue
            pending[slot] = invoke(issued)
            emit(slot, "invoke", pending[slot][0], pending[slot][1])
            issued += 1
            phase[slot] = 1
        elif ph == 1:
            if crash_p and rng.random() < crash_p / 2:
                crash(slot)  # before the effect: it never happens
                continue
            result[slot] = effect(*pending[slot])
            phase[slot] = 2
        else:
            if crash_p and rng.random() < crash_p / 2:
                crash(slot)  # after the effect: it happened, but nobody knows
                continue
            typ, rv = result[slot]
            emit(slot, typ, pending[slot][0], rv)
            phase[slot] = 0
    return history


def register_history(
    n_ops: int,
    clients: int = 10,
    seed: int = 0,
    values: int = 5,
    crash_p: float = 0.0,
    fs: tuple[str, ...] = ("read", "write", "cas"),
    initial: Any = 0,
) -> list[Op]:
    """``n_ops`` client operations (about ``2 * n_ops`` history entries) by
    ``clients`` concurrent processes against one sequential cas-register."""
    rng = random.Random(seed)
    reg = initial

    def invoke(issued: int) -> tuple[str, Any, Any]:
        f = rng.choice(fs)
        if f == "read":
            v = None
        elif f == "write":
            v = rng.randrange(values)
        else:
            v = [rng.randrange(values), rng.randrange(values)]
        return f, v, None

    def effect(f: str, v: Any, _: Any) -> tuple[str, Any]:
        nonlocal reg
        if f == "read":
            return "ok", reg
        if f == "write":
            reg = v
            return "ok", v
        if reg == v[0]:
            reg = v[1]
            return "ok", v
        return "fail", v

    return _drive(n_ops, clients, rng, crash_p, invoke, effect)


def kafka_history(
    n_ops: int,
    clients: int = 10,
    partitions: int = 2,
    seed: int = 0,
    send_p: float = 0.6,
    crash_p: float = 0.0,
    max_lag: int = 20,
    max_records: int = 5,
) -> list[Op]:
    """Queue-workload ops (``checkers/history/op.py`` shapes) against real
    in-memory partition logs: a send appends at the next offset at its
    linearization point; a poll returns up to ``max_records`` consecutive
    records starting at most ``max_lag`` behind the end. Linearizable for
    the kafka-log model by construction. Keys are ``t-<partition>``."""
    rng = random.Random(seed)
    logs: dict[str, list[list]] = {f"t-{i}": [] for i in range(partitions)}
    keys = list(logs)

    def invoke(issued: int) -> tuple[str, Any, Any]:
        key = rng.choice(keys)
        if rng.random() < send_p:
            return "send", [["send", key, issued]], key
        return "poll", [["poll"]], key

    def effect(f: str, v: Any, key: Any) -> tuple[str, Any]:
        log = logs[key]
        if f == "send":
            value = v[0][2]
            log.append([len(log), value])
            return "ok", [["send", key, [len(log) - 1, value]]]
        start = max(0, len(log) - rng.randint(0, max_lag))
        return "ok", [["poll", {key: [list(r) for r in log[start:start + rng.randint(0, max_records)]]}]]

    return _drive(n_ops, clients, rng, crash_p, invoke, effect)
