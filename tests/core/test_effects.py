"""Effects spell out their ``__init__`` (speed: see reference_impl.core.effects);
each must stay the one a dataclass would generate."""

from __future__ import annotations

import dataclasses
import typing

from reference_impl.core import effects
from reference_impl.core.effects import AppendTrace, Fsync, Halt, HwTrace, ProduceTrace, Timer, TraceEvent

# one well-typed, distinct value per field name (a compiled class checks types)
SAMPLE = {"dst": 3, "msg": Timer(7), "at": 5, "log": "t-0", "entries": (1, 2), "offset": 11, "start_offset": 13,
          "path": "a/b", "data": {"x": 1}, "target": "t-1", "kind": "hw", "reason": "why"}


def test_every_effect_constructor_takes_exactly_its_fields_in_order():
    classes = typing.get_args(effects.Effect)
    assert len(classes) == 11
    for cls in classes:
        if cls is TraceEvent:
            continue  # not a dataclass: its data may be built lazily (the test below)
        names = [f.name for f in dataclasses.fields(cls)]
        args = [SAMPLE[n] for n in names]
        # by position and by keyword (a compiled __init__ has no signature to inspect)
        for made in (cls(*args), cls(**dict(zip(names, args)))):
            assert [getattr(made, n) for n in names] == args, cls.__name__
            assert made == cls(*args)  # the dataclass's own __eq__, over the same fields


def test_effect_defaults_are_the_documented_ones():
    assert Fsync().target is None  # every log and file of the node
    assert Halt().reason == "controlled shutdown complete"
    a, b = TraceEvent("x"), TraceEvent("x")
    assert a.data == {} and a.data is not b.data  # a fresh dict each, never shared


def test_trace_event_takes_kind_and_data_and_compares_them():
    """TraceEvent is no dataclass (its hot subclasses build ``data`` on first
    read) but keeps the dataclass's constructor and equality."""
    for made in (TraceEvent("hw", {"x": 1}), TraceEvent(kind="hw", data={"x": 1})):
        assert (made.kind, made.data) == ("hw", {"x": 1})
        assert made == TraceEvent("hw", {"x": 1}) and made != TraceEvent("hw", {"x": 2})
        assert made != TraceEvent("isr", {"x": 1})


def test_typed_trace_events_read_as_the_dicts_the_core_built_before():
    """AppendTrace, HwTrace and ProduceTrace (the events of every replicated
    write) carry typed fields; their ``data`` is the dict the core built
    before, key for key and in the same order (partition_state._append_trace
    and _hw_trace, purgatory.produce_done_into at 52a3d67), so trace files
    keep their bytes; and each equals the plain TraceEvent of that dict."""
    epochs = [[3, 10], [4, 12]]
    cases = [
        (AppendTrace(10, 5, 4, epochs, 15, "follower", "t-0"), "append",
         {"base": 10, "count": 5, "epoch": 4, "epochs": epochs, "leo": 15, "role": "follower", "tp": "t-0"}),
        (HwTrace(12, 15, "leader", "t-1"), "hw", {"hw": 12, "leo": 15, "role": "leader", "tp": "t-1"}),
        (ProduceTrace("t-2", -1, 0, 7, 3), "produce", {"tp": "t-2", "acks": -1, "error": 0, "base": 7, "count": 3}),
    ]
    for ev, kind, data in cases:
        assert isinstance(ev, TraceEvent) and ev.kind == kind
        assert list(ev.data.items()) == list(data.items())
        assert ev.data is ev.data  # built once: a runtime that stamps it in place keeps the stamp
        assert ev == TraceEvent(kind, dict(data))
