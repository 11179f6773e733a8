"""index.html puts the verdict and the story of a failure first, one durability row per
acks level (acks=all first: its losses decide the verdict, seed 003's acks
promise), and anomaly examples as readable fields, marked by whether they
fail the run."""

import json
import re
from pathlib import Path

from checkers.history.jsonl import write_jsonl
from checkers.history.op import Op
from harness.report import render_report


def run_dir(d: Path, result: dict) -> Path:
    ops = [Op(type="invoke", f="send", value=[["send", "t-0", 1]], process=0, time=1_000_000, index=0,
              extra={"acks": "1"}),
           Op(type="ok", f="send", value=[["send", "t-0", [0, 1]]], process=0, time=2_000_000, index=1,
              extra={"acks": "1"})]
    d.mkdir(parents=True)
    write_jsonl(d / "history.jsonl", ops)
    (d / "results.json").write_text(json.dumps(result))
    return d


def verdict_box(html: str) -> str:
    return re.search(r'<div id="verdict-box".*?<p class="summary">', html, re.S).group(0)


def test_invalid_verdict_names_the_acks_all_loss_and_failing_types_at_the_top(tmp_path):
    html = render_report(run_dir(tmp_path / "r", {
        "valid": False,
        "anomaly_types": ["int-send-skip", "lost-write"],
        "anomalies": {"lost-write": [{"key": "t-0", "value": 1, "op": 1}], "int-send-skip": [{"key": "t-0", "op": 1}]},
        "durability": {"acks=1": {"sent": 5, "acked": 5, "lost": 0, "lost_rate": 0.0},
                       "acks=all": {"sent": 10, "acked": 8, "lost": 2, "lost_rate": 0.25,
                                    "lost_rate_ci95": [0.07, 0.59]}},
        "checkers": {"queue": {"valid": False, "bad_anomaly_types": ["lost-write"],
                               "allowed_anomaly_types": ["int-send-skip"]}},
    })).read_text()
    box = verdict_box(html)
    assert ">INVALID<" in box
    assert "2 of 8 acknowledged acks=all writes (25.00%)" in box
    assert "failed: queue (lost-write)" in box
    rows = re.findall(r"<tr class=\"[^\"]*\"><td><strong>(acks=[^<]+)</strong>", html)
    assert rows == ["acks=all", "acks=1"]
    assert "7.000% – 59.000%" in html
    # the failing type is listed first and marked; the allowed one says so
    types = re.findall(r"<td><strong>([a-z-]+)</strong><br><small>([^<]+)</small>", html)
    assert types == [("lost-write", "fails the run"), ("int-send-skip", "allowed")]
    assert re.search(r"<b>key</b> t-0</span><span class=\"kv\"><b>value</b> 1</span>", html)


def test_unknown_verdict_names_the_key_no_final_read_covered(tmp_path):
    html = render_report(run_dir(tmp_path / "r", {
        "valid": "unknown", "anomaly_types": [], "anomalies": {},
        "checkers": {"queue": {"valid": True},
                     "final-reads": {"valid": "unknown", "incomplete_keys": ["t-1"],
                                     "unverified_acked_writes": {"t-1": 4}}},
    })).read_text()
    box = verdict_box(html)
    assert ">UNKNOWN<" in box and "the final-reads checker could not decide" in box and "t-1" in box


def test_valid_verdict_says_nothing_acknowledged_was_lost(tmp_path):
    html = render_report(run_dir(tmp_path / "r", {
        "valid": True, "anomaly_types": [], "anomalies": {},
        "durability": {"acks=all": {"sent": 3, "acked": 3, "lost": 0, "lost_rate": 0.0}},
    })).read_text()
    box = verdict_box(html)
    assert ">VALID<" in box and "none of the 3 acknowledged acks=all writes was lost" in box
    assert "send 1→p0@0 a1" in (tmp_path / "r" / "timeline.html").read_text()  # acks=1 sends are tagged


def test_the_verdict_box_names_the_reading_that_judged_the_run(tmp_path):
    """Which anomaly types were allowed depends on the reading (jepsen,
    kraftwerk, kraftwerk-strict-cycles): the page says which one it was."""
    html = render_report(run_dir(tmp_path / "r", {
        "valid": False, "reading": "jepsen", "anomaly_types": ["G1c"], "anomalies": {},
        "checkers": {"queue": {"valid": False, "reading": "jepsen", "bad_anomaly_types": ["G1c"]}},
    })).read_text()
    assert "judged by the jepsen reading" in verdict_box(html)
