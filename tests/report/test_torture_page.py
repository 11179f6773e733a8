"""A torture run leaves a page beside its JUnit file: every expectation
with its verdict, and each failing run linked (relative to the page) with
the command that replays it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPECT = """- name: faithful-stays-valid
  expect: valid
  settings: {nemesis: kill, time-limit: 5}
- name: kip101-off-is-caught
  expect: caught
  within: 2
  settings: {nemesis: kill, variant: kip101=off, time-limit: 8}
"""


def test_torture_writes_a_page_beside_its_junit_with_each_failing_runs_replay(tmp_path):
    (tmp_path / "expect.yaml").write_text(EXPECT)
    junit = tmp_path / "ci" / "torture.xml"
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "torture", "--budget", "1s",
                        "--expect", str(tmp_path / "expect.yaml"), "--junit", str(junit), "--jobs", "1",
                        "--out", str(tmp_path / "results")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    for page in (junit.with_suffix(".html"), tmp_path / "results" / "torture" / "index.html"):
        html = page.read_text()
        rows = re.findall(r'<tr class="(ok|surprise|undecided)"><td><b>([^<]+)</b>', html)
        assert sorted(rows) == [("ok", "faithful-stays-valid"), ("ok", "kip101-off-is-caught")]
        links = re.findall(r'<a href="([^"]+)">seed (\d+)</a> <code class="cmd">([^<]+)</code>', html)
        assert links, "the caught variant's failing run is linked"
        for href, seed, replay in links:
            assert (page.parent / href).is_file() and href.endswith("/index.html")
            assert replay.startswith(f"kraftwerk sim --seed {seed} ") and "kip101=off" in replay
    assert 'href="torture.xml"' in junit.with_suffix(".html").read_text()
