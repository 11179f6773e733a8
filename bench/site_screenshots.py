"""Screenshots of the report site, so a reviewer can look without running
anything: the index, a run page and a campaign page.

By default it builds a small results directory from real simulator runs
(a campaign of two cells, faithful and with unclean election on, plus a
standalone run), serves it with ``kraftwerk serve`` on a free loopback port
and saves full-page PNGs from the system chromium:

    .venv/bin/python bench/site_screenshots.py [--out DIR] [--results DIR]

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

from tests.report.site_fixtures import build_results, chromium_context  # noqa: E402


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/screenshots", help="where the PNGs go")
    ap.add_argument("--results", default=None, help="serve this results directory instead of building one")
    ap.add_argument("--width", type=int, default=1360)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="kraftwerk-shots-"))
    try:
        results = Path(a.results) if a.results else build_results(tmp / "results")
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
            pages = {"index": "/", "run": f"/r/{runs[0]['path']}/"}
            camp = sorted(p.parent for p in results.rglob("campaign.json"))
            if camp:
                pages["campaign"] = f"/r/{camp[0].relative_to(results).as_posix()}/"
            with chromium_context(tmp / "profile") as ctx:
                page = ctx.new_page()
                page.set_viewport_size({"width": a.width, "height": 900})
                for name, path in pages.items():
                    page.goto(base + path, wait_until="networkidle", timeout=180_000)
                    dest = out / f"{name}.png"
                    page.screenshot(path=str(dest), full_page=True)
                    print(f"{dest}: {base}{path}")
        finally:
            server.terminate()
            server.wait(timeout=20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
