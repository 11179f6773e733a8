"""The quick acyclicity proof (:mod:`checkers.queue.acyclic`) gives the full
cycle search's answer whenever it answers, and stands aside on a cycle.

``find_cycles(..., quick=False)`` always builds and prunes the graph node by
node; with ``quick`` (the default) a graph shown acyclic in numpy returns
at once. Both are run on every anomaly builder (clean and bad twins, rw
edges searched or not) and on generated histories with indefinite and
unfinished operations: the same answer, timings aside.
"""

from __future__ import annotations

import random

import pytest

from checkers.history.op import Op
from checkers.pipeline import run_keys
from checkers.queue.acyclic import prove_acyclic
from checkers.queue.checker import merge_key_results
from checkers.queue.graph import find_cycles
from checkers.queue.project import project
from checkers.queue.synth import valid_history
from tests.checkers.test_queue_anomalies import CASES


def _both(ops: list[Op], rw: bool, ww: bool = True) -> tuple[dict, dict, bool]:
    proj = project(ops)
    merged = merge_key_results(run_keys(proj.keys, engine="inline", want_rw=rw))
    args = (proj.ops, merged["edges"], merged["committed_info"])
    shown = prove_acyclic(*args, rw=rw, ww=ww) is not None
    quick = find_cycles(*args, rw=rw, ww=ww)
    full = find_cycles(*args, rw=rw, ww=ww, quick=False)
    quick["stats"].pop("seconds", None)
    full["stats"].pop("seconds", None)
    return quick, full, shown


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_quick_proof_gives_the_full_searchs_answer_on_every_anomaly_builder(name, build, expected):
    for bad in (False, True):
        for rw in (False, True):
            quick, full, shown = _both(build(bad).ops, rw)
            assert quick == full, (bad, rw)
            if full["stats"]["cyclic_nodes"]:
                assert not shown


def _messy(seed: int) -> list[Op]:
    """A valid history whose completions are sometimes indefinite (info,
    some read afterwards, some not) or missing (unfinished invocations)."""
    rng = random.Random(seed)
    ops = valid_history(1500, 5, 6, seed=seed, final_reads=True)
    out: list[Op] = []
    for op in ops:
        if op.type == "ok" and op.f == "send" and rng.random() < 0.05:
            op = Op("info", op.f, op.value, op.process, op.time, op.index, "timeout", dict(op.extra))
        if op.type != "invoke" and rng.random() < 0.01 and not op.extra.get("final"):
            continue  # the invocation stays open
        out.append(op)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_quick_proof_gives_the_full_searchs_answer_on_messy_valid_histories(seed):
    for rw in (False, True):
        for ww in (True, False):
            quick, full, shown = _both(_messy(seed), rw, ww)
            assert quick == full
            if not rw:
                assert shown and full["stats"]["cyclic_nodes"] == 0


def _read_before_acknowledged(n: int, seed: int) -> list[Op]:
    """Sends whose records are polled before the send's own completion
    arrives (a wr edge against real time's ranking): valid, and the
    proof must repair those edges' ranks to show it."""
    from checkers.queue.synth import HistoryBuilder

    rng = random.Random(seed)
    b = HistoryBuilder()
    offs = {"t-0": 0, "t-1": 0}
    for v in range(n):
        k = rng.choice(sorted(offs))
        b.invoke(0, "send", [["send", k, v]], acks="all")
        b.poll(1 + v % 3, {k: [[offs[k], v]]}) if rng.random() < 0.5 else None
        b.complete(0, "ok", [["send", k, [offs[k], v]]])
        offs[k] += 1
    return b.ops


def test_quick_proof_repairs_edges_that_go_against_real_time():
    from checkers.queue.acyclic import _relax
    import numpy as np

    for seed in (1, 2):
        quick, full, shown = _both(_read_before_acknowledged(60, seed), rw=False)
        assert quick == full and shown
    # the relaxation itself: a chain against its ranks is repaired, a cycle is not
    src, dst = np.array([2, 1, 0], np.int32), np.array([1, 0, 3], np.int32)
    rank = np.array([3, 2, 1, 0], np.int64)
    assert _relax(rank, src, dst, 4) and bool((rank[src] < rank[dst]).all())
    cyc = np.array([0, 1, 2], np.int32), np.array([1, 2, 0], np.int32)
    assert not _relax(np.array([0, 1, 2], np.int64), *cyc, 3)


def test_edges_against_the_ranks_found_a_slice_at_a_time_are_those_found_at_once():
    import numpy as np

    from checkers.queue.acyclic import _SLICE, _down_edges

    rng = np.random.default_rng(7)
    n_nodes, n_edges = 5_000, 3 * _SLICE + 12_345  # several slices and a short last one
    rank = rng.integers(0, 1_000, n_nodes)
    src = rng.integers(0, n_nodes, n_edges).astype(np.int32)
    dst = rng.integers(0, n_nodes, n_edges).astype(np.int32)
    got = _down_edges(rank, src, dst)
    assert np.array_equal(got, np.flatnonzero(rank[src] >= rank[dst]))
    assert 0 < len(got) < n_edges
