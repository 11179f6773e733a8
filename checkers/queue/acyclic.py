"""A quick proof that the cross-key dependency graph has no cycle.

:func:`checkers.queue.graph.find_cycles` builds the graph of a whole
history (ops, their ww / wr / rw / process edges, real-time order through
time points) and prunes it with Kahn's algorithm, one Python step per node
and edge: about two seconds at 1M operations, for what is, in a valid
history, an empty answer. Here the same graph is built in numpy arrays and
shown acyclic another way: a graph is acyclic exactly when its nodes can be
ranked so that every edge goes up. Real time already ranks nearly every
edge (an operation's rank is where its completion falls among all
invocations and completions; a time point sits just before the invocation
that created it), so the ranks start there and only the edges that go
down are repaired, by raising their target above their source, repeating
for the out-edges of what was raised (a Bellman-Ford relaxation, batched).
On a cycle the raising never ends; past a bound :func:`prove_acyclic`
gives up and the caller runs the full search, which names the cycles.

The answer, when there is one, is exactly the full search's for a graph
with no cycle: the same node, time-point and edge counts (the edges are
counted as :func:`find_cycles` appends them) and no cyclic node.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from .project import OpTable
from .intsort import stable_argsort, unique_sorted

#: rank units between two consecutive events in time order: raising a
#: target by one stays below the next event's rank for this many hops
_GAP = 1 << 20
#: give up (the caller then runs the full search) past this many rounds
#: or this many edges examined in all, in units of the graph's edges
_MAX_ROUNDS = 2_000
_MAX_WORK = 2


def _ints(col: Any) -> np.ndarray | None:
    """A :class:`Col`'s int64 values, or None when it holds anything else."""
    d = col.data
    if type(d) is array:
        return np.frombuffer(d, dtype=np.int64) if len(d) else np.zeros(0, np.int64)
    return None


def prove_acyclic(table: OpTable, key_edges: list[tuple[str, dict[str, list[int]]]],
                  committed_info: set[int], *, rw: bool = False, ww: bool = True) -> dict[str, int] | None:
    """``{"nodes", "time_points", "edges"}`` of the graph
    :func:`checkers.queue.graph.find_cycles` would build, when it has no
    cycle; None when that is not shown here (a cycle, or a history whose op
    table is not all 64-bit integers)."""
    times = _op_times(table)
    if times is None:
        return None
    index, procs, inv_t, cmp_t, has_ct, is_ok = times
    nodes = _nodes(index, is_ok, table, committed_info)
    n = len(nodes)
    ops_of = index[nodes]
    # op index -> node (an op index twice: the full search's own rule decides)
    if n and (int(ops_of.min()) < 0 or int(ops_of.max()) >= 4 * len(index) + 1024):
        return None
    # node ids in 32 bits while they fit (time points are at most one per
    # node): the edge arrays are the bulk of the graph, and at 10M
    # operations every int64 temporary of them is hundreds of megabytes
    ids = np.int32 if 2 * n < (1 << 31) - 1 else np.int64
    lookup = np.full(int(ops_of.max()) + 1 if n else 0, -1, dtype=ids)
    lookup[ops_of] = np.arange(n, dtype=ids)
    if int(np.count_nonzero(lookup >= 0)) != n:
        return None
    kinds = (["ww"] if ww else []) + ["wr"] + (["rw"] if rw else [])
    edges = _key_edges(key_edges, kinds, lookup, ids)
    del lookup
    if edges is None:
        return None
    srcs, dsts = edges
    # process order: consecutive nodes of each process, in table order
    p_nodes = procs[nodes]
    by_p = stable_argsort(p_nodes).astype(ids)  # process numbers: by radix when they are small
    same = p_nodes[by_p][1:] == p_nodes[by_p][:-1]
    del p_nodes
    srcs.append(by_p[:-1][same])
    dsts.append(by_p[1:][same])
    del by_p, same
    rank, n_tp = _realtime(nodes, is_ok, has_ct, inv_t, cmp_t, ids, srcs, dsts)
    src = np.concatenate(srcs)
    del srcs
    dst = np.concatenate(dsts)
    del dsts
    if not _relax(rank, src, dst, n + n_tp):
        return None
    return {"nodes": n, "time_points": n_tp, "edges": int(len(src))}


def _op_times(table: OpTable) -> tuple[np.ndarray, ...] | None:
    """The op table's index, process, invocation and completion time
    columns, which completions have a time, and which ops are ok, as
    arrays; None unless they are all 64-bit ints (times within 61 bits)."""
    index = _ints(table.index)
    procs = _ints(table.process)
    inv_t = _ints(table.invoke_time)
    if index is None or procs is None or inv_t is None:
        return None
    n_all = len(index)
    cmp_col = table.complete_time.data
    if type(cmp_col) is array:
        cmp_t = _ints(table.complete_time)
        has_ct = np.ones(n_all, dtype=bool)
    else:
        if any(x is not None and type(x) is not int for x in cmp_col):
            return None
        has_ct = np.fromiter((x is not None for x in cmp_col), dtype=bool, count=n_all)
        try:
            cmp_t = np.fromiter((0 if x is None else x for x in cmp_col), dtype=np.int64, count=n_all)
        except OverflowError:
            return None
    assert cmp_t is not None
    if n_all and (int(inv_t.min()) < -(1 << 61) or int(inv_t.max()) >= 1 << 61
                  or int(cmp_t.min()) < -(1 << 61) or int(cmp_t.max()) >= 1 << 61):
        return None
    codes = np.frombuffer(table.type.codes, dtype=np.uint8 if table.type.codes.typecode == "B" else np.uint32)
    is_ok = np.zeros(n_all, dtype=bool)
    for c, name in enumerate(table.type.table):
        if name == "ok":
            is_ok |= codes == c
    return index, procs, inv_t, cmp_t, has_ct, is_ok


def _nodes(index: np.ndarray, is_ok: np.ndarray, table: OpTable, committed_info: set[int]) -> np.ndarray:
    """The graph's ops: ok ones, and info ones that must have committed."""
    node_mask = is_ok
    if committed_info:
        codes = np.frombuffer(table.type.codes, dtype=np.uint8 if table.type.codes.typecode == "B" else np.uint32)
        is_info = np.zeros(len(index), dtype=bool)
        for c, name in enumerate(table.type.table):
            if name == "info":
                is_info |= codes == c
        if is_info.any():
            ci = np.fromiter((x for x in committed_info if type(x) is int and -(1 << 63) <= x < 1 << 63),
                             dtype=np.int64)
            node_mask = is_ok | (is_info & np.isin(index, ci))
    return np.flatnonzero(node_mask)


def _key_edges(key_edges: list[tuple[str, dict[str, list[int]]]], kinds: list[str], lookup: np.ndarray,
               ids: Any) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """Each key's edges of ``kinds`` as node pairs (sources, destinations),
    one key at a time (no copy of them all at once); None when one is not
    a flat list of 64-bit ints."""
    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    for _key, edges in key_edges:
        for name in kinds:
            e = edges.get(name) or ()
            if len(e) % 2:
                return None
            if not len(e):
                continue
            try:
                flat = np.frombuffer(e, dtype=np.int64) if type(e) is array and e.typecode == "q" \
                    else np.array(e, dtype=np.int64)
            except (OverflowError, TypeError, ValueError):
                return None
            if flat.ndim != 1:
                return None
            inside = (flat >= 0) & (flat < len(lookup))
            ends = np.full(len(flat), -1, dtype=ids)
            ends[inside] = lookup[flat[inside]]
            a, b = ends[0::2], ends[1::2]
            keep = (a >= 0) & (b >= 0) & (a != b)
            srcs.append(a[keep])
            dsts.append(b[keep])
    return srcs, dsts


def _realtime(nodes: np.ndarray, is_ok: np.ndarray, has_ct: np.ndarray, inv_t: np.ndarray,
              cmp_t: np.ndarray, ids: Any, srcs: list[np.ndarray],
              dsts: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Real time: invocations (every node) and completions (ok nodes with a
    time), sorted by time, an invocation before a completion at the same
    time, then by position (see find_cycles): their time points and edges
    appended to ``srcs``/``dsts``; returns each node's and time point's
    starting rank and the number of time points."""
    n = len(nodes)
    with_c = np.flatnonzero(is_ok[nodes] & has_ct[nodes]).astype(ids)
    keys = np.concatenate([inv_t[nodes] * 2, cmp_t[nodes][with_c] * 2 + 1])
    seq = np.argsort(keys, kind="stable").astype(ids)
    del keys
    is_c = seq >= n
    # completions seen before each event (before the k-th invocation, at
    # position p, come p - k of them); a time point is made at an
    # invocation when completions came since the previous invocation
    inv_pos = np.flatnonzero(~is_c).astype(ids)
    c_at_inv = inv_pos - np.arange(len(inv_pos), dtype=ids)
    makes_tp = c_at_inv > np.concatenate([[0], c_at_inv[:-1]])
    del c_at_inv
    n_tp = int(np.count_nonzero(makes_tp))
    tp_of_inv = (np.cumsum(makes_tp, dtype=np.int64) - 1).astype(ids)  # the time point at each invocation (-1: none)
    inv_nodes = seq[inv_pos]
    has_tp = tp_of_inv >= 0
    # each completion links to the time point the next invocation makes
    # (the k-th completion, at position p, has p - k invocations before it)
    cmp_pos = np.flatnonzero(is_c)
    nxt_inv = cmp_pos - np.arange(len(cmp_pos))
    flushed = nxt_inv < len(inv_pos)
    srcs.append(with_c[seq[cmp_pos[flushed]] - n])
    dsts.append((n + tp_of_inv[nxt_inv[flushed]]).astype(ids))
    del cmp_pos, nxt_inv, flushed, is_c
    srcs.append(np.arange(n, n + n_tp - 1, dtype=ids))
    dsts.append(np.arange(n + 1, n + n_tp, dtype=ids))
    srcs.append((n + tp_of_inv[has_tp]).astype(ids))
    dsts.append(inv_nodes[has_tp])
    del inv_nodes, has_tp, tp_of_inv
    # ranks: an op at its completion's place in time order (its
    # invocation's when it has none), a time point just before the
    # invocation that made it
    rank = np.zeros(n + n_tp, dtype=np.int64)
    place = np.empty(len(seq), dtype=np.int64)
    place[seq] = np.arange(len(seq), dtype=np.int64)
    del seq
    rank[:n] = place[:n] * _GAP
    rank[with_c] = place[n:] * _GAP
    del place, with_c
    rank[n:] = inv_pos[makes_tp].astype(np.int64) * _GAP - _GAP // 2
    return rank, n_tp


def _relax(rank: np.ndarray, src: np.ndarray, dst: np.ndarray, total: int) -> bool:
    """Raise ranks until every edge goes up (True), or give up (False)."""
    bad = _down_edges(rank, src, dst)
    if not len(bad):
        return True
    # node numbers: a radix sort when they fit 16 bits (a seed's ~46k nodes
    # and time points; the stable order is the one sort's either way)
    by_src = stable_argsort(src, total).astype(src.dtype)
    first = np.concatenate([np.zeros(1, np.int64), np.cumsum(np.bincount(src, minlength=total))])
    work = 0
    for _round in range(_MAX_ROUNDS):
        if not len(bad):
            return True
        s, d = src[bad], dst[bad]
        np.maximum.at(rank, d, rank[s] + 1)
        raised = unique_sorted(d)
        lo, hi = first[raised], first[raised + 1]
        cnt = hi - lo
        m = int(cnt.sum())
        work += m
        if work > _MAX_WORK * max(len(src), 1):
            return False
        if not m:
            return True
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(cnt)[:-1]]), cnt)
        cand = by_src[starts + np.arange(m)]
        bad = cand[rank[src[cand]] >= rank[dst[cand]]]
    return False


#: edges compared a slice at a time (:func:`_down_edges`): the ranks of a
#: whole 1M-op history's sources and targets at once are two int64 arrays
#: of 18 MB each, at the moment the check's memory peaks
_SLICE = 1 << 18


def _down_edges(rank: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The edges that do not go up (their positions), a slice at a time."""
    if len(src) <= _SLICE:
        return np.flatnonzero(rank[src] >= rank[dst])
    return np.concatenate([lo + np.flatnonzero(rank[src[lo:lo + _SLICE]] >= rank[dst[lo:lo + _SLICE]])
                           for lo in range(0, len(src), _SLICE)])
