"""run_lifecycle: a run that cannot be played leaves error.txt beside what
it recorded, whatever the failure was, and raises it on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.rundir import store
from harness.errors import HarnessError
from harness.lifecycle.runner import run_lifecycle


class Failing:
    """A runtime whose play fails after recording one line."""

    recorded = True

    def __init__(self, run_dir: Path, error: Exception) -> None:
        self.run_dir, self.error = run_dir, error

    def test_json(self) -> dict[str, Any]:
        return {"run_id": "t", "seed": 1}

    def play(self) -> None:
        (self.run_dir / store.HISTORY).write_text('{"type": "invoke"}\n')
        raise self.error

    def schedule(self) -> list[dict[str, Any]]:
        return []

    def results(self, run_dir: Path | None) -> dict[str, Any]:
        raise AssertionError("a failed play is not checked")


@pytest.mark.parametrize("error, line", [
    (HarnessError("cluster did not come up"), "cluster did not come up"),
    (ValueError("bad frame"), "ValueError: bad frame"),
])
def test_a_failed_play_leaves_error_txt_and_the_history(tmp_path: Path, error: Exception, line: str) -> None:
    with pytest.raises(type(error)):
        run_lifecycle(Failing(tmp_path, error), tmp_path, report=False)
    assert (tmp_path / "error.txt").read_text() == line + "\n"
    assert (tmp_path / store.HISTORY).read_text() == '{"type": "invoke"}\n'
    assert (tmp_path / store.TEST).exists()
