"""Synthetic linearizable histories from a simulated register.

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
from typing import Any

from checkers.history.op import Op

__all__ = ["register_history"]


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
    ``clients`` concurrent processes. A crashed process is replaced by a new
    process id, as Jepsen does."""
    rng = random.Random(seed)
    reg = initial
    history: list[Op] = []
    # phase per client slot: 0 idle, 1 invoked (effect pending), 2 effect applied
    phase = [0] * clients
    proc = list(range(clients))
    next_proc = clients
    pending: list[Any] = [None] * clients   # (f, value) of the in-flight op
    result: list[Any] = [None] * clients    # (type, value) decided at the effect
    issued = 0
    t = 0

    def emit(slot: int, typ: str, f: str, value: Any) -> None:
        nonlocal t
        t += rng.randint(1, 1000)
        history.append(Op(type=typ, f=f, value=value, process=proc[slot], time=t,
                          index=len(history)))

    while issued < n_ops or any(phase):
        slot = rng.randrange(clients)
        ph = phase[slot]
        if ph == 0:
            if issued >= n_ops:
                continue
            f = rng.choice(fs)
            if f == "read":
                v = None
            elif f == "write":
                v = rng.randrange(values)
            else:
                v = [rng.randrange(values), rng.randrange(values)]
            pending[slot] = (f, v)
            emit(slot, "invoke", f, v)
            issued += 1
            phase[slot] = 1
        elif ph == 1:
            f, v = pending[slot]
            if crash_p and rng.random() < crash_p / 2:
                # Crash before the effect: it never happens.
                emit(slot, "info", f, v)
                phase[slot] = 0
                proc[slot] = next_proc
                next_proc += 1
                continue
            if f == "read":
                result[slot] = ("ok", reg)
            elif f == "write":
                reg = v
                result[slot] = ("ok", v)
            else:
                if reg == v[0]:
                    reg = v[1]
                    result[slot] = ("ok", v)
                else:
                    result[slot] = ("fail", v)
            phase[slot] = 2
        else:
            f, v = pending[slot]
            typ, rv = result[slot]
            if crash_p and rng.random() < crash_p / 2:
                # Crash after the effect: it happened, but nobody knows.
                emit(slot, "info", f, v)
                proc[slot] = next_proc
                next_proc += 1
            else:
                emit(slot, typ, f, rv)
            phase[slot] = 0
    return history
