"""A clean key checked from its columns (:mod:`checkers.queue.keyfast`)
gives :func:`checkers.queue.keycheck.check_key`'s result, and any key that
is not clean is left to it.

Every key of many histories — generated valid ones (acks all or unknown,
with and without final reads, polls of several records), every anomaly
builder's clean and bad twins, messy histories with indefinite and
unfinished operations — is checked both ways; where the columnar check
answers, the answers are equal, and on each anomaly builder's bad twin it
stands aside for the key the anomaly is in.
"""

from __future__ import annotations

import pytest

from checkers.history.op import Op
from checkers.pipeline import _compact
from checkers.queue.keycheck import check_key
from checkers.queue.keyfast import check_clean_key
from checkers.queue.project import project
from checkers.queue.synth import valid_history
from tests.checkers.test_acyclic_proof import _messy
from tests.checkers.test_queue_anomalies import CASES


def _compare(ops: list[Op]) -> tuple[int, int]:
    """(keys the columnar check answered, keys in all)."""
    proj = project(ops)
    answered = 0
    for k in proj.keys:
        for rw in (True, False):
            quick = check_clean_key(k, proj.keys.columns[k], rw) if not proj.keys.assigns else None
            if quick is None:
                continue
            full = _compact(check_key(k, proj.keys[k], rw))
            assert quick == full, (k, rw)
            answered += rw
    return answered, len(proj.keys)


@pytest.mark.parametrize("acks,final,seed", [("all", True, 1), ("all", False, 2), (None, True, 3),
                                             ("all", True, 4)])
def test_clean_keys_of_valid_histories_get_check_keys_result(acks, final, seed):
    ops = valid_history(3000, 5, 6, seed=seed, acks=acks, final_reads=final, max_poll=1 + seed)
    if acks is None:
        for op in ops:
            op.extra.pop("acks", None)
    answered, keys = _compare(ops)
    # without final reads the last records of a key may be unseen: not clean
    assert answered == keys if final else answered >= 1


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_anomaly_builders_keys_get_check_keys_result_or_are_left_to_it(name, build, expected):
    _compare(build(False).ops)
    bad = build(True).ops
    _compare(bad)
    proj = project(bad)
    per_key = {k: check_key(k, proj.keys[k]) for k in proj.keys}
    for k, r in per_key.items():
        if r["counts"]:
            assert check_clean_key(k, proj.keys.columns[k]) is None, k


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_messy_histories_keys_get_check_keys_result_or_are_left_to_it(seed):
    _compare(_messy(seed))
