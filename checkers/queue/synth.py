"""Synthetic queue histories: a correct Kafka-like log driven by concurrent
clients, used by tests and ``bench/checker_speed.py`` as the known-valid
baseline that anomaly tests perturb.

Each client process alternates invoke/complete; a send's effect (append at
the next offset) and a poll's effect (read from the process's position) are
applied at completion, which lies inside the operation's real-time interval,
so the history is valid by construction: no lost, duplicated, reordered or
skipped record, and every acknowledged send is read by the final polls
(issued by fresh processes, reading each partition from offset 0).
"""

from __future__ import annotations

import random
from typing import Iterator

from checkers.history.op import Op


def valid_history(n_ops: int = 1000, partitions: int = 4, processes: int = 8, seed: int = 0,
                  poll_ratio: float = 0.5, max_poll: int = 5, acks: str = "all",
                  final_reads: bool = True) -> list[Op]:
    """About ``n_ops`` operations (invocations + completions) before the
    final reads (one invoke/ok pair per partition)."""
    return list(iter_valid_history(n_ops, partitions, processes, seed, poll_ratio, max_poll, acks, final_reads))


def iter_valid_history(n_ops: int = 1000, partitions: int = 4, processes: int = 8, seed: int = 0,
                       poll_ratio: float = 0.5, max_poll: int = 5, acks: str = "all",
                       final_reads: bool = True) -> Iterator[Op]:
    """:func:`valid_history` one operation at a time (a 10M-operation
    history is written to a file without being held)."""
    rng = random.Random(seed)
    keys = [f"t-{i}" for i in range(partitions)]
    logs: dict[str, list[int]] = {k: [] for k in keys}
    pos: dict[int, dict[str, int]] = {p: {} for p in range(processes)}
    assigned = {p: [k for j, k in enumerate(keys) if j % processes == p % processes or partitions < processes]
                for p in range(processes)}
    open_: dict[int, tuple[str, str, int]] = {}
    n = 0
    t = 0
    nxt = 0
    while n < n_ops or open_:
        t += rng.randint(1, 1000)
        p = rng.randrange(processes)
        if p in open_:
            f, k, v = open_.pop(p)
            if f == "send":
                off = len(logs[k])
                logs[k].append(v)
                yield Op("ok", "send", [["send", k, [off, v]]], p, t, n, extra={"acks": acks})
            else:
                res: dict[str, list] = {}
                for k in assigned[p]:
                    start = pos[p].get(k, 0)
                    got = logs[k][start:start + rng.randint(0, max_poll)]
                    if got:
                        res[k] = [[start + i, x] for i, x in enumerate(got)]
                        pos[p][k] = start + len(got)
                yield Op("ok", "poll", [["poll", res]], p, t, n)
            n += 1
        elif n < n_ops:
            if rng.random() < poll_ratio and assigned[p]:
                open_[p] = ("poll", "", 0)
                yield Op("invoke", "poll", [["poll"]], p, t, n)
            else:
                k = keys[rng.randrange(partitions)]
                v = nxt
                nxt += 1
                open_[p] = ("send", k, v)
                yield Op("invoke", "send", [["send", k, v]], p, t, n, extra={"acks": acks})
            n += 1
    if final_reads:
        for j, k in enumerate(keys):
            p = processes + j
            t += 1
            yield Op("invoke", "poll", [["poll"]], p, t, n, extra={"final": True})
            t += 1
            yield Op("ok", "poll", [["poll", {k: [[o, x] for o, x in enumerate(logs[k])]}]], p, t,
                     n + 1, extra={"final": True})
            n += 2


class HistoryBuilder:
    """Hand-written queue histories for tests and examples.

    Each call appends operations with strictly increasing times (10 ns apart);
    ``invoke``/``complete`` let operations overlap, the one-shot helpers
    (``send``, ``poll``, ``txn``) add an invocation and its completion back to
    back. Completion methods return the completion's op index."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t = 0
        self._open: dict[object, Op] = {}

    def _add(self, type: str, f: str, value: object, process: object, **extra: object) -> int:
        self.t += 10
        op = Op(type, f, value, process, self.t, len(self.ops), extra={k: v for k, v in extra.items() if v is not None})
        self.ops.append(op)
        return op.index

    def invoke(self, process: object, f: str, value: list, **extra: object) -> int:
        i = self._add("invoke", f, value, process, **extra)
        self._open[process] = self.ops[i]
        return i

    def complete(self, process: object, type: str, value: list | None, **extra: object) -> int:
        inv = self._open.pop(process)
        merged = {**inv.extra, **extra}
        return self._add(type, inv.f, value, process, **merged)

    # one-shot helpers -------------------------------------------------------
    def send(self, process: object, key: str, value: object, offset: int | None = None,
             type: str = "ok", acks: str = "all", idempotent: bool | None = None) -> int:
        self.invoke(process, "send", [["send", key, value]], acks=acks, idempotent=idempotent)
        v = [offset, value] if offset is not None else value
        return self.complete(process, type, [["send", key, v]])

    def poll(self, process: object, reads: dict[str, list], type: str = "ok", final: bool | None = None) -> int:
        self.invoke(process, "poll", [["poll"]], final=final)
        return self.complete(process, type, [["poll", {k: [list(p) for p in prs] for k, prs in reads.items()}]])

    def txn(self, process: object, completed: list, type: str = "ok") -> int:
        """``completed`` is the completion's micro-ops; the invocation is
        derived (sends without offsets, bare polls)."""
        inv = []
        for m in completed:
            if m[0] == "send":
                x = m[2]
                inv.append(["send", m[1], x[1] if isinstance(x, list) else x])
            else:
                inv.append(["poll"])
        self.invoke(process, "txn", inv)
        return self.complete(process, type, completed)

    def assign(self, process: object, keys: list[str], f: str = "assign") -> int:
        self.invoke(process, f, list(keys))
        return self.complete(process, "ok", list(keys))
