"""Seeded generators in the spirit of Jepsen's ``jepsen.generator``.

A generator is an immutable value. ``gen.op(ctx)`` answers one of

* ``None`` – exhausted;
* ``(PENDING, gen)`` – nothing to do right now (e.g. no free process);
* ``(op, gen2)`` – an operation (a dict with at least ``f``, ``process`` and
  ``time``) and the generator to use *if* the interpreter dispatches it.

Because ``op`` does not mutate, the interpreter may ask, decide the op's time
has not come yet, handle a completion, and ask again — exactly Jepsen's
design, which is what makes phases, time limits and per-process generators
compose without races. ``gen.update(ctx, event)`` returns the generator after
an invocation or completion was seen.

Randomness comes only from ``ctx.rng`` (seeded from the test seed), so the
*choices* of a run are reproducible even though real-time interleavings are not.
"""

from .core import (
    PENDING,
    NS,
    Context,
    Gen,
    lift,
    Once,
    Fn,
    Seq,
    seq,
    Limit,
    limit,
    Repeat,
    repeat,
    TimeLimit,
    time_limit,
    Delay,
    delay,
    stagger,
    rate,
    Mix,
    mix,
    Sleep,
    sleep,
    SleepFor,
    sleep_for,
    OnThreads,
    OpFn,
    clients,
    nemesis,
    Any_,
    any_,
    Synchronize,
    phases,
    EachThread,
    each_thread,
    from_list,
)

__all__ = [
    "PENDING",
    "NS",
    "Context",
    "Gen",
    "lift",
    "Once",
    "Fn",
    "Seq",
    "seq",
    "Limit",
    "limit",
    "Repeat",
    "repeat",
    "TimeLimit",
    "time_limit",
    "Delay",
    "delay",
    "stagger",
    "rate",
    "Mix",
    "mix",
    "Sleep",
    "sleep",
    "SleepFor",
    "sleep_for",
    "OnThreads",
    "OpFn",
    "clients",
    "nemesis",
    "Any_",
    "any_",
    "Synchronize",
    "phases",
    "EachThread",
    "each_thread",
    "from_list",
]
