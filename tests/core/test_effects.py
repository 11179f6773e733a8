"""Effects spell out their ``__init__`` (speed: see reference_impl.core.effects);
each must stay the one a dataclass would generate."""

from __future__ import annotations

import dataclasses
import typing

from reference_impl.core import effects
from reference_impl.core.effects import Fsync, Halt, Timer, TraceEvent

# one well-typed, distinct value per field name (a compiled class checks types)
SAMPLE = {"dst": 3, "msg": Timer(7), "at": 5, "log": "t-0", "entries": (1, 2), "offset": 11, "start_offset": 13,
          "path": "a/b", "data": {"x": 1}, "target": "t-1", "kind": "hw", "reason": "why"}


def test_every_effect_constructor_takes_exactly_its_fields_in_order():
    classes = typing.get_args(effects.Effect)
    assert len(classes) == 11
    for cls in classes:
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
