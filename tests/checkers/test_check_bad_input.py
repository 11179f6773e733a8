"""The bad-input table of ``kraftwerk check``: a history that is not a
regular file (a FIFO, a device, a symlink to /dev/zero), larger than the
size bound, with a line past the line bound, binary or garbage (with or
without a final newline), numbers that are not numbers (NaN, Infinity,
1e999 in JSONL; ##NaN, ##Inf, 1e999 in EDN), nesting past the recursion
limit, fields and values of the wrong type (a float time, a float offset,
a poll that returns no map): each is one line and exit 2, never a hang, a
traceback or "unknown". A history cut short by a crash is still read as far
as it is whole (checkers/history/source.py, jsonl.py, edn.py,
checkers/queue/project.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEND = '{"type":"invoke","f":"send","process":0,"time":1,"index":0,"value":[["send","t-0",1]]}\n'
SENT = '{"type":"ok","f":"send","process":0,"time":2,"index":1,"value":[["send","t-0",[0,1]]]}\n'


def check(path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "check", str(path), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


def poll(value: str) -> str:
    return SEND + SENT + ('{"type":"invoke","f":"poll","process":1,"time":3,"index":2,"value":[["poll"]]}\n'
                          '{"type":"ok","f":"poll","process":1,"time":4,"index":3,"value":%s}\n' % value)


#: name -> (file name, bytes, words the one line says)
TABLE = {
    "garbage, no final newline": ("g.jsonl", SEND + "garbage", "not valid JSON"),
    "garbage alone": ("g1.jsonl", "xyz", "not valid JSON"),
    "binary": ("b.jsonl", bytes(range(256)) * 8, "not valid JSON"),
    "huge line": ("h.jsonl", '{"type":"invoke","f":"poll","value":"' + "a" * (17 << 20) + '"}\n', "more than"),
    "NaN": ("n.jsonl", SEND.replace('"time":1', '"time":NaN'), "NaN is not a number"),
    "NaN in a value": ("nv.jsonl", SEND.replace('"t-0",1', '"t-0",NaN'), "NaN is not a number"),
    "Infinity": ("i.jsonl", SEND.replace('"time":1', '"time":-Infinity'), "-Infinity is not a number"),
    "1e999": ("e.jsonl", SEND.replace('"t-0",1', '"t-0",1e999'), "1e999 overflows a double"),
    "##NaN in EDN": ("n.edn", "[{:type :invoke, :f :send, :process 0, :time ##NaN, :index 0}]\n", "##NaN"),
    "##Inf in EDN": ("i.edn", "[{:type :invoke, :f :send, :process 0, :time 1, :value ##Inf}]\n", "##Inf"),
    "1e999 in EDN": ("e.edn", "[{:type :invoke, :f :send, :process 0, :time 1e999, :index 0}]\n", "1e999 overflows"),
    "deep nesting": ("d.jsonl", '{"type":"ok","f":"send","value":' + "[" * 100_000 + "]" * 100_000 + "}\n",
                     "nested too deeply"),
    "float time": ("t.jsonl", SEND.replace('"time":1', '"time":1.5'), "time 1.5 is not an integer"),
    "string time": ("ts.jsonl", SEND.replace('"time":1', '"time":"1"'), "is not an integer"),
    "float process": ("p.jsonl", SEND.replace('"process":0', '"process":0.5'), "process 0.5 is not a number"),
    "float offset in a poll": ("fo.jsonl", poll('[["poll",{"t-0":[[1.5,2]]}]]'), "integer offsets"),
    "float offset in a send": ("fs.jsonl", SEND + SENT.replace("[0,1]", "[0.5,1]"), "send offset 0.5"),
    "poll value not a list": ("pv.jsonl", poll('"x"'), "not a list of micro-ops"),
    "poll result not a map": ("pm.jsonl", poll('[["poll",[1,2]]]'), "not a map of keys to records"),
    "poll records not pairs": ("pp.jsonl", poll('[["poll",{"t-0":[5]}]]'), "[offset, value]"),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_bad_input_is_one_line_exit_2(tmp_path, name):
    fname, data, words = TABLE[name]
    f = tmp_path / fname
    f.write_bytes(data.encode() if isinstance(data, str) else data)
    r = check(f)
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.stderr, r.stderr[-500:]


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "h.jsonl")
    r = check(tmp_path / "h.jsonl", timeout=20)
    assert r.returncode == 2 and "a FIFO, not a history file" in r.stderr, r.stderr


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_a_symlink_to_a_device_is_refused_at_once(tmp_path, target):
    (tmp_path / "h.jsonl").symlink_to(target)
    r = check(tmp_path / "h.jsonl", timeout=20)
    assert r.returncode == 2 and "a device, not a history file" in r.stderr, r.stderr


def test_a_history_past_the_size_bound_is_refused_unless_the_bound_is_raised(tmp_path):
    f = tmp_path / "h.jsonl"
    f.write_text(SEND + SENT)
    r = check(f, "--max-history-bytes", "100")
    assert r.returncode == 2 and "--max-history-bytes raises the bound" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert check(f, "--max-history-bytes", "1000").returncode in (0, 1, 3)  # checked, whatever its verdict


def test_a_run_directory_cut_short_by_a_crash_is_read_as_far_as_it_is_whole(tmp_path):
    """The documented partial-run case: the recorder's marker is still
    there and the last line is torn mid-operation."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text(SEND + SENT + '{"type":"invoke","f":"se')
    (run / "history.jsonl.recording").write_text("")
    r = check(run, "--json")
    assert r.returncode in (0, 1, 3), r.stderr
    assert "truncated last line ignored" in r.stderr and "partial run" in r.stderr
    assert '"partial": true' in r.stdout


def test_a_torn_last_line_that_is_an_operation_cut_short_is_still_skipped(tmp_path):
    for torn in ('{"type":"ok","f":"se', '{"type":"ok","time":12', '{"type":"ok","final":tr', '{"type":"ok",'):
        f = tmp_path / "h.jsonl"
        f.write_text(SEND + SENT + torn)
        r = check(f)
        assert r.returncode in (0, 1, 3) and "truncated last line ignored" in r.stderr, (torn, r.stderr)
