"""The deterministic event loop: virtual time in integer milliseconds; events
run in ``(time, seq)`` order.

Why a sequence number: two events due at the same millisecond run in the order
they were scheduled, never in an order that depends on comparing callbacks, so
one seed always yields one schedule (the property every replay relies on).

How they are kept: a calendar of buckets, one list of :class:`Event` per
millisecond that has events. Time is whole milliseconds and a busy seed has a
few events per millisecond, nearly all due within a second or two. So the
near calendar is a wheel: a list of ``_WHEEL`` slots, the bucket of time
``t`` (less than ``_WHEEL`` ms ahead of ``now``) in slot ``t & _MASK``;
scheduling is a list index and an append, and the next time is found by
looking at the slots from ``now`` on (no more than ``_WHEEL`` of them, as
every filled slot is less than that ahead). A time further ahead goes to the
far calendar, a dict of buckets and a heap of their times; when that time
comes its bucket joins the slot's, in ``seq`` order (an entry scheduled for
it later went to the slot). Before the wheel, every millisecond's bucket was
a dict entry keyed by a boxed int, looked up on every event scheduled and
pushed onto and popped off the heap once (and before that, a single heap of
``(time, seq, fn, args)`` tuples compared tuples on every push and pop).

An entry is a native object, not a ``(seq, fn, args)`` tuple: a
:class:`Call` for any callback, or a subclass whose :meth:`Event.run` calls
its target natively (the network's message arrivals, one per message sent:
one object in place of two tuples, and a native call where the loop made a
generic call through a bound method that parsed its arguments again).

Invariant: each bucket is in ``seq`` order. :meth:`at` takes a fresh ``seq``,
the largest yet, so it appends; only :meth:`place` (a :class:`TimeoutQueue`
putting back an entry under the ``seq`` it took earlier, or :meth:`first`)
may insert in the middle, and then by bisection. So events run in exactly
``(time, seq)`` order.

Why :meth:`first`: where an ``at`` event runs within its millisecond depends
on when it was set (after every event due then that was set before it). A
fault's follow-up that a replay sets at a different moment than the run it
replays (a story's recorded step, set when its op starts, where the told
story set it after a chain of looks at the cluster) would act at another
point of its millisecond, and a message due then would arrive on the other
side of a cut. A ``first`` event runs ahead of the millisecond's ``at``
events whenever it was set, so both act at the same point. Its ``seq`` comes
from a counter of its own, below every ``at`` one, so it bisects into the
bucket's head, after the ``first`` events set before it.
"""

from __future__ import annotations

import gc
from bisect import insort
from heapq import heappop, heappush
from typing import Any, Callable, Container, Final


class Event:
    """One entry of the calendar: its sequence number, and what it runs
    (:meth:`run`, overridden)."""

    def __init__(self, seq: int) -> None:
        self.seq = seq

    def run(self) -> None:
        raise NotImplementedError

    def done(self) -> None:
        """Called once its millisecond has run to the end (not when a run
        stops inside it): an entry kept for reuse goes back to its pool here,
        never earlier, so a bucket's entries keep their seqs (and the
        bucket its order) while it runs."""


class Call(Event):
    """``fn(*args)``, the entry :meth:`EventLoop.at` makes."""

    def __init__(self, seq: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.seq = seq
        self.fn = fn
        self.args = args

    def run(self) -> None:
        # the callable read into a local first: compiled, ``self.fn(*args)``
        # is taken for a method call and looks ``fn`` up by name
        fn = self.fn
        fn(*self.args)


class StopFlag:
    """A stop condition the loop reads as a native attribute (:attr:`up`)
    after every event, where a callable ``stop`` is called: a driver whose
    condition is a flag it raises itself (the virtual-time interpreter,
    done once its generator is exhausted and nothing is in flight) hands
    this, and the loop reads it without a call (~35k calls through the
    generic call protocol per 10 s seed otherwise). Calling it still
    answers the condition, so it goes wherever a ``stop`` callable does."""

    def __init__(self) -> None:
        self.up = False

    def __call__(self) -> bool:
        return self.up


def _seq_of(e: Event) -> int:
    """The sort key of a bucket (a module function: a lambda in a method
    makes the compiled method allocate a closure on every call)."""
    return e.seq


#: the wheel's span in milliseconds (a power of two): a time less than this
#: ahead of ``now`` has its slot, ``time & _MASK``
_WHEEL: Final = 2048
_MASK: Final = _WHEEL - 1


class EventLoop:
    def __init__(self) -> None:
        self.now: int = 0
        self._seq = 0
        #: the near calendar: the bucket of each millisecond in
        #: ``[now, now + _WHEEL)`` that has one, in slot ``t & _MASK`` (see
        #: the module docstring); ``_filled`` counts the slots in use
        self._wheel: list[list[Event] | None] = [None] * _WHEEL
        self._filled = 0
        #: emptied buckets of the near wheel, for the next milliseconds: a
        #: list made for each millisecond that has events and freed once it
        #: has run was ~200 instructions a millisecond (:meth:`_run`)
        self._spare: list[list[Event]] = []
        #: the far calendar: due millisecond -> its entries in seq order, for
        #: a time ``_WHEEL`` or more ahead when it was scheduled
        self._buckets: dict[int, list[Event]] = {}
        #: heap of the milliseconds that have a far bucket
        self._times: list[int] = []
        self.steps = 0
        #: the seqs of :meth:`first` events: below every :meth:`at` seq, rising
        #: (short ints when compiled: mypyc's are 63-bit)
        self._first_seq = -(1 << 60)
        #: a :meth:`first` event is running (so one it sets for now joins the head)
        self._in_first = False

    def at(self, when: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at virtual time ``when`` (never in the past)."""
        if when < self.now:
            when = self.now
        when = int(when)
        seq = self._seq = self._seq + 1
        self.push(when, Call(seq, fn, args))

    def next_seq(self) -> int:
        """A fresh ``seq``, the largest yet (for an entry :meth:`push` schedules)."""
        seq = self._seq = self._seq + 1
        return seq

    def push(self, when: int, entry: Event) -> None:
        """Schedule ``entry``, whose ``seq`` is the largest yet (from
        :meth:`next_seq`), at ``when`` (not in the past): it runs last of
        what is due then so far, as an :meth:`at` would."""
        # one push per message sent: both cases inline
        if when - self.now < _WHEEL:
            wheel = self._wheel
            slot = when & _MASK
            near = wheel[slot]
            if near is None:
                spare = self._spare
                if spare:
                    near = spare.pop()
                    near.append(entry)
                else:
                    near = [entry]
                wheel[slot] = near
                self._filled += 1
            else:
                near.append(entry)
            return
        far = self._buckets.get(when)
        if far is None:
            self._buckets[when] = [entry]
            heappush(self._times, when)
        else:
            far.append(entry)

    def _bucket(self, when: int, entry: Event) -> list[Event] | None:
        """The entries due at ``when`` so far, where one more goes: the near
        wheel's slot within its span, else the far calendar's. ``None`` when
        there were none: ``entry`` is then the first, put in place by
        :meth:`push`."""
        if when - self.now < _WHEEL:
            bucket = self._wheel[when & _MASK]
        else:
            bucket = self._buckets.get(when)
        if bucket is None:
            self.push(when, entry)
        return bucket

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + max(0, int(delay)), fn, *args)

    def first(self, when: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at ``when`` ahead of the ``at`` events due then,
        after the ``first`` events set for it before, whenever it was set
        (see the module docstring). One set for the millisecond now running
        by a ``first`` event runs next among the head; by any other event,
        whose millisecond's head has run, after the events already due (as
        ``at``)."""
        when = int(max(when, self.now))
        if when == self.now and not self._in_first:
            self.at(when, fn, *args)
            return
        seq = self._first_seq = self._first_seq + 1
        self.place(when, seq, self._run_first, (fn, args))

    def _run_first(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._in_first = True
        try:
            fn(*args)
        finally:
            self._in_first = False

    def place(self, when: int, seq: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Schedule under a ``seq`` taken earlier (``when`` not in the past):
        the entry runs where an :meth:`at` made when ``seq`` was taken would."""
        entry = Call(seq, fn, args)
        bucket = self._bucket(when, entry)
        if bucket is None:
            return
        if not bucket or seq > bucket[-1].seq:
            bucket.append(entry)
        else:
            # seqs are unique: after every entry of a smaller seq
            insort(bucket, entry, key=_seq_of)

    def run_until(self, until: int, stop: Callable[[], bool] | None = None) -> None:
        """Run every event due at or before ``until``; then time is ``until``.

        ``stop`` is consulted after each event so scripted tests can wait for
        a condition ("until broker 2 leads t-0") without guessing times; a
        :class:`StopFlag` is read, not called.
        """
        # The loop allocates many short-lived objects (messages, effect
        # lists, trace dicts) that reference counting frees at once; few are
        # in a cycle (a 60 s run leaves tens to ~1,500 cyclic objects, more
        # with kills: a stopped node's state). The cyclic collector would still walk the young objects
        # every few hundred allocations, and the run's growing long-lived
        # state (history, logs) on every older pass: about 5% of the run.
        # So it is off while the loop runs and back on after; nothing here
        # depends on when garbage is collected.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._run(until, stop)
        finally:
            if was_enabled:
                gc.enable()

    def _next(self, until: int) -> int:
        """The next millisecond with a bucket, at or before ``until`` (-1:
        none): the near calendar's first filled slot from now, or the far
        calendar's first time if that comes first (or the same)."""
        times = self._times
        far = times[0] if times else -1
        limit = until if far < 0 or far > until else far
        if self._filled:
            wheel = self._wheel
            t = self.now
            # a filled slot is less than _WHEEL ahead: the scan is short
            while t <= limit:
                if wheel[t & _MASK] is not None:
                    return t
                t += 1
        return far if 0 <= far <= until else -1

    def _run(self, until: int, stop: Callable[[], bool] | None) -> None:
        flag: StopFlag | None = None
        if isinstance(stop, StopFlag):
            flag = stop
            stop = None
        wheel = self._wheel
        steps = self.steps
        bucket: list[Event] = []
        i = 0
        inside = False
        try:
            while True:
                t = self._next(until)
                if t < 0:
                    break
                self.now = t
                slot = t & _MASK
                near = wheel[slot]
                times = self._times
                if times and times[0] == t:
                    # the far bucket's time has come: its entries join the
                    # slot's, in seq order
                    heappop(times)
                    far = self._buckets[t]
                    del self._buckets[t]
                    if near is None:
                        near = far
                        wheel[slot] = near
                        self._filled += 1
                    else:
                        near[:0] = far
                        near.sort(key=_seq_of)
                assert near is not None
                bucket = near
                inside = True
                i = 0
                # the bucket may grow while it runs (events due now join it
                # in its slot); it stays there until done
                while i < len(bucket):
                    entry = bucket[i]
                    i += 1
                    steps += 1
                    entry.run()
                    if flag is not None:
                        if flag.up:
                            return
                    elif stop is not None and stop():
                        return
                wheel[slot] = None
                self._filled -= 1
                inside = False
                for entry in bucket:
                    entry.done()
                # emptied, it serves a later millisecond (push); nothing
                # else holds it: its slot is cleared and a run stopped inside
                # it keeps it in its slot (the ``finally`` below)
                bucket.clear()
                self._spare.append(bucket)
        finally:
            self.steps = steps
            if inside and i:
                # stopped (or raised) inside a bucket: what ran leaves it, so
                # the next run starts at the first entry that has not run
                del bucket[:i]
        if until > self.now:
            self.now = until

    def pending(self) -> int:
        near = 0
        for b in self._wheel:
            if b is not None:
                near += len(b)
        return near + sum(len(b) for b in self._buckets.values())

    def clear(self) -> None:
        """Drop every pending event (a finished run's: see ``Simulation.release``)."""
        self._wheel = [None] * _WHEEL
        self._filled = 0
        self._spare = []
        self._buckets.clear()
        self._times.clear()


class TimeoutQueue:
    """Timeouts of one fixed delay that almost never fire, kept out of the loop.

    A simulated client arms a timeout with every request and the reply nearly
    always comes first. One loop event per timeout was ~31k events per
    benchmark seed (78 simulated s at 500 requests/s) that did nothing, and
    they kept the event heap of the time ~17x larger (~1,450 entries against
    ~86, sampled through a run, with a 5 s timeout).

    Here a timeout still takes, when it is added, the ``(time, seq)`` place
    :meth:`EventLoop.after` would give it; the delay is fixed, so the queue
    is in that order. Only its oldest entry is scheduled, under its own place
    (:meth:`EventLoop.place`). When that place comes up the entry fires if
    ``key in live`` still holds, the entries no longer live behind it are
    dropped, and the next live one is scheduled under its own place. A
    timeout that fires therefore runs exactly where an ``after`` event would
    have run, so a seed replays to the same history; only the loop's step
    count no longer includes the timeouts that did nothing.

    Invariant: whenever the queue is not empty, its first entry is scheduled.

    An entry is two ints side by side in two lists, its key and its place
    as one stamp (:func:`_stamp`), where a ``(time, seq, key)`` tuple per
    request was a tuple made and three ints boxed (the simulated clients
    arm one with every request they send).
    """

    def __init__(self, loop: EventLoop, delay: int, fire: Callable[[int], None], live: Container[int]) -> None:
        self.loop = loop
        self.delay = max(0, int(delay))
        self._fire = fire
        # a container, not a predicate: ``key in live`` is no call at all
        # (an endpoint passes its dict of requests awaiting a reply)
        self._live = live
        #: each entry's place (:func:`_stamp`) and key, in the same order,
        #: from index ``_head`` on (the entries before it are gone). Lists
        #: and an index, not deques: compiled, an append to a list is a
        #: native call, a deque's ``append``/``popleft`` a generic call of a
        #: bound method (two per request sent). The spent head is dropped
        #: when the queue empties, or once it is most of the lists
        self._stamps: list[int] = []
        self._keys: list[int] = []
        self._head = 0
        self._armed = False
        # bound once (compiled, a bound method made per placement otherwise)
        self._due_fn: Callable[[], None] = self._due

    def __len__(self) -> int:
        return len(self._keys) - self._head

    def add(self, key: int) -> None:
        """A timeout for ``key`` ``delay`` ms from now, in the place ``loop.after`` would give it."""
        loop = self.loop
        seq = loop._seq = loop._seq + 1
        when = loop.now + self.delay
        self._stamps.append(_stamp(when, seq))
        self._keys.append(key)
        if not self._armed:
            self._armed = True
            loop.place(when, seq, self._due_fn, ())

    def _due(self) -> None:
        keys = self._keys
        i = self._head
        key = keys[i]
        self._head = i = i + 1
        # still armed while it fires: a timeout added meanwhile only queues
        if key in self._live:
            self._fire(key)
        live = self._live
        while i < len(keys) and keys[i] not in live:
            i += 1
        if i < len(keys):
            stamp = self._stamps[i]
            self.loop.place(stamp >> _SEQ_BITS, stamp & _SEQ_MASK, self._due_fn, ())
            if i >= _COMPACT_AT and 2 * i >= len(keys):
                del keys[:i]
                del self._stamps[:i]
                i = 0
        else:
            self._armed = False
            keys.clear()
            self._stamps.clear()
            i = 0
        self._head = i


#: a queue's spent head is dropped once it is at least this long (and at
#: least half the queue): a copy of the rest now and then, not per timeout
_COMPACT_AT: Final = 1024

#: the bits of a stamp that hold the seq (a seq is positive and counts the
#: loop's events: far below 2**40; a time past 2**22 ms makes a stamp a long
#: int, still exact)
_SEQ_BITS: Final = 40
_SEQ_MASK: Final = (1 << _SEQ_BITS) - 1


def _stamp(when: int, seq: int) -> int:
    """The place ``(when, seq)`` as one int (one int boxed, not two)."""
    return (when << _SEQ_BITS) | seq
