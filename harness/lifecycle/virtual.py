"""The virtual-time interpreter: the generator driven on the simulator's
event loop, as :mod:`harness.lifecycle.interpreter` drives it with worker
threads in real time (the idea of Jepsen's ``jepsen.generator.test/simulate``:
any generator played in virtual time against a completion function).

The rules are the real interpreter's, so one generator means one load on
both runtimes:

* the generator is asked for an operation; one due later is asked for again
  at its time (an event on the loop), unless a completion changed the world
  first; ``PENDING`` waits for a completion or a sleeper's wake;
* an invocation is recorded, the generator updated, and the op handed to the
  thread's client, which completes it later, at a virtual time, with
  Jepsen's ``ok``/``fail``/``info`` (the simulated clients follow the real
  ones' outcome rules and timeouts);
* an op still open after the op timeout (``_timeout`` if it names one) is
  completed ``info`` with error ``timeout``, and its client's late answer is
  dropped;
* after an ``info`` the thread's process is ``p + concurrency`` and it gets a
  new client (Jepsen's rule: a process that may have done something unknown
  never issues another operation);
* a ``sleep`` op occupies its thread until it wakes, recording nothing;
* nemesis ops are applied at once (faults act in no virtual time), their
  invocation and completion both ``info``.

Nothing here reads a clock or draws from anything but the generator's rng,
so a seed gives the same history on every replay.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Final, Protocol

from checkers.history.recorder import Recorder, completion_extra, op_extra
from generator.core import PENDING, Context, Gen
from reference_impl.sim.endpoint import Completion, InterpretedClient
from reference_impl.sim.events import EventLoop, StopFlag, TimeoutQueue

#: Final: compiled, a constant is a static, where a plain global was a
#: lookup in the module's dict at every use (several per operation)
NEMESIS: Final = "nemesis"
MS: Final = 1_000_000


#: the number of bits set in each byte
_BITS8: Final[list[int]] = [bin(i).count("1") for i in range(256)]


def _below(mask: int, r: int) -> int:
    """How many bits of ``mask`` are set below bit ``r``: the place of the
    thread of rank ``r`` among the free ones, in rank order (counted a byte
    at a time from a table: compiled, ``int.bit_count`` was a method call
    by name, twice an operation)."""
    x = mask & ((1 << r) - 1)
    n = 0
    while x:
        n += _BITS8[x & 255]
        x >>= 8
    return n


def _is_nemesis(t: Any) -> bool:
    """Whether thread (or process) ``t`` is the nemesis: the type first, as
    a client's int compared with the string took the slow way through both
    types' comparisons, several times an operation."""
    return isinstance(t, str) and t == NEMESIS


class _Job(Completion):
    """One open op, job ``job`` of thread ``t``: its invocation as recorded
    and its recorded extra fields (the completion's start from them); and
    the completion callback its client calls with the completion's fields
    (a native callable, where a partial of a bound method took a generic
    call and an argument parse), or, completing it ``ok``, with the value
    alone (:meth:`ok`, the simulated clients' call). One object per op,
    where the open op was a tuple beside a callback object."""

    def __init__(self, it: "VirtualInterpreter", t: Any, job: int, key: Any, inv: dict[str, Any],
                 extra: dict[str, Any], fields: dict[str, Any] | None, process: Any, f: Any,
                 error: Any) -> None:
        self.it = it
        self.t = t
        self.job = job
        #: ``job`` boxed once: its key in the interpreter's open jobs
        self.key = key
        #: completed (or timed out): a later answer of its client is dropped
        self.closed = False
        self.inv = inv
        self.extra = extra
        #: the fields of the invocation's line (an ok completion's line is
        #: a copy of them with four set: Recorder.append_ok)
        self.fields = fields
        #: the invocation's process, f and error, as recorded: an ok
        #: completion's own (it sets only type and value), kept rather than
        #: looked up again in the completion's fields
        self.process = process
        self.f = f
        self.error = error

    def __call__(self, res: dict[str, Any]) -> None:
        self.it._complete(self, res)

    def ok(self, value: Any) -> None:
        self.it._complete_ok(self, value, None)

    def ok_json(self, value: Any, value_json: bytes | None) -> None:
        self.it._complete_ok(self, value, value_json)


class VirtualClient(Protocol):
    """One process's client in virtual time: ``invoke`` returns at once and
    calls ``done`` with the completion's fields when the op completes."""

    def invoke(self, op: dict[str, Any], done: Callable[[dict[str, Any]], None]) -> None: ...


#: the client of (thread, process); asked again whenever the thread's process changes
VirtualClientFactory = Callable[[int, int], VirtualClient]


class VirtualInterpreter:
    """Plays ``gen`` on ``loop`` from virtual time ``t0_ms`` (the generator's
    time 0) until it is exhausted and nothing is in flight (:attr:`done`)."""

    def __init__(self, gen: Gen, recorder: Recorder, concurrency: int, client_factory: VirtualClientFactory,
                 nemesis_invoke: Callable[[dict[str, Any]], dict[str, Any]] | None, rng: random.Random,
                 op_timeout: float, loop: EventLoop, t0_ms: int, state: dict[str, Any] | None = None,
                 observe: Callable[[dict[str, Any], dict[str, Any]], None] | None = None) -> None:
        self.gen: Gen | None = gen
        self.rec = recorder
        self.concurrency = concurrency
        self.client_factory = client_factory
        self.nemesis_invoke = nemesis_invoke
        self.rng = rng
        self.loop = loop
        self.t0_ms = t0_ms
        self.op_timeout_ms = max(1, int(op_timeout * 1000))
        self.state = state if state is not None else {}
        self.observe = observe
        threads: list[Any] = list(range(concurrency)) + ([NEMESIS] if nemesis_invoke is not None else [])
        self.threads = frozenset(threads)
        self.process_of: dict[Any, Any] = {t: t for t in threads}
        #: process -> thread, kept beside process_of (a completion finds its thread at once)
        self.thread_of: dict[Any, Any] = {p: t for t, p in self.process_of.items()}
        self.free: set[Any] = set(threads)
        #: the threads sorted by name (as Context lists free threads) and
        #: each thread's place there (its rank); the free ones in that
        #: order, kept up to date as threads are taken and freed (a C-level
        #: insert or delete each, at the place the free ranks below give:
        #: a bit per rank, set while the thread is free, where a bisection
        #: of a list of the free ranks cost more): a context gets a copy,
        #: where listing the free threads anew by a test of every thread
        #: cost ~3,000 instructions an ask
        order: list[Any] = sorted(threads, key=str)
        self._rank: dict[Any, int] = {t: i for i, t in enumerate(order)}
        self._free_live: list[Any] = list(order)
        self._free_mask: int = (1 << len(order)) - 1
        self._free_list: list[Any] | None = None
        #: job id -> its open op (:class:`_Job`), one a busy thread; a
        #: timeout finds its job by id (one dict, where a dict of each
        #: thread's job beside one of the open ids took an insert, a test
        #: and a delete more per operation)
        self.jobs: dict[Any, _Job] = {}
        self._job_ids = 0
        self._timeouts: dict[int, TimeoutQueue] = {}
        #: the queue of the last op timeout armed and its delay: nearly
        #: every op takes the run's one timeout (a dict lookup of a boxed
        #: int per operation otherwise)
        self._last_q: TimeoutQueue | None = None
        self._last_q_ms = -1
        self.sleepers = 0
        self.clients: dict[Any, tuple[Any, VirtualClient]] = {}
        self.done = False
        #: raised with :attr:`done`: the loop's stop condition, read by the
        #: loop after every event without a call (see ``StopFlag``)
        self.stopped = StopFlag()
        # the context's parts, rebuilt only when they change
        self._proc_view: dict[Any, Any] | None = None
        self._thread_view: dict[Any, Any] = {}
        # the last answer for a later time (its op and the generator after
        # it; no op: none), and whether the world changed since
        self._ahead_op: dict[str, Any] | None = None
        self._ahead_gen: Gen | None = None
        #: that op's time (ns), read once (asked for again at its time and
        #: again after each completion meanwhile: a lookup and an unboxing each)
        self._ahead_t = 0
        self._wake_ms = -1
        self._stepping = False
        self._again = False
        # bound once: compiled, ``self._wake`` made a bound method object per wake
        self._wake_fn: Callable[[], None] = self._wake

    # ------------------------------------------------------------------ time and context
    def now_ns(self) -> int:
        return (self.loop.now - self.t0_ms) * MS

    def _ctx(self) -> Context:
        """The context of one ask or update. It is handed the live free set
        (``Context``'s rule: no thread is taken or freed before it answers),
        where a frozen copy per ask cost ~1,700 instructions an operation;
        the sorted list a context may keep a reference to is copied."""
        fl = self._free_list
        if fl is None:
            fl = self._free_list = self._list_free()
        procs = self._proc_view
        if procs is None:
            procs = self._proc_view = dict(self.process_of)
            self._thread_view = dict(self.thread_of)
        return Context(self.now_ns(), self.rng, self.free, procs, self.threads, self.state, self._thread_view, fl)

    def _list_free(self) -> list[Any]:
        """The free threads sorted by name (a new list: a context given the
        last one may still hold it)."""
        return self._free_live.copy()

    def _take(self, t: Any) -> None:
        """Thread ``t`` is busy from now (the caller says the world changed)."""
        self.free.discard(t)
        r = self._rank[t]
        mask = self._free_mask
        if mask >> r & 1:
            self._free_mask = mask ^ (1 << r)
            # pop, not del: compiled, pop(i) is the list's own, del a generic item deletion
            self._free_live.pop(_below(mask, r))

    def _give(self, t: Any) -> None:
        """Thread ``t`` is free from now (the caller says the world changed)."""
        self.free.add(t)
        r = self._rank[t]
        mask = self._free_mask
        if not mask >> r & 1:
            self._free_mask = mask | (1 << r)
            self._free_live.insert(_below(mask, r), t)

    def _changed(self) -> None:
        """The world moved (a thread taken or freed, a process renamed): an
        answer given for a later time is asked for again."""
        self._free_list = None
        self._ahead_op = None
        self._ahead_gen = None

    # ------------------------------------------------------------------ the loop
    def start(self) -> None:
        self._step()

    def _step(self) -> None:
        """Ask the generator for ops until it has none due now. Completions
        that arrive while this runs (a client answering at once) ask again."""
        if self._stepping:
            self._again = True
            return
        self._stepping = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._advance()
        finally:
            self._stepping = False
        if self.gen is None and not self.jobs:
            self.done = True
            self.stopped.up = True

    def finished(self) -> bool:
        """Whether the generator is exhausted and nothing is in flight (the
        loop's stop condition is :attr:`stopped`, the same answer read as a
        flag)."""
        return self.done

    def _advance(self) -> None:
        op: dict[str, Any]  # typed: its lookups below are the dict's own, not Python's protocol
        gen2: Gen | None
        t: int  # typed: the comparison and division below are native
        while self.gen is not None:
            ahead = self._ahead_op
            if ahead is not None:
                op, gen2 = ahead, self._ahead_gen
                t = self._ahead_t
                self._ahead_op = None
                self._ahead_gen = None
            else:
                r = self.gen.op(self._ctx())
                if r is None:
                    self.gen = None
                    return
                answer, gen2 = r
                if isinstance(answer, str) and answer == PENDING:
                    return  # the generator as it was is asked again (the real interpreter's rule)
                op = answer
                t = op["time"]
            if t > (self.loop.now - self.t0_ms) * MS:
                self._ahead_op = op
                self._ahead_gen = gen2
                self._ahead_t = t
                self._wake_at(self.t0_ms - (-t // MS))
                return
            self.gen = gen2
            if op.get("_sleep"):
                self._sleep(op)
            else:
                self._dispatch(op)

    def _wake_at(self, ms: int) -> None:
        if 0 <= self._wake_ms <= ms:
            return  # a wake no later is on the loop; it asks again
        self._wake_ms = ms
        self.loop.at(ms, self._wake_fn)

    def _wake(self) -> None:
        if self.loop.now >= self._wake_ms:
            self._wake_ms = -1
        self._step()

    def _sleep(self, op: dict[str, Any]) -> None:
        t = self.thread_of[op["process"]]
        self._take(t)
        self._changed()
        self.sleepers += 1
        self.loop.at(self.loop.now - (-int(op["_sleep"]) // MS), self._wake_sleeper, t)

    def _wake_sleeper(self, t: Any) -> None:
        self.sleepers -= 1
        self._give(t)
        self._changed()
        self._step()

    # ------------------------------------------------------------------ invocation
    def _dispatch(self, op: dict[str, Any]) -> None:
        process = op["process"]
        t = self.thread_of.get(process)
        if t is None or t not in self.free:
            raise RuntimeError(f"generator emitted op for busy or unknown process {process!r}")
        inv = dict(op)
        del inv["time"]
        nemesis = _is_nemesis(t)
        type_ = "info" if nemesis else "invoke"
        inv["type"] = type_
        extra = op_extra(inv)
        f = inv["f"]
        error = inv.get("error")
        self.rec.append(process, type_, f, inv.get("value"), error, extra)
        self._take(t)
        self._changed()
        self._job_ids += 1
        job = self._job_ids
        key: Any = job  # boxed once, for the dict and the job
        j = _Job(self, t, job, key, inv, extra, self.rec.last_fields, process, f, error)
        self.jobs[key] = j
        gen = self.gen
        if gen is not None and not gen.is_inert():
            self.gen = gen.update(self._ctx(), inv)
        if nemesis:
            assert self.nemesis_invoke is not None
            self._complete(j, self.nemesis_invoke(inv))
            return
        timeout = op.get("_timeout")
        ms = self.op_timeout_ms if not timeout else int(float(timeout) * 1000) or self.op_timeout_ms
        self._arm_timeout(job, ms)
        c = self._client(t, process)
        if isinstance(c, InterpretedClient):
            native: InterpretedClient = c
            native.invoke(inv, j)  # a native call (the simulated clients')
        else:
            c.invoke(inv, j)

    def _client(self, t: Any, process: Any) -> VirtualClient:
        cur = self.clients.get(t)
        if cur is None or cur[0] != process:
            cur = (process, self.client_factory(t, process))
            self.clients[t] = cur
        return cur[1]

    def _arm_timeout(self, job: int, ms: int) -> None:
        q = self._last_q
        if q is None or ms != self._last_q_ms:
            q = self._timeouts.get(ms)
            if q is None:
                q = self._timeouts[ms] = TimeoutQueue(self.loop, ms, self._timed_out, self.jobs)
            self._last_q, self._last_q_ms = q, ms
        q.add(job)

    def _timed_out(self, job: int) -> None:
        cur = self.jobs.get(job)
        if cur is not None:
            self._complete(cur, {"type": "info", "error": "timeout"})

    # ------------------------------------------------------------------ completion
    def _complete(self, cur: _Job, res: dict[str, Any]) -> None:
        if cur.closed:
            return  # a late answer to an op already timed out
        t = cur.t
        comp = dict(cur.inv)
        comp.update(res)
        type_: Any
        if _is_nemesis(t):
            type_ = comp["type"] = "info"
            comp["_completion"] = True
        else:
            type_ = comp.get("type")
            if (type_ is None and "type" not in comp) or (isinstance(type_, str) and type_ == "invoke"):
                type_ = comp["type"] = "ok"
        self._completed(t, cur, comp, completion_extra(cur.extra, res), None, type_, comp["process"],
                        comp["f"], comp.get("value"), comp.get("error"), None)

    def _complete_ok(self, cur: _Job, value: Any, value_json: bytes | None) -> None:
        """``_complete(cur, {"type": "ok", "value": value})``, without
        the dict: the completion is the invocation with those two fields
        set (as the update by that dict sets them, in that order), and its
        extra fields the invocation's (neither key is an extra field).
        ``value_json``: the value's JSON if the client has it (a poll's:
        ``Completion.ok_json``), handed to the recorder for the line."""
        if cur.closed:
            return  # a late answer to an op already timed out
        t = cur.t
        comp = dict(cur.inv)
        comp["type"] = "ok"
        comp["value"] = value
        if _is_nemesis(t):  # recorded as _complete records the nemesis's
            comp["type"] = "info"
            comp["_completion"] = True
            self._completed(t, cur, comp, dict(cur.extra), None, "info", cur.process, cur.f, value, cur.error, None)
        else:
            self._completed(t, cur, comp, dict(cur.extra), cur.fields, "ok", cur.process, cur.f, value, cur.error,
                            value_json)

    def _completed(self, t: Any, cur: _Job, comp: dict[str, Any], extra: dict[str, Any],
                   ok_line: dict[str, Any] | None, type_: Any, process: Any, f: Any, value: Any,
                   error: Any, value_json: bytes | None) -> None:
        """Open op ``cur`` (of thread ``t``) completed with the
        fields ``comp`` (extra fields ``extra``, the Op's own; its type,
        process, f, value and error given as they are in it, the nemesis's
        type already ``info``): recorded, its thread freed, the generator
        updated. ``ok_line``: an ``ok`` completion of the invocation's
        fields and extra fields (but type and value), whose line is
        recorded from the invocation's fields (``Recorder.append_ok``,
        given ``value_json``, the value's JSON if known); never the
        nemesis's."""
        cur.closed = True
        del self.jobs[cur.key]
        nemesis = _is_nemesis(t)
        if ok_line is not None:
            self.rec.append_ok(ok_line, process, f, value, error, extra, value_json)
        else:
            self.rec.append(process, type_, f, value, error, extra)
        if self.observe is not None:
            self.observe(self.state, comp)
        self._give(t)
        if not nemesis and isinstance(type_, str) and type_ == "info":
            old = self.process_of[t]
            new = old + self.concurrency
            self.process_of[t] = new
            del self.thread_of[old]
            self.thread_of[new] = t
            self._proc_view = None
        ahead, ahead_gen, gen = self._ahead_op, self._ahead_gen, self.gen
        self._changed()
        if gen is not None and not gen.is_inert():
            self.gen = gen.update(self._ctx(), comp)
        if ahead is not None and self.gen is gen and not _is_nemesis(ahead["process"]):
            # The answer for a later time stands: the generator took no
            # notice of the completion, and a thread freed brings no client
            # op sooner than the one due (client ops wait for the rate's
            # next time, not for a thread, when one was free at the ask),
            # nor any nemesis op (the nemesis waits on its timetable alone).
            # Asking again would only draw anew which free process gets it.
            self._ahead_op = ahead
            self._ahead_gen = ahead_gen
        self._step()
