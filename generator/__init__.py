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

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

PENDING = "pending"
NS = 1_000_000_000


@dataclass
class Context:
    """What a generator may look at: the time, which worker threads are free and
    which process each runs. ``threads`` restricts the view (``clients`` /
    ``nemesis`` wrappers narrow it)."""

    time: int  # ns since the test began
    rng: random.Random
    free: frozenset[Any]  # free thread ids (ints for clients, "nemesis")
    process_of: dict[Any, Any]  # thread -> current process
    threads: frozenset[Any]  # threads visible to this generator
    state: dict[str, Any] = field(default_factory=dict)  # workload state shared with generators

    def restrict(self, pred: Callable[[Any], bool]) -> "Context":
        return replace(self, threads=frozenset(t for t in self.threads if pred(t)))

    def free_threads(self) -> list[Any]:
        return sorted((t for t in self.free if t in self.threads), key=str)

    def some_free_process(self) -> Any | None:
        ts = self.free_threads()
        if not ts:
            return None
        return self.process_of[self.rng.choice(ts)]

    def thread_of(self, process: Any) -> Any:
        for t, p in self.process_of.items():
            if p == process:
                return t
        return None


class Gen:
    """Base class: subclasses implement ``op``; ``update`` defaults to identity."""

    def op(self, ctx: Context) -> tuple[Any, "Gen"] | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        return self


def lift(x: Any) -> Gen | None:
    """Turn plain values into generators: a dict is one op, a callable is an
    infinite stream of ``fn(ctx)`` ops, a list is ``phases``-less sequence."""
    if x is None or isinstance(x, Gen):
        return x
    if isinstance(x, dict):
        return Once(x)
    if callable(x):
        return Fn(x)
    if isinstance(x, (list, tuple)):
        return Seq(tuple(lift(g) for g in x))
    raise TypeError(f"cannot make a generator from {type(x).__name__}")


def _fill(op: dict[str, Any], ctx: Context) -> dict[str, Any] | None:
    """Give an op a free process and a time, unless it names them already."""
    op = dict(op)
    if "process" not in op:
        p = ctx.some_free_process()
        if p is None:
            return None
        op["process"] = p
    else:
        t = ctx.thread_of(op["process"])
        if t not in ctx.free or t not in ctx.threads:
            return None
    op.setdefault("time", ctx.time)
    return op


@dataclass(frozen=True)
class Once(Gen):
    """Exactly one operation."""

    template: dict[str, Any]

    def op(self, ctx: Context):
        o = _fill(self.template, ctx)
        if o is None:
            return PENDING, self
        return o, None


@dataclass(frozen=True)
class Fn(Gen):
    """An infinite stream: ``fn(ctx)`` builds each op (or returns None to stop)."""

    fn: Callable[[Context], dict[str, Any] | None]

    def op(self, ctx: Context):
        if not ctx.free_threads():
            return PENDING, self
        tmpl = self.fn(ctx)
        if tmpl is None:
            return None
        o = _fill(tmpl, ctx)
        if o is None:
            return PENDING, self
        return o, self


@dataclass(frozen=True)
class Seq(Gen):
    """Generators one after another, without waiting for completions."""

    gens: tuple[Gen | None, ...]

    def op(self, ctx: Context):
        gens = self.gens
        while gens:
            g = gens[0]
            r = g.op(ctx) if g is not None else None
            if r is None:
                gens = gens[1:]
                continue
            o, g2 = r
            return o, Seq((g2,) + gens[1:])
        return None

    def update(self, ctx, event):
        if not self.gens or self.gens[0] is None:
            return self
        return Seq((self.gens[0].update(ctx, event),) + self.gens[1:])


def seq(*gens: Any) -> Gen:
    return Seq(tuple(lift(g) for g in gens))


@dataclass(frozen=True)
class Limit(Gen):
    """At most ``n`` operations."""

    n: int
    gen: Gen | None

    def op(self, ctx):
        if self.n <= 0 or self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        if o == PENDING:
            return PENDING, Limit(self.n, g2)
        return o, Limit(self.n - 1, g2)

    def update(self, ctx, event):
        return Limit(self.n, self.gen.update(ctx, event) if self.gen else None)


def limit(n: int, gen: Any) -> Gen:
    return Limit(n, lift(gen))


@dataclass(frozen=True)
class Repeat(Gen):
    """Repeat the first op of ``gen`` forever (or ``n`` times)."""

    gen: Gen
    n: int = -1

    def op(self, ctx):
        if self.n == 0:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, _ = r
        if o == PENDING:
            return PENDING, self
        return o, Repeat(self.gen, self.n - 1 if self.n > 0 else -1)


def repeat(gen: Any, n: int = -1) -> Gen:
    return Repeat(lift(gen), n)


@dataclass(frozen=True)
class TimeLimit(Gen):
    """Stop emitting ops ``dt`` seconds after the first time it is asked."""

    dt_ns: int
    gen: Gen | None
    deadline: int | None = None

    def op(self, ctx):
        if self.gen is None:
            return None
        deadline = self.deadline if self.deadline is not None else ctx.time + self.dt_ns
        if ctx.time >= deadline:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        if o != PENDING and o["time"] >= deadline:
            return None
        return o, TimeLimit(self.dt_ns, g2, deadline)

    def update(self, ctx, event):
        if self.gen is None:
            return self
        return TimeLimit(self.dt_ns, self.gen.update(ctx, event), self.deadline)


def time_limit(seconds: float, gen: Any) -> Gen:
    return TimeLimit(int(seconds * NS), lift(gen))


@dataclass(frozen=True)
class Delay(Gen):
    """Space ops at least ``dt`` apart (a rate limit: ``delay(1/rate, g)``)."""

    dt_ns: int
    gen: Gen | None
    next_time: int | None = None
    jitter: bool = False

    def op(self, ctx):
        if self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        if o == PENDING:
            return PENDING, replace(self, gen=g2)
        nt = self.next_time if self.next_time is not None else ctx.time
        o = dict(o)
        o["time"] = max(o["time"], nt)
        step = self.dt_ns
        if self.jitter:  # stagger: uniform in [0, 2dt), mean dt
            step = int(ctx.rng.random() * 2 * self.dt_ns)
        return o, replace(self, gen=g2, next_time=o["time"] + step)

    def update(self, ctx, event):
        if self.gen is None:
            return self
        return replace(self, gen=self.gen.update(ctx, event))


def delay(seconds: float, gen: Any) -> Gen:
    return Delay(int(seconds * NS), lift(gen))


def stagger(seconds: float, gen: Any) -> Gen:
    """Jepsen's stagger: random gaps with mean ``seconds``."""
    return Delay(int(seconds * NS), lift(gen), None, True)


def rate(ops_per_second: float, gen: Any) -> Gen:
    """Total rate limit across all processes, with jitter so processes don't lockstep."""
    return stagger(1.0 / ops_per_second, gen)


@dataclass(frozen=True)
class Mix(Gen):
    """Each op from a uniformly chosen generator (weights via repetition)."""

    gens: tuple[Gen, ...]

    def op(self, ctx):
        gens = [g for g in self.gens if g is not None]
        if not gens:
            return None
        order = list(range(len(gens)))
        ctx.rng.shuffle(order)
        for i in order:
            r = gens[i].op(ctx)
            if r is None:
                continue
            o, g2 = r
            if o == PENDING:
                return PENDING, self
            new = list(gens)
            new[i] = g2
            return o, Mix(tuple(new))
        return None


def mix(*gens: Any) -> Gen:
    return Mix(tuple(lift(g) for g in gens))


@dataclass(frozen=True)
class Sleep(Gen):
    """Occupy one free thread for ``dt`` seconds, recording nothing (Jepsen's
    ``sleep``): on the nemesis thread it spaces faults; in a phase of its own it
    gives the cluster time to recover."""

    dt_ns: int

    def op(self, ctx):
        p = ctx.some_free_process()
        if p is None:
            return PENDING, self
        return {"f": "sleep", "process": p, "time": ctx.time, "_sleep": self.dt_ns}, None


def sleep(seconds: float) -> Gen:
    return Sleep(int(seconds * NS))


@dataclass(frozen=True)
class OnThreads(Gen):
    """Restrict a generator to some threads (Jepsen's ``clients`` / ``nemesis``)."""

    pred: Callable[[Any], bool]
    gen: Gen | None

    def op(self, ctx):
        if self.gen is None:
            return None
        r = self.gen.op(ctx.restrict(self.pred))
        if r is None:
            return None
        o, g2 = r
        return o, OnThreads(self.pred, g2)

    def update(self, ctx, event):
        if self.gen is None:
            return self
        t = ctx.thread_of(event.get("process"))
        if t is None and event.get("process") == "nemesis":
            t = "nemesis"
        if t is not None and not self.pred(t):
            return self
        return OnThreads(self.pred, self.gen.update(ctx.restrict(self.pred), event))


def _is_client(t: Any) -> bool:
    return t != "nemesis"


def _is_nemesis(t: Any) -> bool:
    return t == "nemesis"


def clients(gen: Any) -> Gen:
    return OnThreads(_is_client, lift(gen))


def nemesis(gen: Any) -> Gen:
    return OnThreads(_is_nemesis, lift(gen))


def _soonest(results: Iterable[tuple[int, Any]]) -> tuple[tuple[dict, int, Gen] | None, bool, set[int]]:
    """Of children's ``op`` answers ``(index, answer)``: the soonest op as
    ``(op, index, next generator)`` or None, whether any child is pending,
    and the indices of exhausted children (answer None)."""
    best = None
    pending = False
    done: set[int] = set()
    for i, r in results:
        if r is None:
            done.add(i)
            continue
        o, g2 = r
        if o == PENDING:
            pending = True
            continue
        if best is None or o["time"] < best[0]["time"]:
            best = (o, i, g2)
    return best, pending, done


@dataclass(frozen=True)
class Any_(Gen):
    """The soonest op of several generators (Jepsen's ``any``): used to
    interleave the nemesis schedule with client operations."""

    gens: tuple[Gen | None, ...]

    def op(self, ctx):
        best, pending, done = _soonest((i, g.op(ctx)) for i, g in enumerate(self.gens) if g is not None)
        if best is None:
            # exhausted children are dropped so Any_ ends when all do (from
            # this pass's answers: asking again would draw on ctx.rng twice)
            live = tuple(g for i, g in enumerate(self.gens) if g is not None and i not in done)
            return (PENDING, Any_(live)) if live else None
        o, i, g2 = best
        new = list(self.gens)
        new[i] = g2
        return o, Any_(tuple(new))

    def update(self, ctx, event):
        return Any_(tuple(g.update(ctx, event) if g is not None else None for g in self.gens))


def any_(*gens: Any) -> Gen:
    return Any_(tuple(lift(g) for g in gens))


@dataclass(frozen=True)
class Synchronize(Gen):
    """Wait until every visible thread is free, then behave like ``gen``."""

    gen: Gen | None
    started: bool = False

    def op(self, ctx):
        if self.gen is None:
            return None
        if not self.started:
            if set(ctx.free) >= set(ctx.threads):
                return Synchronize(self.gen, True).op(ctx)
            return PENDING, self
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        return o, Synchronize(g2, True)

    def update(self, ctx, event):
        if self.gen is None or not self.started:
            return self
        return Synchronize(self.gen.update(ctx, event), True)


def phases(*gens: Any) -> Gen:
    """Run generators one after another, each starting only once every
    operation of the previous one has completed (Jepsen's ``phases``)."""
    return Seq(tuple(Synchronize(lift(g)) for g in gens))


@dataclass(frozen=True)
class EachThread(Gen):
    """An independent copy of a generator per thread (Jepsen's ``each-thread``):
    e.g. every client does its own final read."""

    make: Callable[[Any], Gen | None]
    gens: tuple[tuple[Any, Gen | None], ...] | None = None

    def _init(self, ctx) -> tuple[tuple[Any, Gen | None], ...]:
        if self.gens is not None:
            return self.gens
        return tuple((t, lift(self.make(t))) for t in sorted(ctx.threads, key=str))

    def op(self, ctx):
        gens = self._init(ctx)
        best, pending, _ = _soonest(
            (i, g.op(replace(ctx, threads=frozenset([t])))) for i, (t, g) in enumerate(gens) if g is not None
        )
        if best is None:
            return (PENDING, EachThread(self.make, gens)) if pending else None
        o, i, g2 = best
        new = list(gens)
        new[i] = (new[i][0], g2)
        return o, EachThread(self.make, tuple(new))

    def update(self, ctx, event):
        gens = self._init(ctx)
        t = ctx.thread_of(event.get("process"))
        out = []
        for th, g in gens:
            if g is not None and th == t:
                g = g.update(replace(ctx, threads=frozenset([th])), event)
            out.append((th, g))
        return EachThread(self.make, tuple(out))


def each_thread(make: Callable[[Any], Any]) -> Gen:
    return EachThread(make)


def from_list(ops: Iterable[dict[str, Any]]) -> Gen:
    return Seq(tuple(Once(o) for o in ops))

