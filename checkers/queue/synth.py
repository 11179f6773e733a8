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

from checkers.history.op import Op


def valid_history(n_ops: int = 1000, partitions: int = 4, processes: int = 8, seed: int = 0,
                  poll_ratio: float = 0.5, max_poll: int = 5, acks: str = "all",
                  final_reads: bool = True) -> list[Op]:
    """About ``n_ops`` operations (invocations + completions) before the
    final reads (one invoke/ok pair per partition)."""
    rng = random.Random(seed)
    keys = [f"t-{i}" for i in range(partitions)]
    logs: dict[str, list[int]] = {k: [] for k in keys}
    pos: dict[int, dict[str, int]] = {p: {} for p in range(processes)}
    assigned = {p: [k for j, k in enumerate(keys) if j % processes == p % processes or partitions < processes]
                for p in range(processes)}
    open_: dict[int, tuple[str, str, int]] = {}
    ops: list[Op] = []
    t = 0
    nxt = 0
    while len(ops) < n_ops or open_:
        t += rng.randint(1, 1000)
        p = rng.randrange(processes)
        if p in open_:
            f, k, v = open_.pop(p)
            if f == "send":
                off = len(logs[k])
                logs[k].append(v)
                ops.append(Op("ok", "send", [["send", k, [off, v]]], p, t, len(ops), extra={"acks": acks}))
            else:
                res: dict[str, list] = {}
                for k in assigned[p]:
                    start = pos[p].get(k, 0)
                    got = logs[k][start:start + rng.randint(0, max_poll)]
                    if got:
                        res[k] = [[start + i, x] for i, x in enumerate(got)]
                        pos[p][k] = start + len(got)
                ops.append(Op("ok", "poll", [["poll", res]], p, t, len(ops)))
        elif len(ops) < n_ops:
            if rng.random() < poll_ratio and assigned[p]:
                open_[p] = ("poll", "", 0)
                ops.append(Op("invoke", "poll", [["poll"]], p, t, len(ops)))
            else:
                k = keys[rng.randrange(partitions)]
                v = nxt
                nxt += 1
                open_[p] = ("send", k, v)
                ops.append(Op("invoke", "send", [["send", k, v]], p, t, len(ops), extra={"acks": acks}))
    if final_reads:
        for j, k in enumerate(keys):
            p = processes + j
            t += 1
            ops.append(Op("invoke", "poll", [["poll"]], p, t, len(ops), extra={"final": True}))
            t += 1
            ops.append(Op("ok", "poll", [["poll", {k: [[o, x] for o, x in enumerate(logs[k])]}]], p, t,
                          len(ops), extra={"final": True}))
    return ops
