"""The HTML report: renders verdict, durability, anomalies and the nemesis
timeline; every value from a history is escaped; headless Chromium renders
the page with its images."""

import json
import re
import subprocess
from pathlib import Path

from tests.needs import need_program

from checkers.history.jsonl import write_jsonl
from tests.report.runs import partitioned_sends
from checkers.glossary import describe
from checkers.history.op import Op
from harness.report import render_report
from harness.report.plots import fault_intervals

PNG = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert('x')</script>"


def make_run(d: Path, valid=False) -> Path:
    ops = partitioned_sends(EVIL)
    d.mkdir(parents=True)
    write_jsonl(d / "history.jsonl", ops)
    (d / "test.json").write_text(json.dumps({"name": "queue", "seed": 7, "evil": EVIL}))
    (d / "results.json").write_text(json.dumps({
        "valid": valid,
        "anomaly_types": ["lost-write"] if not valid else [],
        "anomalies": {"lost-write": [{"key": "t0-0", "value": 3, "note": EVIL}]} if not valid else {},
        "durability": {"acks=all": {"acked": 16, "lost": 1 if not valid else 0, "lost_rate": 1 / 16 if not valid else 0.0},
                       "acks=1": {"acked": 0, "lost": 0, "lost_rate": 0.0}},
        "stats": {"ops": 20},
    }))
    (d / "nodes" / "n1").mkdir(parents=True)
    (d / "nodes" / "n1" / "node.log").write_text("started\n")
    return d


def test_report_shows_verdict_durability_anomalies_and_timeline(tmp_path):
    d = make_run(tmp_path / "run")
    html = render_report(d).read_text()
    assert 'class="verdict invalid">INVALID<' in html
    assert "lost-write" in html and "acks=all" in html and "6.250%" in html
    # each anomaly row says what the name means
    assert 'class="about">' + describe("lost-write") + "<" in html
    assert "halves" in html  # the nemesis timeline
    assert 'href="nodes/n1/node.log"' in html and 'href="history.jsonl"' in html
    for png in ("latency-raw.png", "rate.png"):
        assert (d / png).read_bytes()[:8] == PNG


def test_values_from_histories_and_nodes_are_escaped(tmp_path):
    html = render_report(make_run(tmp_path / "run")).read_text()
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_fault_intervals_pair_start_and_stop_completions(tmp_path):
    d = make_run(tmp_path / "run")
    from checkers.history.jsonl import read_jsonl

    ivs = fault_intervals(read_jsonl(d / "history.jsonl"))
    assert len(ivs) == 1 and ivs[0].fault == "partition"
    assert ivs[0].start < ivs[0].stop
    assert ivs[0].value["shape"] == "halves"


def test_report_renders_in_headless_chromium(tmp_path):
    need_program("chromium")
    d = make_run(tmp_path / "run", valid=True)
    index = render_report(d)
    base = ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(base + ["--dump-dom", index.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    assert 'id="verdict"' in dom.stdout and ">VALID<" in dom.stdout
    srcs = re.findall(r'<img[^>]* src="([^"]+)"', dom.stdout)
    assert {"latency-raw.png", "latency-quantiles.png", "rate.png"} <= set(srcs)
    for s in srcs:
        assert (d / s).read_bytes()[:8] == PNG
    shot = tmp_path / "shot.png"
    r = subprocess.run(base + ["--window-size=1200,1600", f"--screenshot={shot}", index.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.read_bytes()[:8] == PNG


def test_kraftwerk_report_regenerates_a_simulator_run(tmp_path):
    """The simulator writes the same run directory; the report works on it."""
    import os
    import sys

    root = Path(__file__).resolve().parents[2]
    cli = [sys.executable, "-c", "from harness.cli import main; main()"]
    env = {**os.environ, "KRAFTWERK_DEBUG": ""}
    sim = subprocess.run(cli + ["sim", "--seed", "2", "--time-limit", "5", "--nemesis", "partition",
                                "--out", str(tmp_path / "res"), "--json"],
                         capture_output=True, text=True, timeout=300, cwd=root, env=env)
    assert sim.returncode in (0, 1), sim.stderr[-500:]
    run_dir = (tmp_path / "res" / "latest").resolve()
    (run_dir / "index.html").unlink(missing_ok=True)
    r = subprocess.run(cli + ["report", str(run_dir)], capture_output=True, text=True, timeout=120, cwd=root, env=env)
    assert r.returncode == 0, r.stderr
    html = (run_dir / "index.html").read_text()
    verdict = json.loads((run_dir / "results.json").read_text())["valid"]
    assert {True: ">VALID<", False: ">INVALID<"}.get(verdict, ">UNKNOWN<") in html
    assert "partition" in html  # the sim's nemesis ops appear on the timeline
    assert (run_dir / "latency-raw.png").read_bytes()[:8] == PNG


def test_a_restarted_fault_closes_its_previous_interval():
    ops = []
    for i, (f, v) in enumerate([("start-partition", {"cut": 1}), ("start-partition", {"cut": 2}),
                                ("stop-partition", None)]):
        for j in range(2):  # invocation and completion
            ops.append(Op(type="info", f=f, value=v, process="nemesis", time=(2 * i + j) * 10**9, index=2 * i + j))
    ivs = fault_intervals(ops)
    assert [(iv.start, iv.stop, iv.value) for iv in ivs] == [(1.0, 3.0, {"cut": 1}), (3.0, 5.0, {"cut": 2})]


def test_anomaly_row_counts_every_finding_not_just_the_examples_kept(tmp_path):
    """A checker keeps a few examples but counts them all (``counts``): the
    row shows the count, and says how many more there are than shown."""
    d = make_run(tmp_path / "run")
    res = json.loads((d / "results.json").read_text())
    res["anomaly_types"] = ["lost-acks1-write"]
    res["anomalies"] = {"lost-acks1-write": [{"key": "t0-0", "value": i, "op": i} for i in range(32)]}
    res["checkers"] = {"durability": {"valid": True, "anomaly_types": ["lost-acks1-write"],
                                      "bad_anomaly_types": [], "counts": {"lost-acks1-write": 42}}}
    (d / "results.json").write_text(json.dumps(res))
    html = render_report(d).read_text()
    row = html[html.index("<strong>lost-acks1-write</strong>"):]
    row = row[: row.index("</tr>")]
    assert '<td class="num">42</td>' in row
    assert "37 more" in row
