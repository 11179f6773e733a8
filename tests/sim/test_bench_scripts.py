"""The simulator's bench scripts (bench/sim_speed.py, bench/sim_soak.py):
bad arguments get argparse's one-line error and exit 2, never a traceback;
a short speed run prints the figures the notes quote. The broker bench
(bench/broker_throughput.py) refuses bad flags the same way before it
starts any cluster."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("script,args,says", [
    ("sim_speed.py", ["--seeds", "0"], "--seeds must be at least 1"),
    ("sim_speed.py", ["--jobs", "0"], "--jobs must be at least 1"),
    ("sim_speed.py", ["--rate", "0"], "--rate must be positive"),
    ("sim_speed.py", ["--time-limit", "-1"], "--time-limit"),
    ("sim_speed.py", ["--nemesis", "bogus"], "unknown nemesis 'bogus'"),
    ("sim_soak.py", ["baseline", "--seeds", "0"], "--seeds must be at least 1"),
    ("sim_soak.py", ["baseline", "--time-limit", "-3", "--seeds", "1"], "--time-limit"),
    ("sim_soak.py", ["variants", "--only", "bogus"], "unknown variant hunt 'bogus'"),
    ("sim_soak.py", ["variants", "--mix", "bogus", "--max-seeds", "1"], "unknown nemesis 'bogus'"),
    ("sim_soak.py", ["detect", "--only", "bogus"], "unknown variant 'bogus'"),
    ("differential_campaign.py", ["--out", "/nonexistent/kw", "--kinds", "bogus"], "unknown fault kind 'bogus'"),
    ("differential_campaign.py", ["--out", "/nonexistent/kw", "--kinds", "reassign,kill"],
     "reassign is not a fault both dbs make on this cluster (it needs more --brokers than --rf)"),
    ("differential_campaign.py", ["--out", "/nonexistent/kw", "--brokers", "2"], "--rf 3 exceeds --brokers 2"),
    ("differential_resim.py", ["--campaign", "/nonexistent/kw"], "no campaign's hunt.json there"),
    ("results_diff.py", ["--before", "HEAD", "/nonexistent/kw"], "no such path: /nonexistent/kw"),
    ("results_diff.py", ["--before", "no-such-commit-kw", str(ROOT / "tests" / "sim" / "schedules")],
     "--before no-such-commit-kw: no such commit"),
    ("results_diff.py", ["--before", "HEAD", str(ROOT / "tests" / "sim" / "schedules")],
     "no history found under the paths given"),
])
def test_bench_scripts_answer_bad_arguments_with_one_line_and_exit_2(script: str, args: list[str], says: str) -> None:
    p = _run(script, *args)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}: error: ") and says in last


@pytest.mark.parametrize("args,says", [
    (["--phases", "fixed,bogus"], "--phases takes fixed, full or both"),
    (["--phases", ""], "--phases takes fixed, full or both"),
    (["--rates", "100,x"], "--rates must be integers"),
    (["--rates", "0"], "--rates must be at least 1 msg/s"),
    (["--rate-seconds", "0"], "the durations positive"),
])
def test_the_broker_bench_refuses_bad_flags_with_one_line_and_exit_2_before_any_cluster(args: list[str],
                                                                                         says: str) -> None:
    p = _run("broker_throughput.py", *args)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and says in p.stderr


def test_sim_speed_prints_the_workload_phase_the_whole_simulation_and_the_seed_with_its_checkers() -> None:
    p = _run("sim_speed.py", "--seeds", "1", "--time-limit", "3")
    assert p.returncode == 0, p.stderr
    workload = re.search(r"TOTAL, workload phase at 500 ops/s, one process: ([\d.]+) simulated s in [\d.]+ wall s = "
                         r"([\d.]+)x real time; CPU", p.stdout)
    whole = re.search(r"TOTAL, whole simulation .*?: ([\d.]+) simulated s in", p.stdout)
    assert workload and whole and "TOTAL, each seed with its checkers" in p.stdout, p.stdout
    # the workload phase is the --time-limit, the whole run adds the cluster's start and the final phase
    assert float(workload.group(1)) == 3.0 and float(whole.group(1)) > 3.0 and float(workload.group(2)) > 0


def test_sim_speed_measures_a_workload_that_ends_before_its_time_limit_to_its_end() -> None:
    # at 1 op/s the generator knows no operation fits in the last stretch
    # and ends early, as Jepsen's time-limit does: the loop stops before
    # the time-limit mark, and the bench says so instead of failing
    p = _run("sim_speed.py", "--seeds", "1", "--time-limit", "10", "--rate", "1")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "note: seeds [0] ended their workload and final reads before the 10 s time limit" in p.stdout
    workload = re.search(r"TOTAL, workload phase at 1 ops/s, one process: ([\d.]+) simulated s", p.stdout)
    assert workload and 0 < float(workload.group(1)) < 10.0, p.stdout


def test_the_faithful_soak_names_the_seed_whose_post_heal_write_came_closest_to_the_availability_bound() -> None:
    p = _run("sim_soak.py", "faithful", "--seeds", "2", "--chunk", "2", "--jobs", "1", "--time-limit", "5")
    assert p.returncode == 0, p.stderr
    m = re.search(r"closest to the availability bound: seed (\d+), first acks=all write ([\d.]+) s after the heal "
                  r"of a bound of ([\d.]+) s \((\d+)%\)", p.stdout)
    assert m, p.stdout
    seed, wait, bound, share = int(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4))
    # a seed of the run, judged available: its slowest partition wrote within the bound
    assert seed in (1, 2) and bound > 0 and wait <= bound and abs(share - 100 * wait / bound) <= 1
