"""The CI workflows run commands that exist.

A workflow is only read by the CI service, so a renamed script or a removed
subcommand would break it silently until the next scheduled run. Every
``run:`` step is parsed here: each script it calls must exist in the
repository, and each ``kraftwerk`` subcommand it names must answer ``--help``.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def run_steps(workflow: Path) -> list[tuple[str | None, str]]:
    doc = yaml.safe_load(workflow.read_text())
    steps = []
    for job in doc["jobs"].values():
        for step in job["steps"]:
            if "run" in step:
                steps.append((step.get("working-directory"), step["run"]))
    return steps


def commands(script: str) -> list[list[str]]:
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        for part in line.replace("&&", ";").replace("||", ";").split(";"):
            words = shlex.split(part, comments=True)
            if words:
                out.append(words)
    return out


def test_the_nightly_workflow_is_scheduled_and_keeps_junit_and_reports() -> None:
    nightly = ROOT / ".github" / "workflows" / "nightly.yml"
    doc = yaml.safe_load(nightly.read_text())
    assert doc.get("on", doc.get(True))["schedule"]
    runs = " ".join(run for _, run in run_steps(nightly))
    assert "kraftwerk torture" in runs and "--junit" in runs
    uploads = [s for j in doc["jobs"].values() for s in j["steps"] if "upload-artifact" in str(s.get("uses"))]
    assert uploads and "junit.xml" in uploads[0]["with"]["path"]


def test_the_nightly_workflow_replays_every_finding_on_kafka_to_its_verdict_class() -> None:
    """Issue: every finding ships its schedule, and the nightly run replays each."""
    runs = [run for _, run in run_steps(ROOT / ".github" / "workflows" / "nightly.yml")]
    replays = [r for r in runs if "tests/kafka/test_findings_slow.py" in r]
    assert replays and "-m slow" in replays[0]


def test_the_ci_workflow_runs_the_readme_test_command_on_push() -> None:
    ci = ROOT / ".github" / "workflows" / "ci.yml"
    doc = yaml.safe_load(ci.read_text())
    triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert "push" in triggers
    assert any("bash .ci/run" in run for _, run in run_steps(ci))


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_command_a_workflow_runs_exists(workflow: Path) -> None:
    for workdir, script in run_steps(workflow):
        base = ROOT if workdir in (None, "main") else ROOT / workdir
        for words in commands(script):
            if words[0] == "bash" and len(words) > 1:
                assert (base / words[1]).is_file(), f"{workflow.name}: {words[1]} does not exist"
            elif words[0].startswith(("scripts/", ".ci/", "bench/")) or words[0].endswith(".yaml"):
                assert (base / words[0]).is_file(), f"{workflow.name}: {words[0]} does not exist"
            elif words[0].endswith("kraftwerk"):
                sub = [w for w in words[1:3] if not w.startswith("-")][:1]
                files = [w for w in words if w.endswith(".yaml")]
                for f in files:
                    assert (base / f).is_file(), f"{workflow.name}: {f} does not exist"
                r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *sub, "--help"],
                                   capture_output=True, text=True, timeout=60, cwd=ROOT)
                assert r.returncode == 0, f"{workflow.name}: kraftwerk {' '.join(sub)} does not exist: {r.stderr}"
