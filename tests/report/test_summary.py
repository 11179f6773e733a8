"""summary.json (what the index reads per run), the catalogue's walk over a
results directory, the campaign format's aggregation, and the path rule
that keeps the site inside the results directory."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.report.campaign import CampaignError, aggregate, campaign_context, heatmap_png, load_campaign, write_campaign
from harness.site.paths import Refused, safe_path
from harness.site.scan import Catalogue
from harness.rundir.summary import SUMMARY, build_summary, load_summary


def fake_run(d: Path, valid=True, lost=0, acked=10, sim=True) -> Path:
    d.mkdir(parents=True)
    (d / "history.jsonl").write_text("")
    test = ({"kraftwerk": "sim", "seed": 3, "options": {"test_name": "t", "nemesis": ["kill"], "acks": "all"}}
            if sim else {"name": "q", "runtime": "local", "db": "reference", "backend": "local", "nemesis": ["partition"],
                         "scenario": "unclean-loss", "seed": 4})
    (d / "test.json").write_text(json.dumps(test))
    (d / "results.json").write_text(json.dumps({
        "valid": valid, "anomaly_types": ["lost-write"] if lost else [],
        "durability": {"acks=all": {"sent": acked, "acked": acked, "lost": lost, "lost_rate": lost / acked},
                       "acks=1": {"sent": 0, "acked": 0, "lost": 0}},
        "stats": {"duration_s": 12.5, "ops": 40}}))
    return d


def test_summary_reads_either_runtimes_test_json(tmp_path):
    s = build_summary(fake_run(tmp_path / "sim" / "20260101T000000-3"))
    assert (s["name"], s["runtime"], s["backend"], s["nemesis"], s["valid"]) == ("t", "sim", "sim", ["kill"], True)
    assert s["started"] == "2026-01-01T00:00:00Z" and s["duration_s"] == 12.5
    assert list(s["durability"]) == ["acks=all"]  # a level nothing was sent at is left out
    r = build_summary(fake_run(tmp_path / "q" / "20260102T030405-4", sim=False, valid=False, lost=2))
    assert (r["name"], r["db"], r["backend"], r["nemesis"]) == ("q", "reference", "local", ["partition", "scenario:unclean-loss"])
    assert r["durability"]["acks=all"]["lost"] == 2


def test_an_old_run_gets_its_summary_on_first_sight_and_a_rechecked_one_a_new_one(tmp_path):
    d = fake_run(tmp_path / "t" / "20260101T000000-3")
    assert not (d / SUMMARY).exists()
    assert load_summary(d)["valid"] is True
    assert (d / SUMMARY).exists()
    res = json.loads((d / "results.json").read_text())
    res["valid"] = False
    time.sleep(0.01)
    (d / "results.json").write_text(json.dumps(res))
    os.utime(d / "results.json", (time.time() + 5, time.time() + 5))
    assert load_summary(d)["valid"] is False


def test_a_run_still_going_is_listed_but_never_cached(tmp_path):
    d = tmp_path / "t" / "20260101T000000-1"
    d.mkdir(parents=True)
    (d / "test.json").write_text("{}")
    assert load_summary(d)["state"] == "running"
    assert not (d / SUMMARY).exists()


def test_the_catalogue_finds_runs_and_campaigns_and_skips_hidden_and_symlinked_dirs(tmp_path):
    fake_run(tmp_path / "a" / "20260101T000000-1")
    camp = tmp_path / "campaigns" / "c1"
    r1 = fake_run(camp / "cell0" / "20260101T000000-1")
    r2 = fake_run(camp / "cell1" / "20260101T000000-2", valid=False, lost=3)
    write_campaign(camp, aggregate(camp, "c1", ["acks"], [({"acks": "all"}, [r1]), ({"acks": "1"}, [r2])]))
    (tmp_path / ".state").mkdir()
    fake_run(tmp_path / ".state" / "x")
    os.symlink(tmp_path / "a", tmp_path / "latest")
    cat = Catalogue(tmp_path.resolve())
    runs, camps = cat.scan()
    assert sorted(r["path"] for r in runs) == ["a/20260101T000000-1", "campaigns/c1/cell0/20260101T000000-1",
                                               "campaigns/c1/cell1/20260101T000000-2"]
    assert [c["path"] for c in camps] == ["campaigns/c1"]
    assert {r["path"]: r["campaign"] for r in runs}["campaigns/c1/cell1/20260101T000000-2"] == "campaigns/c1"
    fake_run(tmp_path / "a" / "20260101T000001-2")  # a new run changes its test directory's mtime
    assert len(cat.scan()[0]) == 4


def test_campaign_aggregate_sums_cells_with_a_wilson_interval(tmp_path):
    camp = tmp_path / "c"
    dirs = [fake_run(camp / "x" / f"2026010{i}T000000-{i}", valid=i != 1, lost=2 if i == 1 else 0, acked=100)
            for i in range(1, 4)]
    c = aggregate(camp, "c", ["variant"], [({"variant": "kip101=off"}, dirs)])
    (cell,) = c["cells"]
    assert (cell["runs"], cell["valid"], cell["invalid"]) == (3, 2, 1)
    d = cell["durability"]["acks=all"]
    assert (d["acked"], d["lost"]) == (300, 2) and d["lost_rate"] == pytest.approx(2 / 300)
    lo, hi = d["lost_rate_ci95"]
    assert 0 < lo < 2 / 300 < hi < 0.03
    assert cell["invalid_runs"] == ["x/20260101T000000-1"] and cell["anomaly_runs"] == {"lost-write": 1}
    write_campaign(camp, c)
    assert load_campaign(camp)["cells"][0]["id"] == "variant=kip101=off"
    assert heatmap_png(c)[:8] == b"\x89PNG\r\n\x1a\n"
    assert campaign_context(c)["levels"] == ["acks=all"]


def test_a_campaign_file_of_another_format_is_one_line_error(tmp_path):
    (tmp_path / "campaign.json").write_text(json.dumps({"cells": []}))
    with pytest.raises(CampaignError, match="not a kraftwerk-campaign/1 file"):
        load_campaign(tmp_path)
    (tmp_path / "campaign.json").write_text("{")
    with pytest.raises(CampaignError, match="not JSON"):
        load_campaign(tmp_path)


def test_safe_path_refuses_dot_dot_hidden_and_symlinks_out(tmp_path):
    root = (tmp_path / "r").resolve()
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("x")
    os.symlink(root / "a", root / "inside")
    os.symlink("/etc", root / "out")
    assert safe_path(root, "a/f.txt") == root / "a" / "f.txt"
    assert safe_path(root, "inside/f.txt") == root / "a" / "f.txt"
    for bad in ("../r/a/f", "a/../../x", ".hidden", "out/passwd", "out", "a\\..\\f", "missing"):
        with pytest.raises(Refused):
            safe_path(root, bad)


def test_a_report_from_an_older_kraftwerk_or_before_a_recheck_is_rendered_again(tmp_path):
    from harness.report.render import VERSION_MARK
    from harness.site.app import _stale

    d = fake_run(tmp_path / "t" / "20260101T000000-1")
    assert _stale(d)  # no report at all
    (d / "index.html").write_text("<!doctype html><html><head><meta charset='utf-8'></head></html>")
    assert _stale(d)  # a report without the current version mark
    (d / "index.html").write_text(f"<!doctype html><html><head>{VERSION_MARK}</head></html>")
    assert not _stale(d)
    os.utime(d / "results.json", (time.time() + 5, time.time() + 5))
    assert _stale(d)  # re-checked since


def test_kraftwerk_report_writes_a_campaigns_static_page_and_heatmap(tmp_path):
    import subprocess
    import sys

    camp = tmp_path / "c"
    r1 = fake_run(camp / "cell0" / "20260101T000000-1", valid=False, lost=1)
    write_campaign(camp, aggregate(camp, "<i>c</i>", ["acks"], [({"acks": "all"}, [r1])]))
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "report", str(camp)],
                       capture_output=True, text=True, cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr
    html = (camp / "index.html").read_text()
    assert "Campaign — &lt;i&gt;c&lt;/i&gt;" in html and 'href="cell0/20260101T000000-1/index.html"' in html
    assert (camp / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
