"""Hostile histories are bad input: `kraftwerk check` answers them with one
line and exit 2 (never 4, an internal error): nesting deeper than Python's
recursion limit, integers past its digit limit, an EDN ratio dividing by
zero. Values that look like Rich markup are printed as text, and a timestamp of
10^16 ns does not make the report's plots take gigabytes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


HEAD = '{"type":"invoke","f":"send","process":0,"time":1,"value":'
HOSTILE = {
    "deep.jsonl": HEAD + "[" * 100_000 + "]" * 100_000 + "}\n",
    "bigint.jsonl": HEAD + '[["send","t-0",' + "9" * 5000 + "]]}\n",
    "ratio.edn": "{:type :invoke, :f :read, :process 0, :time 1, :value 1/0}\n",
    "hugeratio.edn": "{:type :invoke, :f :read, :process 0, :time 1, :value " + "9" * 400 + "/1}\n",
    "bigint.edn": "{:type :invoke, :f :read, :process 0, :time 1, :value " + "9" * 5000 + "}\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_history_exits_2_with_one_line(tmp_path, name):
    f = tmp_path / name
    f.write_text(HOSTILE[name])
    r = kraftwerk("check", str(f))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "bad history" in r.stderr


def test_markup_in_values_is_printed_as_text(tmp_path):
    f = tmp_path / "markup.jsonl"
    f.write_text("\n".join([
        '{"type":"invoke","f":"send","process":0,"time":1,"value":[["send","[/]","[bold]x"]]}',
        '{"type":"ok","f":"send","process":0,"time":2,"value":[["send","[/]",[0,"[bold]x"]]]}',
        '{"type":"invoke","f":"poll","process":1,"time":3,"value":[["poll"]]}',
        '{"type":"ok","f":"poll","process":1,"time":4,"value":[["poll",{"[/]":[[0,"[red]y"]]}]]}',
    ]) + "\n")
    r = kraftwerk("check", str(f))
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert "[red]y" in r.stdout  # the example names the value as it was read


def test_huge_timestamp_plots_in_bounded_memory(tmp_path):
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from pathlib import Path
        from checkers.history.op import Op
        from harness.report.plots import fault_intervals, latency_plot, rate_plot
        ops = [Op("invoke", "send", [["send", "t-0", 1]], 0, 1, 0),
               Op("ok", "send", [["send", "t-0", [0, 1]]], 0, 10**16, 1)]
        out = Path({str(tmp_path)!r})
        rate_plot(ops, fault_intervals(ops), out / "rate.png")
        latency_plot(ops, fault_intervals(ops), out / "latency.png")
        print("done")
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "done" in r.stdout, r.stderr[-1500:]
    assert (tmp_path / "rate.png").stat().st_size > 0
