"""`kraftwerk torture`: seeds within a budget held against expected verdicts,
JUnit XML with one testcase per expectation, a surprise exits non-zero and
names the run with a command that replays it."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from harness.campaign.torture import Expectation, parse_expectations
from harness.cli.torture import parse_budget
from harness.errors import UsageError
from tests.campaign.test_campaign import ROOT, kraftwerk

EXPECT = """\
- name: faithful-short
  expect: valid
  settings: {nemesis: kill, time-limit: 6, nemesis-interval: 2}
- name: kip101-caught
  expect: caught
  within: 4
  settings: {variant: kip101=off, scenario: leader-churn, nemesis: kill, time-limit: 20, nemesis-interval: 3}
"""

#: the faithful protocol expected to be caught: an expectation broken on purpose
BROKEN = """\
- name: faithful-expected-caught
  expect: caught
  within: 1
  settings: {nemesis: kill, time-limit: 6, nemesis-interval: 2}
- name: kip101-expected-valid
  expect: valid
  settings: {variant: kip101=off, scenario: leader-churn, nemesis: kill, time-limit: 20, nemesis-interval: 3}
"""


def test_budgets_are_durations() -> None:
    assert parse_budget("45m") == 2700 and parse_budget("90s") == 90 and parse_budget("2h") == 7200
    for bad in ("", "0m", "soon", "-3m"):
        with pytest.raises(UsageError):
            parse_budget(bad)


def test_a_caught_expectation_is_undecided_until_its_seed_count() -> None:
    [e] = parse_expectations([{"name": "x", "expect": "caught", "within": 3, "settings": {}}])
    e.seeds_run = 2
    assert e.undecided() and not e.surprised()
    e.seeds_run = 3
    assert e.surprised()
    e.invalid.append((3, "/r"))
    assert e.met() and not e.surprised()


def test_a_valid_expectation_with_one_invalid_run_is_a_surprise() -> None:
    e = Expectation("f", "valid", "sim", {})
    e.seeds_run = 10
    assert e.met()
    e.invalid.append((7, "/r"))
    assert e.surprised()


def test_expectations_hold_and_junit_has_one_testcase_each(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text(EXPECT)
    junit = tmp_path / "junit.xml"
    r = kraftwerk("torture", "--budget", "1s", "--expect", str(tmp_path / "e.yaml"), "--junit", str(junit),
                  "--out", str(tmp_path / "out"), "--jobs", "2")
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "0" and suite.get("tests") == "2"
    cases = {tc.get("name"): tc for tc in suite.iter("testcase")}
    assert set(cases) == {"faithful-short", "kip101-caught"}
    assert all(tc.find("failure") is None for tc in cases.values())
    assert "2 seeds, 0 invalid" in cases["faithful-short"].find("system-out").text


def test_a_broken_expectation_exits_1_and_names_a_run_that_replays(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text(BROKEN)
    junit = tmp_path / "junit.xml"
    r = kraftwerk("torture", "--budget", "1s", "--expect", str(tmp_path / "e.yaml"), "--junit", str(junit),
                  "--out", str(tmp_path / "out"), "--jobs", "2")
    assert r.returncode == 1
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "2"
    failures = {tc.get("name"): tc.find("failure") for tc in suite.iter("testcase")}
    assert "not caught in 2 seeds" in failures["faithful-expected-caught"].get("message")
    msg = failures["kip101-expected-valid"].get("message")
    assert "is invalid" in msg and str(tmp_path / "out") in msg  # names the run directory
    replays = [ln.split("replay: ", 1)[1].split("   #")[0] for ln in r.stdout.splitlines() if "replay: " in ln]
    assert replays and replays[0].startswith("kraftwerk sim --seed ")
    argv = shlex.split(replays[0])[1:] + ["--out", str(tmp_path / "replay"), "--json"]
    again = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *argv],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert again.returncode == 1  # the replayed seed is invalid again
