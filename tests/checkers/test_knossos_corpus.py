"""The Knossos corpus (``../shared/data/knossos``): every ``good/``
history is linearizable, every ``bad/`` one is not, and none is left
``unknown`` within the 10 s budget. Models and initial states are those
Knossos's own example test uses: ``(cas-register 0)``,
``(multi-register {:x 0 :y 0})``, and ``(mutex)`` for the etcd mutex history.

The whole corpus decides in a few seconds (``bench/wgl_speed.py`` prints the
per-file figures), so every file runs in the default suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers.history.edn import read_edn
from checkers.linearizable import check
from tests.shared_data import KNOSSOS as KNOSSOS_DIR

CORPUS = KNOSSOS_DIR

MODELS = {
    "cas-register": {"model": "cas-register", "initial": 0},
    "multi-register": {"model": "multi-register", "initial": {"x": 0, "y": 0}},
    "mutex": {"model": "mutex"},
}


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*/*/*.edn"))


def _id(p: Path) -> str:
    return "/".join(p.parts[-3:])


def test_corpus_is_present_and_covers_every_model_and_verdict():
    files = corpus_files()
    assert len(files) >= 100
    kinds = {(p.parts[-3], p.parts[-2]) for p in files}
    assert {("cas-register", "good"), ("cas-register", "bad"),
            ("multi-register", "good"), ("mutex", "bad")} <= kinds


@pytest.mark.parametrize("path", corpus_files(), ids=_id)
def test_knossos_corpus_verdict_matches_directory(path: Path):
    model = path.parts[-3]
    expected = path.parts[-2] == "good"
    result = check(read_edn(path), time_budget=10.0, **MODELS[model])
    assert result["valid"] != "unknown", result.get("cause")
    assert result["valid"] is expected
    if not expected:
        # A violation names the op that could not be linearized.
        assert result["unlinearizable"], result
        assert result["op"]["complete_index"] is not None


def test_rethink_minimal_blames_the_impossible_read_not_the_later_op():
    """Knossos's rethink-fail-minimal: value 0, then a concurrent write 4 and
    read 3; the read of 3 is the violation, not the later read of 4."""
    ops = read_edn(CORPUS / "cas-register/bad/rethink-fail-minimal.edn")
    result = check(ops, model="cas-register", initial=0)
    assert result["valid"] is False
    bad = result["op"]
    assert (bad["f"], bad["value"]) == ("read", 3)
    assert result["unlinearizable"] == [bad["invoke_index"], bad["complete_index"]]
    # the longest linearizable prefix: write 0, then (possibly) write 4
    assert ops[result["longest_prefix"][0]].f == "write"
