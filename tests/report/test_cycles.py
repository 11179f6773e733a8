"""Cycles read as pictures up to a size and as text past it: a ring of
operations (txn i writes keys i and i+1, each key's log ordering txn i-1
before txn i) is one G0 cycle through every operation. At 16, 19 and 31
operations every operation's box stands apart and every edge is an arrow
with its label; past ``MAX_DRAWN`` the page gives the steps alone."""

from __future__ import annotations

import json
import math

import pytest

from checkers.check import check_history
from checkers.history.jsonl import write_jsonl
from harness.report import render_report
from harness.report.cycles import MAX_DRAWN, OpIndex, _layout, draw_cycle, render_cycles
from harness.report.mpl import plt
from tests.report.runs import ring


@pytest.mark.parametrize("n", [16, 19, 31])
def test_a_long_cycle_is_drawn_with_every_box_apart_and_every_edge_labelled(n, tmp_path, monkeypatch):
    b = ring(n)
    result = check_history(b.ops)
    (cycle,) = [e for e in result["anomalies"]["G0"] if len(e["steps"]) == n]
    drawn = {}
    real_close = plt.close

    def keep(fig):  # look at the figure before it is closed
        drawn["fig"] = fig
    monkeypatch.setattr(plt, "close", keep)
    draw_cycle("G0", cycle, OpIndex(b.ops), tmp_path / "c.png")
    monkeypatch.setattr(plt, "close", real_close)
    fig = drawn["fig"]
    ax = fig.axes[0]
    arrows = [p for p in ax.patches if type(p).__name__ == "FancyArrowPatch"]
    assert len(arrows) == n
    fig.canvas.draw()
    boxes = [t.get_bbox_patch().get_window_extent() for t in ax.texts if t.get_bbox_patch() is not None]
    labels = [t.get_window_extent() for t in ax.texts if t.get_bbox_patch() is None]
    assert len(boxes) == n and len(labels) == n
    every = boxes + labels
    for i, a in enumerate(every):  # no box or edge label covers another
        for c in every[i + 1:]:
            assert not a.overlaps(c)
    w, h = fig.get_size_inches() * fig.dpi
    assert w <= 1400 and h <= 1450
    real_close(fig)
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_neighbours_on_the_ring_are_spaced_for_their_labels():
    for n in (7, 31, MAX_DRAWN):
        pos, r = _layout(n, detailed=False)
        assert math.dist(pos[0], pos[1]) >= 1.2


def test_past_the_readable_size_a_cycle_is_its_steps_alone(tmp_path):
    n = MAX_DRAWN + 5
    b = ring(n)
    d = tmp_path / "run"
    d.mkdir()
    write_jsonl(d / "history.jsonl", b.ops)
    (d / "results.json").write_text(json.dumps(check_history(b.ops)))
    html = render_report(d).read_text()
    assert "too many to draw readably" in html
    assert len([s for s in html.split('<li><a href="timeline.html#op-')]) - 1 >= n
    assert not list(d.glob("cycle-*.png"))


def test_failing_cycles_come_before_allowed_ones():
    b = ring(3)
    result = check_history(b.ops)
    both = {**result, "anomalies": {"G1c": result["anomalies"]["G0"], "G0": result["anomalies"]["G0"]}}
    got = render_cycles(both, b.ops, None, bad={"G0"})
    assert [c["type"] for c in got][:1] == ["G0"] and got[-1]["type"] == "G1c" and not got[-1]["fails"]
