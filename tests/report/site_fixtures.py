"""A results directory made of real simulator runs, and the system
chromium driven by Playwright: what the site tests and
bench/site_screenshots.py share.

The campaign is a 2 x 2 matrix (unclean leader election off / on, under
the unclean-loss script or under leader churn with kills), two
seeds a cell, run with ``kraftwerk sim`` and summed up with
:func:`harness.report.campaign.aggregate`; the unclean cell's seed 5 loses
acknowledged writes. Beside it: a standalone run with its report, and a
copy of it whose test name is markup and whose summary is left to be built
on first sight, as for a run made before summaries existed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from harness.report.campaign import aggregate, write_campaign

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EVIL_NAME = "<b id=\"evil\">bold</b><script>document.title='PWNED'</script>"
CAMPAIGN = "campaigns/unclean-matrix"
#: (the cell's parameters, its other flags): the unclean-loss script, and a story (--scenario) among a
#: generic fault
CELLS = [
    ({"scenario": "unclean-loss", "unclean_election": "off"}, []),
    ({"scenario": "unclean-loss", "unclean_election": "on"}, ["--variant", "unclean_election=on"]),
    ({"scenario": "leader-churn", "unclean_election": "off"}, ["--nemesis", "kill"]),
    ({"scenario": "leader-churn", "unclean_election": "on"}, ["--nemesis", "kill", "--variant", "unclean_election=on"]),
]


def kraftwerk(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KRAFTWERK_DEBUG": ""}
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def _sim(out: Path, name: str, seeds: str, *extra: str) -> list[Path]:
    r = kraftwerk("sim", "--seeds" if ".." in seeds else "--seed", seeds, "--jobs", "2", "--time-limit", "20",
                  "--nemesis-interval", "3", "--name", name, "--out", str(out), *extra)
    assert r.returncode in (0, 1), r.stderr[-800:]
    return sorted((out / name).iterdir())


def build_results(results: Path) -> Path:
    camp = results / CAMPAIGN
    cells = []
    for i, (params, extra) in enumerate(CELLS):
        name = f"cell{i}"
        dirs = _sim(camp, name, "5..6", "--scenario", params["scenario"], *extra)
        cells.append((params, dirs))
    write_campaign(camp, aggregate(camp, "unclean-matrix", ["scenario", "unclean_election"], cells))
    (camp / "latest").unlink(missing_ok=True)
    (run,) = _sim(results, "queue", "5", "--nemesis", "partition,kill", "--report")
    evil = results / "markup" / run.name
    shutil.copytree(run, evil)
    test = json.loads((evil / "test.json").read_text())
    test["name"] = EVIL_NAME
    (evil / "test.json").write_text(json.dumps(test))
    (evil / "summary.json").unlink()
    (evil / "index.html").unlink()
    # symlinks that point out of the results directory: the site refuses them
    os.symlink("/", results / "escape")
    os.symlink("/etc/passwd", run / "nodes" / "outside.log")
    return results


@contextlib.contextmanager
def chromium_context(profile: Path | None = None) -> Iterator[object]:
    """A fresh persistent context of the system chromium (never a
    downloaded browser), closed on exit."""
    from playwright.sync_api import sync_playwright

    made = profile is None
    profile = profile or Path(tempfile.mkdtemp(prefix="kraftwerk-chromium-"))
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_ARGS)
        try:
            yield ctx
        finally:
            ctx.close()
            if made:
                shutil.rmtree(profile, ignore_errors=True)
