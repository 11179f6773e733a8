"""timeline.html: one column per process, one box per operation from
invocation to completion coloured by outcome, fault intervals shaded across
the columns, anomaly example ops anchored and linked from index.html, long
histories cut to the head plus windows around anomalies, history values
escaped (they are text, never markup)."""

import json
import re
import subprocess
from pathlib import Path

from tests.needs import need_program

from checkers.history.jsonl import write_jsonl
from tests.report.runs import partitioned_sends
from checkers.history.op import Op
from harness.report import render_report
from harness.report.faults import KIND_COLOURS
from harness.report.timeline import boxes, example_ops, segments

# If this were markup it would run and rename the page; escaped, it is text.
EVIL = "<script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">"
CHROMIUM = "/usr/bin/chromium"


def build_run(d: Path, n_sends: int = 20, lost_op: int | None = None, evil_at: int = 3) -> Path:
    """Two client processes sending, a partition from send 5 to send 12,
    every fifth send indeterminate, one send whose value is hostile."""
    ops = partitioned_sends(EVIL, n_sends, value=lambda i: EVIL if i == evil_at else i, error=EVIL)
    d.mkdir(parents=True)
    write_jsonl(d / "history.jsonl", ops)
    (d / "test.json").write_text(json.dumps({"name": "queue", "seed": 7}))
    lost = lost_op if lost_op is not None else ops[-1].index
    (d / "results.json").write_text(json.dumps({
        "valid": False,
        "anomaly_types": ["lost-write"],
        "anomalies": {"lost-write": [{"key": "t0-0", "value": 3, "op": lost, "note": EVIL}]},
        "durability": {"acks=all": {"sent": n_sends, "acked": 16, "lost": 1, "lost_rate": 1 / 16,
                                    "lost_rate_ci95": [0.01, 0.28],
                                    "lost_examples": [{"key": "t0-0", "value": 3, "op": lost}]}},
        "checkers": {"queue": {"valid": False, "bad_anomaly_types": ["lost-write"], "counts": {"lost-write": 1}}},
    }))
    return d


def test_timeline_has_a_box_per_operation_coloured_by_outcome(tmp_path):
    d = build_run(tmp_path / "run")
    render_report(d)
    html = (d / "timeline.html").read_text()
    # 20 client ops (16 ok, 4 info) and 2 nemesis ops (start and stop, each invoke+completion)
    assert len(re.findall(r'<div class="op ok[ "]', html)) == 16
    assert len(re.findall(r'<div class="op info[ "]', html)) == 4
    assert len(re.findall(r'<div class="op nemesis[ "]', html)) == 2
    heads = re.findall(r'<div class="head"[^>]*>([^<]*)</div>', html)
    assert heads == ["time", "nemesis", "0", "1"]


def test_fault_interval_is_shaded_across_all_columns(tmp_path):
    d = build_run(tmp_path / "run")
    render_report(d)
    html = (d / "timeline.html").read_text()
    shades = re.findall(r'<div class="shade" title="partition [^"]*" style="background: (#[0-9a-f]+); top: (\d+)px; '
                        r'height: (\d+)px; left: (\d+)px; right: 0"', html)
    assert len(shades) == 1
    colour, top, height, _ = shades[0]
    assert colour == KIND_COLOURS["partition"]
    # the partition runs from the start completion (row 12) to the stop completion (row 28)
    assert (int(top), int(height)) == (12 * 16, 17 * 16)


def test_index_links_each_anomaly_example_op_to_its_timeline_anchor(tmp_path):
    d = build_run(tmp_path / "run")
    index = render_report(d).read_text()
    timeline = (d / "timeline.html").read_text()
    assert 'href="timeline.html"' in index
    links = set(re.findall(r'href="timeline\.html#(op-\d+)"', index))
    assert links == {"op-43"}
    for anchor in links:
        assert f'id="{anchor}"' in timeline


def test_a_long_history_shows_its_head_and_a_window_around_each_anomaly(tmp_path):
    # 3000 sends = 6000+ events, more than the head: the lost op at the end gets a window
    d = build_run(tmp_path / "run", n_sends=3000)
    render_report(d)
    html = (d / "timeline.html").read_text()
    last = 6003  # 6000 client events + 4 nemesis events, 0-based
    assert f'id="op-{last}"' in html
    assert "events omitted" in html and "Showing" in html
    assert 'id="op-4000"' not in html  # between the head and the window
    assert len(re.findall(r'<div class="op ', html)) < 3200


def test_segments_merge_overlapping_windows_and_the_head():
    assert segments(100, [], head=10, window=5) == [(0, 9)]
    assert segments(100, [12, 40, 44], head=10, window=5) == [(0, 17), (35, 49)]
    assert segments(100, [99], head=200, window=5) == [(0, 99)]


def test_example_ops_reads_op_writer_and_cycle_step_indices():
    assert example_ops({"key": "t-0", "op": 7, "writer": 3, "offset": 99}) == [7, 3]
    assert example_ops({"ops": [5, 9], "values": [1, 2]}) == [5, 9]
    cyc = {"cycle": [4, 8, 4], "steps": [{"from": 4, "to": 8, "type": "ww"}, {"from": 8, "to": 4, "type": "wr"}]}
    assert example_ops(cyc) == [4, 8]


def test_an_invocation_that_never_completed_is_info_to_the_end():
    ops = [Op(type="invoke", f="send", value=[["send", "k", 1]], process=0, time=1, index=0),
           Op(type="invoke", f="poll", value=[["poll"]], process=1, time=2, index=1),
           Op(type="ok", f="poll", value=[["poll", {}]], process=1, time=3, index=2)]
    bs = {b.process: b for b in boxes(ops)}
    assert (bs[0].kind, bs[0].start, bs[0].stop) == ("info", 0, 2)
    assert (bs[1].kind, bs[1].start, bs[1].stop) == ("ok", 1, 2)
    assert "latency 0.0 ms" in bs[1].title


def test_history_values_are_escaped_in_the_timeline(tmp_path):
    d = build_run(tmp_path / "run")
    render_report(d)
    html = (d / "timeline.html").read_text()
    assert "<script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html


def test_timeline_renders_in_headless_chromium_with_boxes_shading_and_no_injected_script(tmp_path):
    need_program("chromium")
    d = build_run(tmp_path / "run")
    render_report(d)
    page = (d / "timeline.html").as_uri()
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(base + ["--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    assert len(re.findall(r'<div class="op (?:ok|info|fail|nemesis)', dom.stdout)) == 22
    assert '<div class="shade" title="partition' in dom.stdout
    # had the hostile value become markup, its script would have renamed the page
    title = re.search(r"<title>([^<]*)</title>", dom.stdout).group(1)
    assert title.startswith("kraftwerk timeline") and "PWNED" not in title
    assert "&lt;script&gt;" in dom.stdout  # shown as text in the box label
    shot = tmp_path / "shot.png"
    r = subprocess.run(base + ["--window-size=1200,1000", f"--screenshot={shot}", page],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
