"""Inputs bench/fuzz.py found crashing a parser, each now a clear refusal:
bad input is a one-line error with exit 2 (never an internal error)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.history.jsonl import read_jsonl
from checkers.history.op import HistoryError
from harness.config import load_yaml
from harness.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})


def test_jsonl_type_that_is_a_list_is_bad_input(tmp_path):
    """Found by the jsonl target: `"type": [...]` reached a set lookup (TypeError: unhashable)."""
    f = tmp_path / "h.jsonl"
    f.write_bytes(b'{"index":0,"time":1,"process":0,"type":[["\xf3end","t-0",[0,1]]],"acks":"all"}\n')
    with pytest.raises(HistoryError):
        read_jsonl(f)
    r = kraftwerk("check", str(f))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("data", [b"name: fuzz\xff\n", b"\x80", b"[" * 5000])
def test_yaml_config_that_is_not_text_or_too_deep_is_bad_input(tmp_path, data):
    """Found by the yaml target: bytes that are not UTF-8 escaped load_yaml as UnicodeDecodeError."""
    f = tmp_path / "c.yaml"
    f.write_bytes(data)
    with pytest.raises(UsageError):
        load_yaml(f)
    r = kraftwerk("run", "--config", str(f), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "out").exists()
