"""The story at the top of an invalid run's page says what a person looks
for, checked against the run's own files: a real simulator run of
pre-KIP-101 followers under kills loses acknowledged writes, and the page
names the lost writes (key, offset, value), when each was acknowledged
(the history's time of its completion), the truncation and the election
that removed them (node, offset, epoch: from the nodes' traces), the
variant, and a replay command that replays the run byte for byte. An
unknown run says why, from what results.json holds."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.history.jsonl import read_jsonl
from harness.report import render_report
from harness.report.replay import replay_args
from harness.report.traces import read_traces

ROOT = Path(__file__).resolve().parents[2]
#: kills with pre-KIP-101 followers: seed 3 loses more than half its acks=all writes
KIP101_RUN = ["--variant", "kip101=off", "--nemesis", "kill", "--time-limit", "10"]


def kraftwerk(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def sim_run(out: Path, seed: int, *flags: str) -> Path:
    r = kraftwerk("sim", "--seed", str(seed), "--out", str(out), "--json", "--no-report", *flags)
    assert r.returncode in (0, 1), r.stderr[-600:]
    return Path(json.loads(r.stdout)["run_dir"])


@pytest.fixture(scope="module")
def lossy(tmp_path_factory) -> Path:
    return sim_run(tmp_path_factory.mktemp("story"), 3, *KIP101_RUN)


def story_of(html: str) -> list[tuple[str, str]]:
    """(label, text) of each story line, tags dropped."""
    dl = re.search(r'<dl id="story">(.*?)</dl>', html, re.S).group(1)
    lines = re.findall(r'<div class="story-line story-(\w+)"><dt>(.*?)</dt><dd>(.*?)</dd></div>', dl, re.S)
    return [(kind, re.sub(r"<[^>]+>", "", text).replace("&#39;", "'")) for kind, _, text in lines]


def test_the_story_names_the_lost_writes_their_acknowledgement_and_what_removed_them(lossy):
    results = json.loads((lossy / "results.json").read_text())
    d = results["durability"]["acks=all"]
    assert d["lost"] > 10, "the scenario should lose acknowledged writes"
    html = render_report(lossy, plots=False).read_text()
    story = story_of(html)
    text = "\n".join(t for _, t in story)
    assert f"{d['lost']} of {d['acked']} acknowledged acks=all writes" in text
    ops = {o.index: o for o in read_jsonl(lossy / "history.jsonl")}
    first = d["lost_examples"][0]
    acked_at = ops[first["op"]].time / 1e9
    assert (f"{first['key']} offset {first['offset']} (value {first['value']}), acknowledged at {acked_at:.3f} s"
            in text)
    # the removal, as the traces recorded it: a truncation past the lost offset, and the leader elected without it
    view = read_traces(lossy, list(ops.values()), json.loads((lossy / "test.json").read_text()))
    cut = next(tr for tr in view.truncations if tr["tp"] == first["key"] and tr["to"] <= first["offset"]
               and tr["t"] >= acked_at)
    assert f"{cut['t']:.3f} s: {cut['name']} truncated {first['key']} to offset {cut['to']}" in text
    leader = next(ld for ld in view.leaders if ld["tp"] == first["key"] and ld["t"] >= acked_at
                  and ld["leo"] <= first["offset"])
    assert re.search(rf"{leader['node']} was elected leader of {first['key']} in epoch {leader['leader_epoch']} "
                     rf"\([a-z-]+ election\) with its log ending at offset {leader['leo']}", text)
    assert "kip101=off (KIP-101 off" in text
    kinds = [k for k, _ in story]
    assert kinds.index("lost") < kinds.index("cause") < kinds.index("config") < kinds.index("replay")


def test_the_replay_command_replays_the_run_byte_for_byte(lossy, tmp_path):
    html = render_report(lossy, plots=False).read_text()
    (replay,) = [t for k, t in story_of(html) if k == "replay"]
    test = json.loads((lossy / "test.json").read_text())
    assert replay == shlex.join(replay_args(test, lossy))
    assert replay.startswith("kraftwerk sim --seed 3 ") and "--variant kip101=off" in replay
    args = shlex.split(replay)[2:]
    again = kraftwerk("sim", *args, "--out", str(tmp_path), "--json", "--no-report")
    res = json.loads(again.stdout)
    orig = json.loads((lossy / "results.json").read_text())
    assert res["stats"]["history_sha256"] == orig["stats"]["history_sha256"]


def test_an_invariant_is_told_at_its_time_in_seconds_with_the_election_before_it(lossy):
    results = json.loads((lossy / "results.json").read_text())
    html = render_report(lossy, plots=False).read_text()
    v = next(x for x in results["invariants"]["violations"] if x["kind"] == "committed-truncated")
    # the anomalies table gives the trace time in seconds, the node by name, never the raw ms
    assert f"<b>at</b> {v['t'] / 1000:.3f} s" in html
    assert f"<b>t</b> {v['t']}<" not in html


def test_an_unknown_run_says_why_from_its_results(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "history.jsonl").write_text("")
    (d / "test.json").write_text(json.dumps({"name": "queue", "runtime": "sim", "seed": 4}))
    (d / "results.json").write_text(json.dumps({
        "valid": "unknown", "unknown_cause": "the final reads of t0-1 never completed",
        "checkers": {"final-reads": {"valid": "unknown", "incomplete_keys": ["t0-1"], "cause": "timeout"}}}))
    story = story_of(render_report(d, plots=False).read_text())
    text = "\n".join(t for _, t in story)
    assert "the final reads of t0-1 never completed" in text
    assert "the final-reads checker could not decide: timeout; no final read completed on t0-1" in text
    assert ("replay", "kraftwerk sim --seed 4") in story
    assert not any(k == "shrink" for k, _ in story)  # shrink takes invalid runs only


def test_a_valid_run_has_no_story(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "history.jsonl").write_text("")
    (d / "results.json").write_text(json.dumps({"valid": True}))
    assert '<dl id="story">' not in render_report(d, plots=False).read_text()


def test_the_story_fits_the_first_screen_at_1400_by_900(lossy):
    """In the system chromium: every fact of the story (the loss, the
    truncation, the election, the variant, the replay) lies within the
    first 900 pixels of the page."""
    from tests.needs import need_program
    from tests.report.site_fixtures import chromium_context

    need_program("chromium")
    index = render_report(lossy)
    with chromium_context() as ctx:
        page = ctx.new_page()
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(index.as_uri())
        facts = {  # each line's text (its <dd>; the line itself lays out as a grid row, with no box)
            "lost": page.locator(".story-lost dd", has_text="acknowledged acks=all writes").first,
            "first lost write": page.locator(".story-lost dd", has_text="acknowledged at").first,
            "truncation": page.locator(".story-cause dd", has_text="truncated").first,
            "election": page.locator(".story-cause dd", has_text="was elected leader").first,
            "variant": page.locator(".story-config dd", has_text="kip101=off").first,
            "replay": page.locator(".story-replay code", has_text="kraftwerk sim --seed 3").first,
        }
        for name, loc in facts.items():
            box = loc.bounding_box()
            assert box is not None, f"{name} is not on the page"
            assert box["y"] + box["height"] <= 900, f"{name} ends at {box['y'] + box['height']:.0f} px"
