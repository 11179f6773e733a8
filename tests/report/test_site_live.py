"""``kraftwerk serve`` shows what is on disk now: a campaign started after
the server is on the index at its next request, labelled, its runs named by
their cell's parameters and counted while it runs; a run or a campaign
whose directory existed empty at the first look is found once it holds
its files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import uvicorn

from harness.report.campaign import live, planned, write_campaign
from harness.site import build_app
from harness.site.scan import Catalogue
from tests.needs import need_program
from tests.report.site_fixtures import ROOT, chromium_context
from reference_impl.server.ports import free_ports

CAMPAIGN = """name: live-matrix
runtime: sim
seeds: 1..1
time-limit: 10
nemesis: kill
matrix:
  variant: [faithful, kip101=off]
"""


def test_directories_that_become_a_run_and_a_campaign_are_found(tmp_path):
    cat = Catalogue(tmp_path)
    run = tmp_path / "queue" / "20260101T000000-1"
    camp = tmp_path / "campaigns" / "c"
    run.mkdir(parents=True)
    (camp / "cell000" / "20260101T000000-1").mkdir(parents=True)
    assert cat.scan() == ([], [])
    (run / "test.json").write_text(json.dumps({"name": "queue", "seed": 1}))
    (camp / "cell000" / "20260101T000000-1" / "test.json").write_text(json.dumps({"name": "cell000", "seed": 1}))
    write_campaign(camp, planned("c", ["variant"], [({"variant": "faithful"}, "cell000")], 1))
    runs, campaigns = cat.scan()
    assert sorted((r["path"], r["campaign"]) for r in runs) == [
        ("campaigns/c/cell000/20260101T000000-1", "campaigns/c"), ("queue/20260101T000000-1", None)]
    assert [c["path"] for c in campaigns] == ["campaigns/c"]


def test_a_planned_campaign_counts_the_runs_on_disk():
    camp = planned("c", ["acks"], [({"acks": "all"}, "cell000"), ({"acks": "1"}, "cell001")], 2)
    assert camp["state"] == "running" and camp["planned_runs"] == 4
    now = live(camp, {"cell000/x-1": {"valid": False, "anomaly_types": ["lost-acked-write"],
                                      "durability": {"acks=all": {"acked": 10, "lost": 3}}},
                      "cell001/x-1": {"valid": True, "durability": {"acks=1": {"acked": 8, "lost": 0}}}})
    c0, c1 = now["cells"]
    assert (c0["runs"], c0["invalid"], c0["durability"]["acks=all"]["lost"]) == (1, 1, 3)
    assert (c1["runs"], c1["valid"]) == (1, 1)


@pytest.fixture
def served():
    d = Path(tempfile.mkdtemp(prefix="kraftwerk-live-test-"))
    (d / "results").mkdir()
    port = free_ports(1)[0]
    server = uvicorn.Server(uvicorn.Config(build_app(d / "results"), host="127.0.0.1", port=port,
                                           log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield d, f"http://127.0.0.1:{port}"
    server.should_exit = True
    t.join(timeout=20)
    shutil.rmtree(d, ignore_errors=True)


def test_a_campaign_started_after_the_server_appears_labelled_without_a_restart(served):
    need_program("chromium")
    d, base = served
    with chromium_context(d / "profile") as ctx:
        page = ctx.new_page()
        page.goto(base + "/")
        assert page.locator("tr.campaign").count() == 0
        (d / "camp.yaml").write_text(CAMPAIGN)
        p = subprocess.Popen([sys.executable, "-c", "from harness.cli import main; main()", "campaign",
                              str(d / "camp.yaml"), "--out", str(d / "results"), "--parallel", "1", "--no-parquet"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # while it runs (its file is written before its first seed, and each
        # seed is a `kraftwerk sim` process of a few seconds) it is listed as running
        seen_running = False
        while p.poll() is None and not seen_running:
            time.sleep(0.2)
            html = urllib.request.urlopen(base + "/").read().decode()
            seen_running = 'class="campaign"' in html and ">running<" in html and "live-matrix" in html
        p.communicate(timeout=300)
        assert seen_running
        assert p.returncode == 1, "kip101=off under kills is caught"
        page.goto(base + "/")
        row = page.locator("tr.campaign")
        assert row.count() == 1 and "live-matrix" in row.inner_text() and "variant" in row.inner_text()
        names = sorted(page.locator("tr.run b.name").all_inner_texts())
        assert names == ["variant=faithful", "variant=kip101=off"]
        assert page.locator("tr.run .campaign-label").first.inner_text() == "campaign live-matrix"
        api = json.loads(urllib.request.urlopen(base + "/api/runs").read())
        assert {r["campaign"] for r in api["runs"]} == {"campaigns/live-matrix"}
        page.goto(base + "/r/campaigns/live-matrix/")
        cells = page.locator("#cells").inner_text()
        assert "kip101=off" in cells and "faithful" in cells
