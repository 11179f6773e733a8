"""What the commands print survives a log: to a pipe (CI, tee) a table is
as wide as its content, so no cell's parameters or anomaly name is cut;
``kraftwerk sim`` names each run's directory and page and the command that
replays each invalid seed; a campaign's cells are printed in full."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args: str) -> subprocess.CompletedProcess[str]:
    # stdout and stderr are pipes, as under `| cat` or a CI runner
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


def test_sim_to_a_pipe_prints_each_run_and_the_replay_of_each_invalid_seed(tmp_path):
    flags = ["--variant", "kip101=off", "--nemesis", "kill", "--time-limit", "6"]
    r = kraftwerk("sim", "--seeds", "1..3", "--jobs", "1", "--out", str(tmp_path), *flags)
    assert r.returncode == 1, r.stderr[-500:]
    assert "…" not in r.stdout
    for seed in (1, 2, 3):
        m = re.search(rf"^seed {seed}: (valid|INVALID|unknown): (\S+)  \(report (\S+)\)$", r.stdout, re.M)
        assert m, r.stdout
        run = Path(m.group(2))
        assert (run / "results.json").is_file() and Path(m.group(3)) == run / "index.html"
        assert (run / "index.html").is_file()
        valid = json.loads((run / "results.json").read_text())["valid"]
        replay = f"  replay: kraftwerk sim --seed {seed} {' '.join(flags)}"
        if valid is True:
            assert replay not in r.stdout
        else:
            assert m.group(1) != "valid" and replay in r.stdout.splitlines()
    # the table's anomaly names are whole
    results = [json.loads(p.read_text()) for p in tmp_path.glob("queue/*/results.json")]
    for name in {t for res in results for t in res["anomaly_types"]}:
        assert re.search(rf"\b{re.escape(name)}\b", r.stdout)


def test_a_campaign_to_a_pipe_prints_every_cell_and_anomaly_in_full(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text("name: pipe\nruntime: sim\nseeds: 3..3\ntime-limit: 10\nnemesis: kill\n"
                    "matrix:\n  variant: [faithful, kip101=off]\n  acks: [all, '1']\n")
    r = kraftwerk("campaign", str(spec), "--out", str(tmp_path / "results"), "--parallel", "2", "--no-parquet")
    assert r.returncode == 1, r.stderr[-500:]
    camp = json.loads((tmp_path / "results" / "campaigns" / "pipe" / "campaign.json").read_text())
    assert len(camp["cells"]) == 4 and "…" not in r.stdout
    assert sum(len(c["anomaly_runs"]) for c in camp["cells"]) >= 6  # kip101=off is caught: names to print
    for cell in camp["cells"]:
        (line,) = [ln for ln in r.stdout.splitlines() if f" {cell['id']} " in ln]
        for name, runs in cell["anomaly_runs"].items():
            assert f"{name}:{runs}" in line
