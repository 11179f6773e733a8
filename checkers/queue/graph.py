"""Cross-key dependency cycles: G0, G1c and their -process / -realtime forms.

Nodes are the queue operations that took effect (``ok``, and ``info`` ones
whose sends were read). Edges, as in Elle / Jepsen's Kafka checker:

``ww``       T1 sent the value just before T2's in some key's version order
``wr``       T2's highest read of a key was a value T1 sent
``rw``       T1's highest read of a key was just before a value T2 sent
             (built, but not searched by default: a Kafka poll returns a
             batch, not "everything so far", so it proves no anti-dependency;
             Jepsen leaves it out of its graph for the same reason)
``process``  T1 then T2 on the same process
``realtime`` T1 completed before T2 was invoked

Classification (Adya / Elle): a cycle of ``ww`` only is **G0**; with at least
one ``wr`` it is **G1c**; a cycle that needs a ``process`` edge gets the
``-process`` suffix, one that needs a ``realtime`` edge ``-realtime``
(with ``rw``: one is G-single, more G2-item).

Why not one networkx graph of the whole history: at 1M operations building
it alone takes minutes. Real-time order is encoded with O(n) "time point"
nodes instead of O(n * concurrency) edges (a completion links to the next
time point, time points chain forward, a time point links to the ops invoked
after it), every acyclic part is pruned with Kahn's algorithm on flat lists,
and networkx only sees what is left — empty for a valid history — to find
strongly connected components and the shortest cycle explaining each.
"""

from __future__ import annotations

import time as _time
from array import array
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .acyclic import prove_acyclic
from .columns import Col
from .project import OpTable

if TYPE_CHECKING:
    import networkx as nx  # late: networkx (0.3 s), only once a cycle search runs

WW, WR, RW, PROC, RT = 0, 1, 2, 3, 4
TYPE_NAMES = {WW: "ww", WR: "wr", RW: "rw", PROC: "process", RT: "realtime"}

#: class name -> (allowed edge types, required edge types)
CLASSES: list[tuple[str, frozenset[int], frozenset[int]]] = [
    ("G0", frozenset({WW}), frozenset()),
    ("G1c", frozenset({WW, WR}), frozenset({WR})),
    ("G0-process", frozenset({WW, PROC}), frozenset({PROC})),
    ("G1c-process", frozenset({WW, WR, PROC}), frozenset({PROC, WR})),
    ("G0-realtime", frozenset({WW, PROC, RT}), frozenset({RT})),
    ("G1c-realtime", frozenset({WW, WR, PROC, RT}), frozenset({RT, WR})),
]
RW_CLASSES: list[tuple[str, frozenset[int], frozenset[int]]] = [
    ("G-single", frozenset({WW, WR, RW}), frozenset({RW})),
    ("G-single-process", frozenset({WW, WR, RW, PROC}), frozenset({RW, PROC})),
    ("G-single-realtime", frozenset({WW, WR, RW, PROC, RT}), frozenset({RW, RT})),
]
#: Elle's cycle-exists fallbacks, weakest first: (anomaly type, the
#: isolation level it rules out, the edge types of the subgraph that must be
#: acyclic for it). Reported when the search for explained cycles is cut
#: short: an SCC proves a cycle exists without naming it.
EXISTS_SPECS: list[tuple[str, str, frozenset[int]]] = [
    ("PL-1-cycle-exists", "read-uncommitted", frozenset({WW})),
    ("PL-2-cycle-exists", "read-committed", frozenset({WW, WR})),
    ("strong-PL-1-cycle-exists", "strong-read-uncommitted", frozenset({WW, PROC, RT})),
    ("strong-PL-2-cycle-exists", "strong-read-committed", frozenset({WW, WR, PROC, RT})),
]
CYCLE_EXAMPLES = 8
_TRIES = 64


class BudgetExceeded(Exception):
    pass


def classify(types: list[int]) -> str:
    n_rw = sum(1 for t in types if t == RW)
    if n_rw == 1:
        base = "G-single"
    elif n_rw > 1:
        base = "G2-item"
    elif WR in types:
        base = "G1c"
    else:
        base = "G0"
    if RT in types:
        return base + "-realtime"
    if PROC in types:
        return base + "-process"
    return base


def find_cycles(
    table: OpTable,
    key_edges: list[tuple[str, dict[str, list[int]]]],
    committed_info: set[int],
    *,
    rw: bool = False,
    ww: bool = True,
    deadline: float | None = None,
    max_cyclic_nodes: int = 1_000_000,
    explain: bool = True,
    quick: bool = True,
) -> dict[str, Any]:
    """Search the dependency graph. ``key_edges`` is ``[(key, {"ww": [a, b, a,
    b, ...], "wr": [...], "rw": [...]})]`` with op indices; ``ww=False``
    leaves the ww edges out (Jepsen's ``--no-ww-deps``); ``explain=False``
    only proves cycles exist (the fallbacks below), naming none. Returns
    ``{"anomalies": {class: [cycle examples]}, "counts": {class: n},
    "stats": {...}}`` plus ``"cut_short"`` (the reason) when the budget ran
    out while explaining cycles: the counts then hold Elle's cycle-exists
    fallbacks (:func:`cycle_exists_cases`) for what was not explained.
    Raises :class:`BudgetExceeded` when the budget runs out before the
    cyclic part of the graph is known. ``quick`` first tries to show the
    graph acyclic in numpy (:mod:`.acyclic`), the same answer when it can;
    off, the graph is always built and pruned here."""
    t0 = _time.monotonic()

    def check_time() -> None:
        if deadline is not None and _time.monotonic() > deadline:
            raise BudgetExceeded()

    # the common answer first: no cycle, shown in numpy (checkers.queue.acyclic)
    shown = prove_acyclic(table, key_edges, committed_info, rw=rw, ww=ww) if quick else None
    check_time()
    if shown is not None:
        return {"anomalies": {}, "counts": {}, "stats": {**shown, "cyclic_nodes": 0,
                                                         "seconds": round(_time.monotonic() - t0, 3)}}

    kinds = ([("ww", WW)] if ww else []) + [("wr", WR)] + ([("rw", RW)] if rw else [])
    node_of, ops_of, procs, inv, cmp, has_cmp = _graph_nodes(table, committed_info)
    n_ops = len(ops_of)
    src = array("q")
    dst = array("q")
    typ_ = array("b")
    _dependency_edges(key_edges, kinds, node_of, src, dst, typ_)
    check_time()
    _process_edges(procs, src, dst, typ_)
    del procs
    n_nodes = _realtime_edges(inv, cmp, has_cmp, src, dst, typ_, check_time)
    del inv, cmp
    check_time()

    # --- prune everything acyclic (Kahn, both directions) -----------------
    remaining = _prune(n_nodes, src, dst, check_time)
    stats = {"nodes": n_ops, "time_points": n_nodes - n_ops, "edges": len(src),
             "cyclic_nodes": len(remaining)}
    out: dict[str, Any] = {"anomalies": {}, "counts": {}, "stats": stats}
    if not remaining:
        stats["seconds"] = round(_time.monotonic() - t0, 3)
        return out
    if len(remaining) > max_cyclic_nodes:
        # networkx needs ~1 KB per node and edge: past this, answer unknown
        # rather than exhaust the machine's memory
        raise BudgetExceeded(f"{len(remaining)} nodes on cycles (limit {max_cyclic_nodes})")
    g = _cyclic_graph(src, dst, typ_, remaining)
    check_time()
    edge_keys = _edge_keys(key_edges, kinds, node_of, remaining)
    try:
        if not explain:
            raise BudgetExceeded("not explained")
        _explain_cycles(g, out, rw, n_ops, ops_of, edge_keys, check_time)
    except BudgetExceeded as e:
        out["cut_short"] = str(e) or "budget-exceeded"
        for name, ex in cycle_exists_cases(g, n_ops, ops_of):
            if name not in out["counts"]:
                out["counts"][name] = 1
                out["anomalies"][name] = [ex]
    stats["seconds"] = round(_time.monotonic() - t0, 3)
    return out


def _graph_nodes(table: OpTable, committed_info: set[int]) -> tuple[Any, array, list[Any], Col, Col, bytearray]:
    """The graph's ops (ok ones, and info ones that must have committed):
    op index -> node, node -> op index, process, invocation time,
    completion time and whether it has one. Flat arrays, not lists of
    ints: at 1M operations these hold millions of entries, and an int
    object per entry was most of the check's memory."""
    node_of = _NodeIndex(table.index)
    ops_of = array("q")
    procs: list[Any] = []
    inv = Col()
    cmp = Col()
    has_cmp = bytearray()
    for idx, p, typ, it, ct in zip(table.index, table.process, table.type,
                                   table.invoke_time, table.complete_time):
        if typ == "ok" or (typ == "info" and idx in committed_info):
            node_of[idx] = len(ops_of)
            ops_of.append(idx)
            procs.append(p)
            inv.append(it)
            ok = typ == "ok" and ct is not None
            cmp.append(ct if ok else 0)
            has_cmp.append(ok)
    return node_of, ops_of, procs, inv, cmp, has_cmp


def _dependency_edges(key_edges: list[tuple[str, dict[str, list[int]]]], kinds: list[tuple[str, int]],
                      node_of: Any, src: array, dst: array, typ_: array) -> None:
    """Each key's edges of ``kinds`` between graph nodes."""
    for _key, edges in key_edges:
        for name, t in kinds:
            e = edges.get(name) or ()
            for j in range(0, len(e), 2):
                a = node_of.get(e[j])
                b = node_of.get(e[j + 1])
                if a is not None and b is not None and a != b:
                    src.append(a)
                    dst.append(b)
                    typ_.append(t)


def _process_edges(procs: list[Any], src: array, dst: array, typ_: array) -> None:
    """Process order: consecutive ops of each process (the table is in
    completion order)."""
    last: dict[Any, int] = {}
    for i, p in enumerate(procs):
        j = last.get(p)
        if j is not None:
            src.append(j)
            dst.append(i)
            typ_.append(PROC)
        last[p] = i


def _realtime_edges(inv: Col, cmp: Col, has_cmp: bytearray, src: array, dst: array, typ_: array,
                    check_time: Callable[[], None]) -> int:
    """Real-time order through time-point nodes: every invocation and
    completion time, sorted (stable: ties keep invocations in op order,
    then completions), each packed with its position as one integer; the
    completions since the last invocation lead to a new time point, which
    leads to the next and to every invocation until then. Returns the
    number of nodes, time points included."""
    n_ops = len(has_cmp)
    cidx = array("q", (i for i in range(n_ops) if has_cmp[i]))
    n_inv = n_ops
    order = _time_order(inv, cmp, cidx)
    check_time()
    n_nodes = n_ops
    cur_tp = -1
    buffered: list[int] = []
    for e in order:
        if e < n_inv:
            if buffered:
                tp = n_nodes
                n_nodes += 1
                for a in buffered:
                    src.append(a)
                    dst.append(tp)
                    typ_.append(RT)
                if cur_tp >= 0:
                    src.append(cur_tp)
                    dst.append(tp)
                    typ_.append(RT)
                cur_tp = tp
                buffered = []
            if cur_tp >= 0:
                src.append(cur_tp)
                dst.append(e)
                typ_.append(RT)
        else:
            buffered.append(cidx[e - n_inv])
    return n_nodes


def _cyclic_graph(src: array, dst: array, typ_: array, remaining: Any) -> nx.DiGraph:
    """The edges among the nodes left on cycles, as a networkx graph whose
    edges carry their types."""
    # networkx imported here, not at the top: only a graph with a cycle
    # needs it, and its import is a good part of a valid history's check
    import networkx as nx  # late: networkx (0.3 s), only once a cycle search runs

    g = nx.DiGraph()
    for a, b, t in zip(src, dst, typ_):
        if a in remaining and b in remaining:
            if g.has_edge(a, b):
                g[a][b]["types"].add(t)
            else:
                g.add_edge(a, b, types={t})
    return g


def _edge_keys(key_edges: list[tuple[str, dict[str, list[int]]]], kinds: list[tuple[str, int]],
               node_of: Any, remaining: Any) -> dict[tuple[int, int], str]:
    """The first key of each dependency edge among the nodes on cycles."""
    edge_keys: dict[tuple[int, int], str] = {}
    for key, edges in key_edges:
        for name, _t in kinds:
            e = edges.get(name) or ()
            for j in range(0, len(e), 2):
                a = node_of.get(e[j])
                b = node_of.get(e[j + 1])
                if a in remaining and b in remaining:
                    edge_keys.setdefault((a, b), key)
    return edge_keys


def _explain_cycles(g: nx.DiGraph, out: dict[str, Any], rw: bool, n_ops: int, ops_of: list[int],
                    edge_keys: dict[tuple[int, int], str], check_time: Callable[[], None]) -> None:
    """For each class, the shortest cycle of each SCC that the class
    explains, into ``out``'s counts and examples."""
    import networkx as nx  # late: networkx (0.3 s), only once a cycle search runs

    classes = CLASSES + (RW_CLASSES if rw else [])
    seen_cycles: set[tuple[int, ...]] = set()
    for name, allowed, required in classes:
        check_time()
        h = nx.DiGraph()
        h.add_edges_from((a, b) for a, b, d in g.edges(data=True) if d["types"] & allowed)
        for scc in nx.strongly_connected_components(h):
            if len(scc) < 2:
                continue
            check_time()
            sub = h if len(scc) == h.number_of_nodes() else h.subgraph(scc)
            cyc = _shortest_cycle(sub, g, name, allowed, required, check_time)
            if cyc is None:
                continue
            types = [_step_type(g[a][b]["types"] & allowed) for a, b in zip(cyc, cyc[1:])]
            if classify(types) != name:
                continue
            ex = _explain(cyc, types, n_ops, ops_of, edge_keys)
            sig = tuple(sorted(ex["cycle"]))
            if sig in seen_cycles:
                continue
            seen_cycles.add(sig)
            out["counts"][name] = out["counts"].get(name, 0) + 1
            if len(out["anomalies"].setdefault(name, [])) < CYCLE_EXAMPLES:
                out["anomalies"][name].append(ex)


def cycle_exists_cases(g: nx.DiGraph, n_ops: int, ops_of: list[int]) -> list[tuple[str, dict[str, Any]]]:
    """Elle's fallback when cycles cannot all be named in time: for each
    :data:`EXISTS_SPECS` subgraph, weakest first, a nontrivial SCC proves a
    cycle of that kind exists. A stronger level is not reported once a
    weaker one (whose subgraph it contains) already is."""
    import networkx as nx  # late: networkx (0.3 s), only once a cycle search runs

    out: list[tuple[str, dict[str, Any]]] = []
    for name, level, types in EXISTS_SPECS:
        if any(types >= EXISTS_SPECS_BY_NAME[n] for n, _ex in out):
            continue  # redundant: a cycle in a smaller subgraph already rules this out
        h = nx.DiGraph()
        h.add_edges_from((a, b) for a, b, d in g.edges(data=True) if d["types"] & types)
        sccs = [c for c in nx.strongly_connected_components(h) if len(c) > 1]
        ops = [sorted(ops_of[x] for x in c if x < n_ops) for c in sccs]
        ops = [o for o in ops if len(o) > 1]
        if ops:
            smallest = min(ops, key=len)
            out.append((name, {"not": level, "subgraph": sorted(TYPE_NAMES[t] for t in types),
                               "scc-size": len(smallest), "scc": smallest[:64], "sccs": len(ops)}))
    return out


EXISTS_SPECS_BY_NAME = {name: types for name, _level, types in EXISTS_SPECS}


def _time_order(inv: Col, cmp: Col, cidx: array) -> Iterator[int]:
    """Positions of the invocation times ``inv`` (0..n-1) and the completion
    times ``cmp[cidx[j]]`` (n + j) in time order; at equal times an
    invocation sorts first (times doubled, completions + 1), then by
    position (a stable sort).

    With integer times, invocations are sorted as one packed integer each
    (time and position), and completions, which a history lists in time
    order, are only checked to be in order (else sorted the same way); the
    two runs are then merged. Their keys never tie (even against odd), so
    this is the stable sort of both, in a third of its memory."""
    n_inv = len(inv)
    if type(inv.data) is not array or type(cmp.data) is not array:
        ev = [it * 2 for it in inv] + [cmp[c] * 2 + 1 for c in cidx]
        return iter(sorted(range(len(ev)), key=ev.__getitem__))
    m = max(n_inv, len(cidx), 1)
    invs = sorted([(it * 2) * m + i for i, it in enumerate(inv.data)])
    c = cmp.data
    in_order = all(c[a] <= c[b] for a, b in zip(cidx, cidx[1:]))
    comps: Any = (None if in_order else
                  sorted([(c[x] * 2 + 1) * m + j for j, x in enumerate(cidx)]))
    return _merge_times(invs, comps, c, cidx, m, n_inv)


def _merge_times(invs: list[int], comps: list[int] | None, c: Any, cidx: array, m: int,
                 n_inv: int) -> Iterator[int]:
    if comps is None:
        ckeys: Iterator[tuple[int, int]] = ((c[x] * 2 + 1, j) for j, x in enumerate(cidx))
    else:
        ckeys = (divmod(x, m) for x in comps)
    nxt = next(ckeys, None)
    for x in invs:
        k, i = divmod(x, m)
        while nxt is not None and nxt[0] < k:
            yield n_inv + nxt[1]
            nxt = next(ckeys, None)
        yield i
    while nxt is not None:
        yield n_inv + nxt[1]
        nxt = next(ckeys, None)


class _NodeIndex:
    """Op index -> node: a flat array when op indices are dense (a history
    read from a file, numbered 0..n), a dict otherwise."""

    def __init__(self, indices: Any) -> None:
        top = max(indices, default=-1)
        lo = min(indices, default=0)
        self.dense = lo >= 0 and top < 4 * len(indices) + 1024
        self.arr = array("q", [-1]) * (top + 1) if self.dense else None
        self.map: dict[int, int] = {}

    def __setitem__(self, idx: int, node: int) -> None:
        if self.arr is not None:
            self.arr[idx] = node
        else:
            self.map[idx] = node

    def get(self, idx: Any) -> int | None:
        if self.arr is not None:
            if type(idx) is int and 0 <= idx < len(self.arr):
                n = self.arr[idx]
                return n if n >= 0 else None
            return None
        return self.map.get(idx)


def _prune(n: int, src: Any, dst: Any, check_time: Callable[[], None]) -> set[int]:
    """Nodes on a cycle or between cycles: drop sources repeatedly, then
    sinks repeatedly among what is left. Successors in one flat array
    (``succ[first[u]:first[u + 1]]``), not a list per node."""
    indeg = array("q", [0]) * n
    first = array("q", [0]) * (n + 1)
    for a in src:
        first[a + 1] += 1
    for b in dst:
        indeg[b] += 1
    for i in range(n):
        first[i + 1] += first[i]
    fill = array("q", first)
    succ = array("q", [0]) * len(src)
    for a, b in zip(src, dst):
        succ[fill[a]] = b
        fill[a] += 1
    del fill
    check_time()
    stack = [i for i in range(n) if indeg[i] == 0]
    pop, push = stack.pop, stack.append
    while stack:
        u = pop()
        for k in range(first[u], first[u + 1]):
            v = succ[k]
            d = indeg[v] - 1
            indeg[v] = d
            if d == 0:
                push(v)
    del succ, first
    left = {i for i in range(n) if indeg[i] > 0}
    if not left:
        return left
    check_time()
    pred: dict[int, list[int]] = {i: [] for i in left}
    outdeg = dict.fromkeys(left, 0)
    for a, b in zip(src, dst):
        if a in left and b in left:
            pred[b].append(a)
            outdeg[a] += 1
    stack = [i for i in left if outdeg[i] == 0]
    while stack:
        u = stack.pop()
        left.discard(u)
        for v in pred[u]:
            if v in left:
                outdeg[v] -= 1
                if outdeg[v] == 0:
                    stack.append(v)
    return left


def _step_type(types: set[int]) -> int:
    for t in (WW, WR, RW, PROC, RT):
        if t in types:
            return t
    raise AssertionError("edge without a type")


def _shortest_cycle(sub: nx.DiGraph, g: nx.DiGraph, name: str, allowed: frozenset[int],
                    required: frozenset[int], check_time: Callable[[], None]) -> list[int] | None:
    """Shortest cycle in one SCC whose weakest explanation is class ``name``,
    tried through a few edges of the most specific required type (up to
    ``_TRIES``; fewer in a giant component, where each try is a BFS over it)."""
    import networkx as nx  # late: networkx (0.3 s), only once a cycle search runs

    tries = _TRIES if sub.number_of_nodes() <= 2000 else 8
    lead = (None if not required else
            RT if RT in required else PROC if PROC in required else RW if RW in required else WR)
    cands: list[tuple[int, int]] = []
    for a, b in sub.edges():
        if lead is None or lead in g[a][b]["types"]:
            cands.append((a, b))
            if len(cands) >= tries:
                break
    best: list[int] | None = None
    for a, b in cands:
        check_time()
        try:
            path = nx.shortest_path(sub, b, a)
        except nx.NetworkXNoPath:
            continue
        cyc = [a] + path
        types = [_step_type(g[x][y]["types"] & allowed) for x, y in zip(cyc, cyc[1:])]
        if classify(types) == name and (best is None or len(cyc) < len(best)):
            best = cyc
    return best


def _explain(cyc: list[int], types: list[int], n_ops: int, ops_of: list[int],
             edge_keys: dict[tuple[int, int], str]) -> dict[str, Any]:
    """Turn a node cycle into op-index steps, folding time points into one
    ``realtime`` step."""
    i0 = next(i for i, x in enumerate(cyc) if x < n_ops)  # time points alone never cycle
    cyc = cyc[i0:-1] + cyc[:i0] + [cyc[i0]]
    types = types[i0:] + types[:i0]
    steps: list[dict[str, Any]] = []
    start = None
    for (a, b), t in zip(zip(cyc, cyc[1:]), types):
        if a < n_ops and start is None:
            start = a
        if b < n_ops:
            step: dict[str, Any] = {"from": ops_of[start if start is not None else a], "to": ops_of[b],
                                    "type": TYPE_NAMES[t]}
            k = edge_keys.get((a, b))
            if k is not None and t in (WW, WR, RW):
                step["key"] = k
            steps.append(step)
            start = None
        elif start is None:
            start = a
    # rotate so the cycle starts at its smallest op index
    if steps:
        i = min(range(len(steps)), key=lambda j: steps[j]["from"])
        steps = steps[i:] + steps[:i]
    return {"cycle": [s["from"] for s in steps] + ([steps[0]["from"]] if steps else []),
            "steps": steps, "length": len(steps)}
