"""The generator library (``generator``'s one module, so the accelerator can
compile it: reference_impl.accel). See the package's docstring."""

from __future__ import annotations

import random
from typing import AbstractSet, Any, Callable, Final, Iterable, Optional, Tuple

try:  # the accelerator compiles this module (reference_impl.accel); then its
    # Gen may still be subclassed by interpreted generators (nemesis, workloads)
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover - mypy is optional (the accel extra)
    def mypyc_attr(*attrs: str, **kwattrs: object) -> Any:  # type: ignore[misc]
        return lambda cls: cls

#: Final: compiled, a constant is a static, where a plain global was a
#: lookup in the module's dict at every use (every level of every ask)
PENDING: Final = "pending"
NS: Final = 1_000_000_000

#: what ``Gen.op`` answers: None (exhausted), ``(PENDING, gen)`` or ``(op,
#: gen2)``. Typed as a tuple, not Any: compiled, taking apart an untyped
#: answer went through Python's iterator protocol at every level of every ask
Answer = Optional[Tuple[Any, Optional["Gen"]]]


#: memo of pure functions of frozensets the interpreters hand over again and
#: again (the same objects while nothing changes, so their hash is cached):
#: each ask of a generator restricts the threads and lists the free ones
_MEMO: dict[Any, Any] = {}
_MEMO_MAX: Final = 4096


#: pred -> (threads, the threads it keeps, those it leaves out) of the last :meth:`Context.restrict`,
#: matched by identity: the interpreter hands the same frozenset on every ask,
#: but a memo entry made by an earlier run in the process (an earlier seed)
#: holds an equal, not identical, one, and comparing the two element by
#: element cost ~3,000 instructions an ask
_LAST_VIEW: dict[Any, tuple[frozenset[Any], frozenset[Any], frozenset[Any]]] = {}


def _pending(o: Any) -> bool:
    """Whether a generator's answer is ``PENDING`` (not an op): the type
    first, as an op (a dict) compared with the string took the slow way
    through both types' comparisons, at every level of every ask."""
    return isinstance(o, str) and o == PENDING


def _remember(key: Any, value: Any) -> Any:
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    _MEMO[key] = value
    return value


class _Bits:
    """The ``getrandbits`` and ``random`` of the rng drawn from last, bound
    once (:meth:`of`): a run draws from one rng several times an operation,
    and compiled, each ``rng.getrandbits`` looked the method up by name. The
    rng is held (not its id), so a new rng is never taken for the old one."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.getrandbits: Callable[[int], int] = rng.getrandbits
        self.random: Callable[[], float] = rng.random

    def of(self, rng: random.Random) -> "_Bits":
        """These methods bound to ``rng``."""
        if self.rng is not rng:
            self.rng = rng
            self.getrandbits = rng.getrandbits
            self.random = rng.random
        return self


#: bound to a placeholder rng until the first draw binds the run's own
_BITS: Final = _Bits(random.Random(0))


def _random(rng: random.Random) -> float:
    """``rng.random()``, the method bound once per rng (:class:`_Bits`):
    a rate-limited load draws a gap on every operation."""
    return _BITS.of(rng).random()


def randbelow(rng: random.Random, n: int) -> int:
    """``rng.randrange(n)`` (``n > 0``), drawn exactly as CPython draws it
    (``_randbelow_with_getrandbits``), without its interpreted calls."""
    k = n.bit_length()
    fn = _BITS.of(rng).getrandbits
    r = fn(k)
    while r >= n:
        r = fn(k)
    return r


def _free_of_view(wider: list[Any], out: frozenset[Any], free: AbstractSet[Any]) -> list[Any] | None:
    """The free threads of a view from those of a wider one (``wider``,
    sorted), where ``out`` are the wider view's threads this one leaves
    out: ``wider`` itself when none of them is free, ``wider`` less its
    last entries when the free ones are all there (the clients' view of a
    run with faults: the nemesis thread sorts after every client's), else
    None (listed when asked)."""
    m = 0
    for t in out:
        if t in free:
            m += 1
    if m == 0:
        return wider
    n = len(wider)
    if m > n:
        return None
    for j in range(n - m, n):
        if wider[j] not in out:
            return None
    return wider[:n - m]


def _order(threads: frozenset[Any]) -> list[Any]:
    """``threads`` sorted by name, as :meth:`Context.free_threads` lists them."""
    got = _MEMO.get(threads)
    if got is None:
        got = _remember(threads, sorted(threads, key=str))
    return got


class Context:
    """What a generator may look at: the time, which worker threads are free and
    which process each runs. ``threads`` restricts the view (``clients`` /
    ``nemesis`` wrappers narrow it). ``thread_of``, if the interpreter keeps
    one, maps each process to its thread (else it is searched for).

    A plain class with slots rather than a dataclass: every ask of a
    generator builds a few (each ``clients``/``nemesis`` wrapper narrows
    the view), and ``dataclasses.replace`` was a fifth of an ask.

    ``free_sorted``, if the interpreter keeps one, is :meth:`free_threads`
    of this view made already (the interpreter keeps it up to date as
    threads are taken and freed, where listing it anew took a test of every
    thread on every ask); it must not change after it is handed over.

    ``free`` is a set of thread ids, read only. The interpreters hand a
    context to one ask (or one update) and take or free no thread until it
    has answered, so the virtual-time interpreter hands its own live set:
    a frozen copy of it per ask was ~1,700 instructions an operation. A
    generator must not keep a context (or its ``free``) past its answer."""

    __slots__ = ("time", "rng", "free", "process_of", "threads", "state", "_thread_of", "_free_sorted",
                 "_wider_sorted")

    def __init__(self, time: int, rng: random.Random, free: AbstractSet[Any], process_of: dict[Any, Any],
                 threads: frozenset[Any], state: dict[str, Any] | None = None,
                 thread_of: dict[Any, Any] | None = None, free_sorted: list[Any] | None = None) -> None:
        self.time = time  # ns since the test began
        self.rng = rng
        self.free = free  # free thread ids (ints for clients, "nemesis")
        self.process_of = process_of  # thread -> current process
        self.threads = threads  # threads visible to this generator
        self.state = state if state is not None else {}  # workload state shared with generators
        self._thread_of = thread_of
        self._free_sorted: list[Any] | None = free_sorted
        #: the free threads of a wider view, sorted (a restricted view's are among them)
        self._wider_sorted: list[Any] | None = None

    def __repr__(self) -> str:
        return f"Context(time={self.time}, free={sorted(self.free, key=str)}, threads={sorted(self.threads, key=str)})"

    def with_threads(self, threads: frozenset[Any]) -> "Context":
        return Context(self.time, self.rng, self.free, self.process_of, threads, self.state, self._thread_of)

    def restrict(self, pred: Callable[[Any], bool]) -> "Context":
        """The view of the threads ``pred`` keeps. A view that keeps every
        thread is this context itself (the clients' view of a run without
        faults, asked on every operation: a copy of it cost an allocation
        and nine fields)."""
        threads = self.threads
        last = _LAST_VIEW.get(pred)
        got: frozenset[Any]
        out: frozenset[Any]
        if last is not None and last[0] is threads:
            got, out = last[1], last[2]
        else:
            key = (threads, pred)
            memo = _MEMO.get(key)
            if memo is None:
                memo = _remember(key, frozenset(t for t in threads if pred(t)))
            # all kept: this very set (a memo made by an earlier run holds an equal one)
            got = threads if len(memo) == len(threads) else memo
            out = threads - got
            if len(_LAST_VIEW) >= 64:  # preds made on the fly (lambdas) must not pile up
                _LAST_VIEW.clear()
            _LAST_VIEW[pred] = (threads, got, out)
        if got is threads:
            return self  # the same view: a context is read only (its lazily listed free threads the same)
        view = Context(self.time, self.rng, self.free, self.process_of, got, self.state, self._thread_of)
        wider = self._free_sorted
        if wider is not None and len(out) < len(wider):  # else listing anew costs less
            view._free_sorted = _free_of_view(wider, out, self.free)
        if view._free_sorted is None:
            view._wider_sorted = wider if wider is not None else self._wider_sorted
        return view

    def free_threads(self) -> list[Any]:
        """The free threads this view sees, sorted by name (the caller must
        not change the list)."""
        fs = self._free_sorted
        if fs is None:
            threads = self.threads
            wider = self._wider_sorted
            if wider is not None and len(wider) < len(threads):
                fs = [t for t in wider if t in threads]
            else:
                free = self.free
                fs = [t for t in _order(threads) if t in free]
            self._free_sorted = fs
        return fs

    def some_free_process(self) -> Any | None:
        ts = self.free_threads()
        if not ts:
            return None
        return self.process_of[ts[randbelow(self.rng, len(ts))]]

    def thread_of(self, process: Any) -> Any:
        index = self._thread_of
        if index is not None:
            return index.get(process)
        for t, p in self.process_of.items():
            if p == process:
                return t
        return None


@mypyc_attr(allow_interpreted_subclasses=True)
class Gen:
    """Base class: subclasses implement ``op``; ``update`` defaults to identity.

    A generator is an immutable value by convention: the classes here set
    their fields in ``__init__`` and never after. They are plain classes,
    not frozen dataclasses: compiled (reference_impl.accel), constructing a
    frozen dataclass cost ~5,000 instructions (its fields set through
    ``object.__setattr__``), and an ask builds several generators."""

    def op(self, ctx: Context) -> Answer:  # pragma: no cover - abstract
        raise NotImplementedError

    def is_inert(self) -> bool:
        """Whether :meth:`update` would return this generator whatever the
        event (no generator below it looks at events): the interpreters
        skip the update then (two walks of the tree per operation, each
        building views of the context, for nothing). Subclasses whose
        update does something say so."""
        return True

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


def _fill(op: dict[str, Any], ctx: Context, own: bool = False) -> dict[str, Any] | None:
    """Give an op a free process and a time, unless it names them already:
    a copy of it, or (``own``: an :class:`OpFn`'s op, new and the caller's
    own) the op itself."""
    if not own:
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
    if "time" not in op:  # setdefault's effect; compiled, it boxed the time and called by name
        op["time"] = ctx.time
    return op


@mypyc_attr(allow_interpreted_subclasses=True)
class OpFn:
    """An op function (what :class:`Fn` and a rate's mix call, ``fn(ctx)``)
    whose every op is a new dict, which the caller may fill in place: a
    generator fills it (:func:`_fill`) rather than a copy of it, where the
    copy of an op the function had just made was a dict made and dropped
    per operation. The workloads' op builders are these (compiled or not:
    interpreted workloads may subclass it too).

    ``placed``: every op it returns names a process (``process``) whose
    thread is free in the view it was asked with, and a time (``time``):
    filling it would change and refuse nothing, so the generator takes it
    as it is (the queue workload's sends pick their thread among the free
    ones: the fill's lookups and tests were ~900 instructions a send)."""

    placed: bool = False

    def __call__(self, ctx: Context) -> dict[str, Any] | None:  # pragma: no cover - abstract
        raise NotImplementedError


class Once(Gen):
    """Exactly one operation."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.template = template

    def __repr__(self) -> str:
        return f"Once({self.template!r})"

    def op(self, ctx: Context) -> Answer:
        o = _fill(self.template, ctx)
        if o is None:
            return PENDING, self
        return o, None


class Fn(Gen):
    """An infinite stream: ``fn(ctx)`` builds each op (or returns None to stop)."""

    def __init__(self, fn: Callable[[Context], dict[str, Any] | None]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"Fn({self.fn!r})"

    def op(self, ctx: Context) -> Answer:
        if not ctx.free_threads():
            return PENDING, self
        fn = self.fn
        tmpl = fn(ctx)
        if tmpl is None:
            return None
        o = tmpl if isinstance(fn, OpFn) and fn.placed else _fill(tmpl, ctx, isinstance(fn, OpFn))
        if o is None:
            return PENDING, self
        return o, self


class Seq(Gen):
    """Generators one after another, without waiting for completions.

    Kept as the current generator (``head``) and those after it (``rest``,
    shared by every successor until the head is exhausted): each ask's
    successor was a new tuple made of the head and a slice of the rest, on
    every operation of a run (its phases are a Seq). ``gens`` spells them
    as one tuple again."""

    def __init__(self, gens: tuple[Gen | None, ...]) -> None:
        self.head: Gen | None = gens[0] if gens else None
        self.rest: tuple[Gen | None, ...] = gens[1:]
        self.empty = not gens

    @property
    def gens(self) -> tuple[Gen | None, ...]:
        return () if self.empty else (self.head,) + self.rest

    def __repr__(self) -> str:
        return f"Seq({self.gens!r})"

    def op(self, ctx: Context) -> Answer:
        if self.empty:
            return None
        g = self.head
        rest = self.rest
        while True:
            r = g.op(ctx) if g is not None else None
            if r is not None:
                return r[0], _seq(r[1], rest)
            if not rest:
                return None
            g = rest[0]
            rest = rest[1:]

    def is_inert(self) -> bool:
        g = self.head
        return g is None or g.is_inert()

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        g = self.head
        if g is None:
            return self
        g2 = g.update(ctx, event)
        return self if g2 is g else _seq(g2, self.rest)


_NO_GENS: Final[tuple[Gen | None, ...]] = ()


def _seq(head: Gen | None, rest: tuple[Gen | None, ...]) -> Seq:
    """``Seq((head,) + rest)`` without making the tuple."""
    s = Seq(_NO_GENS)
    s.head = head
    s.rest = rest
    s.empty = False
    return s


def seq(*gens: Any) -> Gen:
    return Seq(tuple(lift(g) for g in gens))


class Limit(Gen):
    """At most ``n`` operations."""

    def __init__(self, n: int, gen: Gen | None) -> None:
        self.n = n
        self.gen = gen

    def __repr__(self) -> str:
        return f"Limit({self.n!r}, {self.gen!r})"

    def op(self, ctx: Context) -> Answer:
        if self.n <= 0 or self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        if _pending(o):
            return PENDING, Limit(self.n, g2)
        return o, Limit(self.n - 1, g2)

    def is_inert(self) -> bool:
        return self.gen is None or self.gen.is_inert()

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        if self.gen is None:
            return self
        g2 = self.gen.update(ctx, event)
        return self if g2 is self.gen else Limit(self.n, g2)


def limit(n: int, gen: Any) -> Gen:
    return Limit(n, lift(gen))


class Repeat(Gen):
    """Repeat the first op of ``gen`` forever (or ``n`` times)."""

    def __init__(self, gen: Gen | None, n: int = -1) -> None:
        self.gen = gen
        self.n = n

    def __repr__(self) -> str:
        return f"Repeat({self.gen!r}, {self.n!r})"

    def op(self, ctx: Context) -> Answer:
        if self.n == 0 or self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, _ = r
        if _pending(o):
            return PENDING, self
        return o, Repeat(self.gen, self.n - 1 if self.n > 0 else -1)


def repeat(gen: Any, n: int = -1) -> Gen:
    return Repeat(lift(gen), n)


class TimeLimit(Gen):
    """Stop emitting ops ``dt`` seconds after the first time it is asked."""

    def __init__(self, dt_ns: int, gen: Gen | None, deadline: int | None = None) -> None:
        self.dt_ns = dt_ns
        self.gen = gen
        self.deadline = deadline

    def __repr__(self) -> str:
        return f"TimeLimit({self.dt_ns!r}, {self.gen!r}, {self.deadline!r})"

    def op(self, ctx: Context) -> Answer:
        if self.gen is None:
            return None
        deadline = self.deadline if self.deadline is not None else ctx.time + self.dt_ns
        if ctx.time >= deadline:
            return None
        gen = self.gen
        if type(gen) is DelayedFns and gen.deadline is None:
            # the limit handed down: the rate's own generator answers as
            # this one would, and the tree is a level shorter for every
            # later ask (a TimeLimit and its answer built per op, for nothing)
            return gen.limited(deadline).op(ctx)
        r = gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        if not _pending(o) and o["time"] >= deadline:
            return None
        return o, TimeLimit(self.dt_ns, g2, deadline)

    def is_inert(self) -> bool:
        return self.gen is None or self.gen.is_inert()

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        if self.gen is None:
            return self
        g2 = self.gen.update(ctx, event)
        return self if g2 is self.gen else TimeLimit(self.dt_ns, g2, self.deadline)


def time_limit(seconds: float, gen: Any) -> Gen:
    return TimeLimit(int(seconds * NS), lift(gen))


class Delay(Gen):
    """Space ops at least ``dt`` apart (a rate limit: ``delay(1/rate, g)``)."""

    def __init__(self, dt_ns: int, gen: Gen | None, next_time: int | None = None, jitter: bool = False) -> None:
        self.dt_ns = dt_ns
        self.gen = gen
        self.next_time = next_time
        self.jitter = jitter

    def __repr__(self) -> str:
        return f"Delay({self.dt_ns!r}, {self.gen!r}, {self.next_time!r}, {self.jitter!r})"

    def op(self, ctx: Context) -> Answer:
        if self.gen is None:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        o, g2 = r
        if _pending(o):
            return PENDING, Delay(self.dt_ns, g2, self.next_time, self.jitter)
        nt = self.next_time
        if nt is None:
            # the first op: a stagger's first gap is drawn as every other
            # (from the start, as from an op), a plain delay's is none
            nt = ctx.time + (int(ctx.rng.random() * 2 * self.dt_ns) if self.jitter else 0)
        if o["time"] < nt:
            o = dict(o)
            o["time"] = nt
        step = self.dt_ns
        if self.jitter:  # stagger: uniform in [0, 2dt), mean dt
            step = int(ctx.rng.random() * 2 * self.dt_ns)
        return o, Delay(self.dt_ns, g2, o["time"] + step, self.jitter)

    def is_inert(self) -> bool:
        return self.gen is None or self.gen.is_inert()

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        if self.gen is None:
            return self
        g2 = self.gen.update(ctx, event)
        return self if g2 is self.gen else Delay(self.dt_ns, g2, self.next_time, self.jitter)


def _delay(dt_ns: int, gen: Gen | None, jitter: bool) -> Gen:
    """``Delay(dt_ns, gen, None, jitter)``, as one :class:`DelayedFns` when
    ``gen`` is a mix of op functions (the workloads' common shape)."""
    if type(gen) is Mix:
        fns: list[Callable[[Context], dict[str, Any] | None]] = []
        for x in gen.gens:
            if type(x) is not Fn:
                return Delay(dt_ns, gen, None, jitter)
            fns.append(x.fn)
        return DelayedFns(dt_ns, tuple(fns), gen.i, None, jitter)
    return Delay(dt_ns, gen, None, jitter)


def delay(seconds: float, gen: Any) -> Gen:
    return _delay(int(seconds * NS), lift(gen), False)


def stagger(seconds: float, gen: Any) -> Gen:
    """Jepsen's stagger: random gaps with mean ``seconds`` (the first from
    the start)."""
    return _delay(int(seconds * NS), lift(gen), True)


def rate(ops_per_second: float, gen: Any) -> Gen:
    """Total rate limit across all processes, with jitter so processes don't lockstep."""
    return stagger(1.0 / ops_per_second, gen)


class Mix(Gen):
    """Each op from a uniformly chosen generator (weights via repetition),
    as Jepsen's ``mix``: the generator the next op comes from (``i``) is
    drawn when an op is emitted and kept in the successor's state, so
    asking again gives the same op whatever the rng did meanwhile (one draw
    per ask, for the op after, where a shuffle per ask drew several); an
    exhausted generator is dropped and another drawn. The first op comes
    from the first."""

    def __init__(self, gens: tuple[Gen | None, ...], i: int = 0) -> None:
        self.gens = gens
        self.i = i

    def __repr__(self) -> str:
        return f"Mix({self.gens!r}, {self.i!r})"

    def op(self, ctx: Context) -> Answer:
        gens, i = self.gens, self.i
        while gens:
            g = gens[i]
            r = g.op(ctx) if g is not None else None
            if r is None:
                gens = gens[:i] + gens[i + 1:]
                if not gens:
                    return None
                i = randbelow(ctx.rng, len(gens))
                continue
            o, g2 = r
            if _pending(o):
                return PENDING, (self if gens is self.gens else Mix(gens, i))
            new = gens if g2 is g else gens[:i] + (g2,) + gens[i + 1:]
            return o, Mix(new, randbelow(ctx.rng, len(new)))
        return None


def mix(*gens: Any) -> Gen:
    return Mix(tuple(x for x in (lift(g) for g in gens) if x is not None))


class DelayedFns(Gen):
    """``Delay(dt_ns, Mix(tuple(Fn(f) for f in fns), i), next_time, jitter)``
    answered in one step: the same answers and the same draws from
    ``ctx.rng`` in the same order (the op function's, the mix's draw of the
    next function, the delay's gaps), without the two generators between
    (each ask built a Mix and a Delay and answered through three levels)
    or the delay's copy of an op that is already the ask's own (``_fill``
    made it). :func:`delay` and :func:`stagger` build it for a mix of op
    functions, what every workload's rate-limited load is.

    With a ``deadline`` (ns) it is also ``TimeLimit``'s generator under
    that deadline, already started: no op at or after it (asked at or
    after it, or due then), exhausted from then on. A TimeLimit over it
    hands its limit down (:meth:`limited`) and leaves the tree: the
    checks are the TimeLimit's, made at the same points of the ask, so
    the answers and the rng's draws are the same.

    With a ``pred`` it is also ``OnThreads``' generator restricted to the
    threads ``pred`` keeps (``whole``: OnThreads' cache of the thread set
    it keeps every one of): an OnThreads over it hands its predicate down
    (:meth:`restricted`) and leaves the tree, as a TimeLimit does, asking
    through the same view (the clients' load under ``clients``: an
    OnThreads and its answer were built per op, for nothing)."""

    def __init__(self, dt_ns: int, fns: tuple[Callable[[Context], dict[str, Any] | None], ...], i: int,
                 next_time: int | None, jitter: bool, deadline: int | None = None,
                 pred: Callable[[Any], bool] | None = None, whole: frozenset[Any] | None = None) -> None:
        self.dt_ns = dt_ns
        self.fns = fns
        self.i = i
        self.next_time = next_time
        self.jitter = jitter
        self.deadline = deadline
        self.pred = pred
        self.whole = whole

    def __repr__(self) -> str:
        return (f"DelayedFns({self.dt_ns!r}, {self.fns!r}, {self.i!r}, {self.next_time!r}, {self.jitter!r}, "
                f"{self.deadline!r}, {self.pred!r})")

    def limited(self, deadline: int) -> "DelayedFns":
        """This generator under a time limit ending at ``deadline``."""
        return DelayedFns(self.dt_ns, self.fns, self.i, self.next_time, self.jitter, deadline, self.pred,
                          self.whole)

    def restricted(self, pred: Callable[[Any], bool], whole: frozenset[Any] | None) -> "DelayedFns":
        """This generator restricted to the threads ``pred`` keeps (an
        unrestricted one's: ``OnThreads(pred, self, whole)``)."""
        return DelayedFns(self.dt_ns, self.fns, self.i, self.next_time, self.jitter, self.deadline, pred, whole)

    def _with(self, fns: tuple[Callable[[Context], dict[str, Any] | None], ...], i: int) -> "DelayedFns":
        return self if fns is self.fns else DelayedFns(self.dt_ns, fns, i, self.next_time, self.jitter,
                                                       self.deadline, self.pred, self.whole)

    def op(self, ctx: Context) -> Answer:
        pred = self.pred
        whole = self.whole
        if pred is not None and (whole is None or ctx.threads is not whole):
            view = ctx.restrict(pred)  # OnThreads' view (see OnThreads.op)
            if view is ctx:
                whole = ctx.threads
            ctx = view
        deadline = self.deadline
        if deadline is not None and ctx.time >= deadline:
            return None
        fns, i = self.fns, self.i
        while fns:
            if not ctx.free_threads():
                return PENDING, self._with(fns, i)  # Fn's answer with no free thread
            fn = fns[i]
            tmpl: dict[str, Any] | None
            if isinstance(fn, OpFn):
                own = True  # its op is the ask's own (no copy to fill)
                placed = fn.placed  # and it needs no filling (OpFn.placed)
                tmpl = fn(ctx)  # called as the OpFn it is (compiled: natively)
            else:
                own = placed = False
                tmpl = fn(ctx)
            if tmpl is None:  # that function is exhausted: the mix drops it and draws again
                fns = fns[:i] + fns[i + 1:]
                if not fns:
                    return None
                i = randbelow(ctx.rng, len(fns))
                continue
            o = tmpl if placed else _fill(tmpl, ctx, own)
            if o is None:
                return PENDING, self._with(fns, i)
            rng = ctx.rng
            nxt = randbelow(rng, len(fns))  # the mix's next function
            dt = self.dt_ns
            nt = self.next_time
            if nt is None:
                nt = ctx.time + (int(_random(rng) * 2 * dt) if self.jitter else 0)
            t: int = o["time"]
            if t < nt:
                t = nt
                o["time"] = t
            step = int(_random(rng) * 2 * dt) if self.jitter else dt
            if deadline is not None and t >= deadline:
                return None
            return o, DelayedFns(dt, fns, nxt, t + step, self.jitter, deadline, pred, whole)
        return None


class Sleep(Gen):
    """Occupy one free thread for ``dt`` seconds, recording nothing (Jepsen's
    ``sleep``): on the nemesis thread it spaces faults; in a phase of its own it
    gives the cluster time to recover."""

    def __init__(self, dt_ns: int) -> None:
        self.dt_ns = dt_ns

    def __repr__(self) -> str:
        return f"Sleep({self.dt_ns!r})"

    def op(self, ctx: Context) -> Answer:
        p = ctx.some_free_process()
        if p is None:
            return PENDING, self
        return {"f": "sleep", "process": p, "time": ctx.time, "_sleep": self.dt_ns}, None


def sleep(seconds: float) -> Gen:
    return Sleep(int(seconds * NS))


class SleepFor(Gen):
    """A :class:`Sleep` whose length is asked of ``seconds()`` when it
    starts, not when the test is built: the recovery after the final heal
    waits for what the faults of this run actually did (a clock set ahead
    and reset holds timers for as long as it was ahead), which is known
    only once they ran."""

    def __init__(self, seconds: Callable[[], float]) -> None:
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"SleepFor({self.seconds!r})"

    def op(self, ctx: Context) -> Answer:
        if ctx.some_free_process() is None:
            return PENDING, self
        return Sleep(int(self.seconds() * NS)).op(ctx)


def sleep_for(seconds: Callable[[], float]) -> Gen:
    return SleepFor(seconds)


class OnThreads(Gen):
    """Restrict a generator to some threads (Jepsen's ``clients`` / ``nemesis``)."""

    def __init__(self, pred: Callable[[Any], bool], gen: Gen | None,
                 whole: frozenset[Any] | None = None) -> None:
        self.pred = pred
        self.gen = gen
        #: threads (the very set) ``pred`` keeps every one of, as a context
        #: last had them: that context's view is the context itself, with
        #: no restrict (its memo lookups) on every ask; handed to the
        #: successor, a cache that changes no answer
        self.whole = whole

    def __repr__(self) -> str:
        return f"OnThreads({self.pred!r}, {self.gen!r})"

    def op(self, ctx: Context) -> Answer:
        gen = self.gen
        if gen is None:
            return None
        if type(gen) is DelayedFns and gen.pred is None:
            # the predicate handed down: the rate's own generator answers as
            # this one would, and the tree is a level shorter for every later ask
            return gen.restricted(self.pred, self.whole).op(ctx)
        whole = self.whole
        if whole is not None and ctx.threads is whole:
            view = ctx
        else:
            view = ctx.restrict(self.pred)
            if view is ctx:
                whole = ctx.threads
        r = gen.op(view)
        if r is None:
            return None
        return r[0], OnThreads(self.pred, r[1], whole)

    def is_inert(self) -> bool:
        return self.gen is None or self.gen.is_inert()

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        if self.gen is None:
            return self
        t = ctx.thread_of(event.get("process"))
        if t is None and event.get("process") == "nemesis":
            t = "nemesis"
        if t is not None and not self.pred(t):
            return self
        g2 = self.gen.update(ctx.restrict(self.pred), event)
        return self if g2 is self.gen else OnThreads(self.pred, g2, self.whole)


def _is_client(t: Any) -> bool:
    return t != "nemesis"


def _is_nemesis(t: Any) -> bool:
    return t == "nemesis"


def clients(gen: Any) -> Gen:
    return OnThreads(_is_client, lift(gen))


def nemesis(gen: Any) -> Gen:
    return OnThreads(_is_nemesis, lift(gen))


def _soonest(results: Iterable[tuple[int, Any]]) -> tuple[tuple[dict, int, Gen | None] | None, bool, set[int]]:
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
        if _pending(o):
            pending = True
            continue
        if best is None or o["time"] < best[0]["time"]:
            best = (o, i, g2)
    return best, pending, done


class Any_(Gen):
    """The soonest op of several generators (Jepsen's ``any``): used to
    interleave the nemesis schedule with client operations."""

    def __init__(self, gens: tuple[Gen | None, ...]) -> None:
        self.gens = gens

    def __repr__(self) -> str:
        return f"Any_({self.gens!r})"

    def op(self, ctx: Context) -> Answer:
        """:func:`_soonest` of the children's answers, as a plain loop (it
        is asked on every operation of a run with faults, twice: clients
        beside the nemesis, and the nemesis's fault groups)."""
        gens = self.gens
        best: dict[str, Any] | None = None
        best_i = -1
        best_next: Gen | None = None
        answers: list[Answer] = []
        for i in range(len(gens)):
            g = gens[i]
            r = g.op(ctx) if g is not None else None
            answers.append(r)
            if r is None:
                continue
            o = r[0]
            if _pending(o):
                continue
            if best is None or o["time"] < best["time"]:
                best, best_i, best_next = o, i, r[1]
        if best is None:
            # exhausted children are dropped so Any_ ends when all do (from
            # this pass's answers: asking again would draw on ctx.rng twice)
            live = tuple(g for g, r in zip(gens, answers) if g is not None and r is not None)
            return (PENDING, Any_(live)) if live else None
        new = list(gens)
        new[best_i] = best_next
        return best, Any_(tuple(new))

    def is_inert(self) -> bool:
        for g in self.gens:
            if g is not None and not g.is_inert():
                return False
        return True

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        new: list[Gen | None] | None = None
        for i, g in enumerate(self.gens):
            if g is None:
                continue
            g2 = g.update(ctx, event)
            if g2 is not g:
                if new is None:
                    new = list(self.gens)
                new[i] = g2
        return self if new is None else Any_(tuple(new))


def any_(*gens: Any) -> Gen:
    return Any_(tuple(lift(g) for g in gens))


class Synchronize(Gen):
    """Wait until every visible thread is free, then behave like ``gen``."""

    def __init__(self, gen: Gen | None, started: bool = False) -> None:
        self.gen = gen
        self.started = started

    def __repr__(self) -> str:
        return f"Synchronize({self.gen!r}, {self.started!r})"

    def op(self, ctx: Context) -> Answer:
        """Once every visible thread is free, the first op and, as the
        generator after it, ``gen``'s own successor: a started
        Synchronize is ``gen`` itself (it asks and updates ``gen`` alone),
        so it leaves the tree rather than be rebuilt around every later op
        of the phase."""
        if self.gen is None:
            return None
        if not self.started and not ctx.free >= ctx.threads:
            return PENDING, self
        return self.gen.op(ctx)

    def is_inert(self) -> bool:
        return not self.started or self.gen is None or self.gen.is_inert()

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        if self.gen is None or not self.started:
            return self
        g2 = self.gen.update(ctx, event)
        return self if g2 is self.gen else Synchronize(g2, True)


def phases(*gens: Any) -> Gen:
    """Run generators one after another, each starting only once every
    operation of the previous one has completed (Jepsen's ``phases``)."""
    return Seq(tuple(Synchronize(lift(g)) for g in gens))


class EachThread(Gen):
    """An independent copy of a generator per thread (Jepsen's ``each-thread``):
    e.g. every client does its own final read."""

    def __init__(self, make: Callable[[Any], Gen | None], gens: tuple[tuple[Any, Gen | None], ...] | None = None) -> None:
        self.make = make
        self.gens = gens

    def __repr__(self) -> str:
        return f"EachThread({self.make!r}, {self.gens!r})"

    def _init(self, ctx) -> tuple[tuple[Any, Gen | None], ...]:
        if self.gens is not None:
            return self.gens
        return tuple((t, lift(self.make(t))) for t in sorted(ctx.threads, key=str))

    def op(self, ctx: Context) -> Answer:
        gens = self._init(ctx)
        best, pending, _ = _soonest(
            (i, g.op(ctx.with_threads(frozenset([t])))) for i, (t, g) in enumerate(gens) if g is not None
        )
        if best is None:
            return (PENDING, EachThread(self.make, gens)) if pending else None
        o, i, g2 = best
        new = list(gens)
        new[i] = (new[i][0], g2)
        return o, EachThread(self.make, tuple(new))

    def is_inert(self) -> bool:
        if self.gens is None:
            return False  # its generators are made on the first look
        for _, g in self.gens:
            if g is not None and not g.is_inert():
                return False
        return True

    def update(self, ctx: Context, event: dict[str, Any]) -> "Gen":
        gens = self._init(ctx)
        t = ctx.thread_of(event.get("process"))
        out = []
        for th, g in gens:
            if g is not None and th == t:
                g = g.update(ctx.with_threads(frozenset([th])), event)
            out.append((th, g))
        return EachThread(self.make, tuple(out))


def each_thread(make: Callable[[Any], Any]) -> Gen:
    return EachThread(make)


def from_list(ops: Iterable[dict[str, Any]]) -> Gen:
    return Seq(tuple(Once(o) for o in ops))

