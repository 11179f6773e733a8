"""Screenshots of the report site, so a reviewer can look without running
anything: the index, the first screen of an invalid run (its story), the
whole run page, its timeline, a campaign page and a long cycle.

By default it builds a small results directory from real simulator runs
(tests/report/site_fixtures.py: a campaign of four cells plus a standalone
run), adds the run the story is about (``kraftwerk sim --seed 2 --variant
kip101=off --nemesis kill --time-limit 10``: pre-KIP-101 followers under
kills lose acknowledged writes) and a 31-operation G0 cycle, serves it with
``kraftwerk serve`` on a free loopback port and saves PNGs from the system
chromium at 1400 x 900:

    .venv/bin/python bench/site_screenshots.py [--out docs/screenshots] [--results DIR]

``--results`` serves an existing results directory instead (the run page is
its newest invalid run, else its newest run; the campaign its first).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkers.check import check_history  # noqa: E402
from checkers.history.jsonl import write_jsonl  # noqa: E402
from tests.report.runs import ring  # noqa: E402
from tests.report.site_fixtures import _sim, build_results, chromium_context  # noqa: E402

#: the story's run: pre-KIP-101 followers under kills
STORY = ["--variant", "kip101=off", "--nemesis", "kill", "--time-limit", "10"]


def add_story_and_cycle(results: Path) -> tuple[str, str]:
    """The invalid run the story page shows, and a run whose only finding
    is a 31-operation cycle; their paths under ``results``."""
    (run,) = [d for d in _sim(results, "kip101-off", "2", *STORY)]
    # drawn by the site on first view, so its commands name the run as typed
    # beside the results directory (results/kip101-off/...), not a temporary path
    (run / "index.html").unlink()
    cyc = results / "cycles" / "ring-31"
    cyc.mkdir(parents=True)
    b = ring(31)
    write_jsonl(cyc / "history.jsonl", b.ops)
    (cyc / "test.json").write_text(json.dumps({"name": "ring-31", "workload": "txn", "txn": True}))
    (cyc / "results.json").write_text(json.dumps(check_history(b.ops)))
    return run.relative_to(results).as_posix(), cyc.relative_to(results).as_posix()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout: float = 30.0) -> None:
    t0 = time.monotonic()
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if time.monotonic() - t0 > timeout:
                raise
            time.sleep(0.2)


def _first_loss(run: Path) -> str:
    """The timeline's anchor of the run's first lost write, if it lost one."""
    try:
        res = json.loads((run / "results.json").read_text())
        return f"#op-{res['durability']['acks=all']['lost_examples'][0]['op']}"
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/screenshots", help="where the PNGs go")
    ap.add_argument("--results", default=None, help="serve this results directory instead of building one")
    ap.add_argument("--width", type=int, default=1400)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-shots-"))
    try:
        story = cycle = None
        if a.results:
            results = Path(a.results)
        else:
            results = build_results(tmp / "results")
            story, cycle = add_story_and_cycle(results)
        port = free_port()
        # served from its parent as "results", so no machine path shows in the pictures
        server = subprocess.Popen([sys.executable, "-c", "from harness.cli import main; main()", "serve",
                                   "--out", results.name, "--port", str(port)], cwd=results.parent,
                                  stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            base = f"http://127.0.0.1:{port}"
            wait_up(base + "/")
            runs = json.loads(urllib.request.urlopen(base + "/api/runs?verdict=invalid").read())["runs"] or \
                json.loads(urllib.request.urlopen(base + "/api/runs").read())["runs"]
            run = story or runs[0]["path"]
            # (name, path, whole page?)
            pages = [("index", "/", True), ("story", f"/r/{run}/", False), ("run", f"/r/{run}/", True),
                     ("timeline", f"/r/{run}/timeline.html{_first_loss(results / run)}", False)]
            camp = sorted(p.parent for p in results.rglob("campaign.json"))
            if camp:
                pages.append(("campaign", f"/r/{camp[0].relative_to(results).as_posix()}/", True))
            if cycle:
                pages.append(("cycle", f"/r/{cycle}/#cycles", False))
            with chromium_context(tmp / "profile") as ctx:
                page = ctx.new_page()
                page.set_viewport_size({"width": a.width, "height": 900})
                for name, path, whole in pages:
                    page.goto(base + path, wait_until="networkidle", timeout=180_000)
                    dest = out / f"{name}.png"
                    page.screenshot(path=str(dest), full_page=whole)
                    print(f"{dest}: {base}{path}")
        finally:
            server.terminate()
            server.wait(timeout=20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
