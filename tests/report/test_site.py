"""``kraftwerk serve`` driven in the system chromium (Playwright) over a
results directory of real simulator runs (tests/report/site_fixtures.py): the
index lists every run with its verdict, newest first, and filters and sorts
them; a run page shows its verdict, tables and plots; a campaign page shows
its heatmap; paths out of the results directory are refused; a test named
with markup stays text; the site is read-only and on loopback."""

from __future__ import annotations

import http.client
import io
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
import uvicorn

from harness.site import build_app
from tests.needs import need_program
from tests.report.site_fixtures import EVIL_NAME, ROOT, build_results, chromium_context
from reference_impl.server.ports import free_ports


@pytest.fixture(scope="module")
def workdir():
    """A directory of this module's own: pytest's numbered temporary
    directories are pruned by any other pytest session of the same user."""
    d = Path(tempfile.mkdtemp(prefix="kraftwerk-site-test-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def results(workdir) -> Path:
    return build_results(workdir / "results")


@pytest.fixture(scope="module")
def base(results):
    port = free_ports(1)[0]
    server = uvicorn.Server(uvicorn.Config(build_app(results), host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    t.join(timeout=20)


@pytest.fixture(scope="module")
def browser(workdir):
    need_program("chromium")
    with chromium_context(workdir / "profile") as ctx:
        yield ctx


@pytest.fixture
def page(browser):
    p = browser.new_page()
    p.set_default_timeout(180_000)  # a run without a report is rendered on first view, on a busy machine
    yield p
    p.close()


def runs_on_disk(results: Path) -> dict[str, object]:
    """Every run directory and its verdict, from results.json itself."""
    out = {}
    for res in results.rglob("results.json"):
        out[res.parent.relative_to(results).as_posix()] = json.loads(res.read_text())["valid"]
    return out


def raw_get(base: str, path: str, method: str = "GET") -> tuple[int, bytes]:
    """A request with the path sent exactly as written (a browser would
    normalise ``..`` away before sending it)."""
    host, port = base.removeprefix("http://").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request(method, path)
    r = c.getresponse()
    return r.status, r.read()


def test_index_lists_every_run_with_its_verdict_newest_first(page, base, results):
    page.goto(base + "/")
    rows = page.locator("tr.run")
    disk = runs_on_disk(results)
    assert rows.count() == len(disk) == 10
    shown = {}
    for i in range(rows.count()):
        href = rows.nth(i).locator("a.run-link").get_attribute("href")
        shown[href.removeprefix("/r/").rstrip("/")] = rows.nth(i).locator(".verdict").inner_text()
    assert shown == {p: {True: "valid", False: "invalid"}.get(v, "unknown") for p, v in disk.items()}
    starts = [rows.nth(i).locator("td").nth(1).inner_text() for i in range(rows.count())]
    assert starts == sorted(starts, reverse=True)
    assert page.locator("#campaigns").inner_text().count("unclean-matrix") == 1


def test_index_filters_by_verdict_and_by_text(page, base, results):
    page.goto(base + "/")
    page.select_option("select[name=verdict]", "invalid")
    page.click("button[type=submit]")
    page.wait_for_url("**verdict=invalid**")
    invalid = [p for p, v in runs_on_disk(results).items() if v is False]
    assert invalid and page.locator("tr.run").count() == len(invalid)
    assert set(page.locator("tr.run .verdict").all_inner_texts()) == {"invalid"}
    page.goto(base + "/")
    page.fill("input[name=q]", "leader-churn")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**q=leader-churn**")
    assert page.locator("tr.run").count() == 4
    assert all("leader-churn" in t for t in page.locator("tr.run td:nth-child(6)").all_inner_texts())


def test_index_sorts_by_lost_writes_when_its_header_is_clicked(page, base):
    page.goto(base + "/")
    page.click("th >> text=lost / acked")
    page.wait_for_url("**sort=lost**")
    # a line per acks level that acknowledged writes: lost / acked
    lost = [sum(int(line.split("/")[0]) for line in t.splitlines() if "/" in line)
            for t in page.locator("tr.run td:nth-child(8)").all_inner_texts()]
    assert lost == sorted(lost, reverse=True) and lost[0] > 0


def test_run_page_shows_verdict_tables_and_plots(page, base):
    page.goto(base + "/?verdict=invalid")
    page.click("tr.run a.run-link")
    page.wait_for_load_state("networkidle")
    assert page.locator("#verdict").inner_text() == "INVALID"
    assert "acknowledged acks=all writes (" in page.locator("#verdict-box").inner_text()
    assert page.locator("#durability tr").count() >= 2
    # statistics and checker outputs are tables of plain values, not JSON dumps
    stats = page.locator("#stats th").all_inner_texts()
    assert "messages.sent" in stats and "history.ops" in stats
    assert page.locator("#checker-queue th").count() > 5
    assert not any(v.lstrip().startswith("{") for v in page.locator("#stats td").all_inner_texts())
    for plot in ("latency-raw.png", "latency-quantiles.png", "rate.png", "hw-leo.png", "isr-leader.png",
                 "lost-writes.png", "realtime-lag.png", "unseen.png", "consume-counts.png"):
        img = page.locator(f"img[src='{plot}']")
        assert img.count() == 1, plot
        assert img.evaluate("i => i.complete && i.naturalWidth > 300"), plot
    assert page.locator("#elections").inner_text().count("unclean") >= 1
    assert page.locator("nav.site #zip").count() == 1


def test_campaign_page_shows_its_heatmap_and_the_invalid_cell_first(page, base):
    page.goto(base + "/")
    page.click("#campaigns a")
    page.wait_for_load_state("networkidle")
    assert page.locator("h1").inner_text() == "Campaign — unclean-matrix"
    assert page.locator("#heatmap").evaluate("i => i.complete && i.naturalWidth > 300")
    first = page.locator("#cells tr").nth(1)
    assert "unclean_election on" in first.inner_text() and "unclean-loss" in first.inner_text()
    first.locator("td.runs a").first.click()
    page.wait_for_load_state("networkidle")
    assert page.locator("#verdict").inner_text() == "INVALID"


@pytest.mark.parametrize("path", [
    "/r/../../../../etc/passwd",
    "/r/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/r/campaigns/..%2f..%2f..%2fetc/passwd",
    "/r/escape/etc/passwd",
    "/ls/escape/etc/",
    "/zip/escape",
    "/r/.state/",
])
def test_a_path_out_of_the_results_directory_is_refused(base, path):
    status, body = raw_get(base, path)
    assert status == 404
    assert b"root:" not in body


def test_a_symlink_inside_a_run_pointing_out_is_refused_and_left_out_of_its_zip(base, results):
    run = next(p.parent.parent for p in results.glob("queue/*/nodes/outside.log"))
    rel = run.relative_to(results).as_posix()
    assert raw_get(base, f"/r/{rel}/nodes/outside.log")[0] == 404
    status, body = raw_get(base, f"/zip/{rel}")
    assert status == 200, body[:300]
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert any(n.endswith("/history.jsonl") for n in names) and any(n.endswith("/results.json") for n in names)
    assert not any("outside.log" in n for n in names)


def test_a_test_named_with_markup_stays_text(page, base):
    page.goto(base + "/")
    assert page.locator("#evil").count() == 0
    names = page.locator("tr.run b.name").all_inner_texts()
    assert EVIL_NAME in names
    assert page.title() == "kraftwerk results"
    row = page.locator("tr.run", has_text="document.title")
    row.locator("a.run-link").click()  # its report is rendered on first view
    page.wait_for_load_state("networkidle")
    assert EVIL_NAME in page.locator("h1").inner_text()
    # had the script run, it would have renamed the page to PWNED
    assert page.locator("#evil").count() == 0 and page.title().startswith("kraftwerk: " + EVIL_NAME)


def test_the_site_is_read_only_and_answers_loopback_names_only(base):
    for method in ("POST", "PUT", "DELETE"):
        assert raw_get(base, "/", method)[0] == 405
    host, port = base.removeprefix("http://").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("GET", "/", headers={"Host": "attacker.example"})
    assert c.getresponse().status == 400


def test_api_runs_pages_and_filters(base):
    data = json.loads(urllib.request.urlopen(base + "/api/runs?runtime=sim&q=cell1").read())
    assert data["total"] == 10 and data["matched"] == 2
    assert {r["path"].split("/")[2] for r in data["runs"]} == {"cell1"}


def test_kraftwerk_serve_refuses_a_missing_directory_and_a_busy_port(tmp_path):
    cli = [sys.executable, "-c", "from harness.cli import main; main()", "serve"]
    r = subprocess.run(cli + ["--out", str(tmp_path / "nope")], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "no such results directory" in r.stderr and "Traceback" not in r.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(cli + ["--out", str(tmp_path), "--port", str(port)], capture_output=True, text=True,
                           cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "cannot listen" in r.stderr
