"""Faults look the same in every run: a kind has one colour in every plot
and page whatever other faults the run made or in what order; each
interval names its targets; a fault the nemesis skipped is not drawn as an
interval."""

from __future__ import annotations

import re

from checkers.history.op import Op
from harness.report.faults import KIND_COLOURS, fault_intervals, targets_label
from harness.report.mpl import plt
from harness.report.plots import shade


def nemesis(*faults: tuple[str, dict, float, float]) -> list[Op]:
    """start/stop pairs (invocation, completion) for (op name, value, start s, stop s)."""
    events = []
    for f, value, t0, t1 in faults:
        events += [(t0, f"start-{f}", {"fault": value["fault"]}), (t0, f"start-{f}", value),
                   (t1, f"stop-{f}", {"fault": value["fault"]}), (t1, f"stop-{f}", {"fault": value["fault"]})]
    events.sort(key=lambda e: e[0])
    return [Op(type="info", f=f, value=v, process="nemesis", time=int(t * 1e9), index=i)
            for i, (t, f, v) in enumerate(events)]


KILL = ("kill", {"fault": "kill:one", "target": "one", "nodes": ["n2"]}, 1.0, 2.0)
PAUSE = ("pause", {"fault": "pause:minority", "target": "minority", "nodes": ["n1", "c3"]}, 3.0, 4.0)
CLOCK = ("clock", {"fault": "clock", "target": "one", "nodes": ["c1"], "offsets_ms": {"c1": -5072}}, 5.0, 6.0)
STROBE = ("clock", {"fault": "clock-strobe", "target": "one", "nodes": ["n3"]}, 7.0, 8.0)
CUT = ("partition", {"fault": "partition:isolate-one", "isolated": ["n3"],
                     "cut": [["n3", "n1"], ["n1", "n3"], ["n3", "n2"], ["n2", "n3"]]}, 9.0, 10.0)


def shaded_colours(ops: list[Op]) -> dict[str, str]:
    """Each kind's band colour as matplotlib drew it."""
    from matplotlib.colors import to_hex

    fig, ax = plt.subplots()
    ivs = fault_intervals(ops)
    shade(ax, ivs, 12.0)
    got = {}
    for patch, iv in zip([p for p in ax.patches], [iv for iv in ivs if not iv.skipped]):
        got[iv.kind] = to_hex(patch.get_facecolor(), keep_alpha=False)
    plt.close(fig)
    return got


def test_a_fault_kind_has_one_colour_in_two_runs_with_different_faults():
    one = shaded_colours(nemesis(KILL, PAUSE, CLOCK))
    other = shaded_colours(nemesis(CUT, STROBE, KILL))  # kill comes last here, among other kinds
    assert one["kill"] == other["kill"] == KIND_COLOURS["kill"]
    assert len({one["kill"], one["pause"], one["clock"], other["clock-strobe"], other["partition"]}) == 5


def test_the_kinds_of_the_table_are_distinct_colours():
    assert len(set(KIND_COLOURS.values())) == len(KIND_COLOURS)


def test_targets_are_named_and_a_partition_by_its_sides():
    assert targets_label(KILL[1]) == "n2"
    assert targets_label(CLOCK[1]) == "c1 -5072ms"
    assert targets_label(CUT[1]) == "isolated n3"
    halves = {"fault": "partition:halves", "cut": [[a, b] for a in ("n1", "n2") for b in ("n3", "c1")] +
              [[b, a] for a in ("n1", "n2") for b in ("n3", "c1")]}
    assert targets_label(halves) == "c1 n3 | n1 n2"
    bridge = {"fault": "partition:bridge", "left": ["c1", "n1"], "right": ["c3", "n2"], "bridge": "n3", "cut": []}
    assert targets_label(bridge) == "c1 n1 | c3 n2 (bridge n3)"


def test_a_skipped_fault_is_a_moment_not_an_interval():
    skipped = ("pause", {"fault": "pause:out-of-sync", "skipped": "no partition has out of sync nodes",
                         "nodes": []}, 3.0, 6.0)
    ivs = fault_intervals(nemesis(KILL, skipped))
    (iv,) = [iv for iv in ivs if iv.kind == "pause"]
    assert iv.skipped == "no partition has out of sync nodes" and iv.stop == iv.start
    fig, ax = plt.subplots()
    shade(ax, ivs, 12.0)
    assert len(ax.patches) == 1  # the kill's band; the pause is a dashed line
    (line,) = ax.lines  # the skipped pause: one dashed line at its moment
    assert line.get_xdata()[0] == 3.0 and line.get_linestyle() == "--"
    plt.close(fig)


def test_the_page_and_the_timeline_use_the_kinds_colours(tmp_path):
    import json

    from checkers.history.jsonl import write_jsonl
    from harness.report import render_report

    pages = []
    for name, faults in (("a", (KILL, PAUSE)), ("b", (PAUSE, CUT, KILL))):
        d = tmp_path / name
        d.mkdir()
        write_jsonl(d / "history.jsonl", nemesis(*faults))
        (d / "results.json").write_text(json.dumps({"valid": True}))
        render_report(d, plots=False)
        pages.append((d / "index.html").read_text() + (d / "timeline.html").read_text())
    for html in pages:
        legend = dict(re.findall(r'data-kind="([a-z-]+)" style="background: (#[0-9a-f]+)"', html))
        assert legend["kill"] == KIND_COLOURS["kill"] and legend["pause"] == KIND_COLOURS["pause"]
        assert f'style="background: {KIND_COLOURS["kill"]}; top:' in html  # the timeline's shading
