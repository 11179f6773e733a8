"""A line stops where there was no data: latency quantiles over buckets
with nothing completed, and the realtime lag between polls far apart, are
broken (a NaN point) rather than drawn straight across the gap."""

from __future__ import annotations

import math

from checkers.history.op import Op
from harness.report.plots import gapped, quantile_series


def test_quantiles_break_at_an_empty_bucket():
    ops = []
    for i, t in enumerate([0.5, 1.5, 2.5, 90.5, 91.5, 119.5]):  # nothing between 3 s and 90 s
        ops.append((Op(type="invoke", f="send", value=None, process=0, time=int(t * 1e9), index=2 * i),
                    Op(type="ok", f="send", value=None, process=0, time=int((t + 0.01) * 1e9), index=2 * i + 1)))
    s = quantile_series(ops, buckets=120)["send"]
    nans = [t for t, v in zip(s["t"], s["p50"]) if math.isnan(v)]
    assert len(nans) == 2 and 3 < nans[0] < 90 and 92 < nans[1] < 119
    assert sum(1 for v in s["p50"] if not math.isnan(v)) == 6


def test_a_line_breaks_where_its_points_are_far_apart():
    xs, ys = gapped([(0.0, 1), (0.1, 2), (0.2, 3), (5.0, 4), (5.1, 5)])
    assert xs == [0.0, 0.1, 0.2, 2.6, 5.0, 5.1] and math.isnan(ys[3])
    assert not any(math.isnan(y) for y in gapped([(float(i), 1) for i in range(20)])[1])
