"""The interpreter: asks the generator for operations, hands them to worker
threads, records invocations and completions (Jepsen's ``generator.interpreter``).

Workers are threads because the clients (confluent-kafka) block. An operation
that runs past its timeout is completed as ``info`` (indeterminate: it may still
take effect) and its thread gets a *new process* and a fresh worker — the stuck
call is abandoned and whatever it returns later is discarded, so a hung client
can never stall the run. A process that completes ``info`` never issues another
operation (Jepsen's rule): its thread continues as process ``p + concurrency``.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from generator import PENDING, Context, Gen
from checkers.history.recorder import Recorder


class Client(Protocol):
    """One process's connection to the system (Jepsen's client protocol)."""

    def open(self) -> None: ...
    def invoke(self, op: dict[str, Any]) -> dict[str, Any]: ...
    def close(self) -> None: ...


#: builds a client for (thread, process)
ClientFactory = Callable[[int, int], Client]


@dataclass
class _Job:
    op: dict[str, Any]
    deadline: float
    worker: "_Worker"


class _Worker(threading.Thread):
    """Runs one thread's operations, reopening its client after a crash."""

    def __init__(self, thread_id: Any, invoke: Callable[[Any, dict], dict], done: queue.Queue) -> None:
        super().__init__(name=f"worker-{thread_id}", daemon=True)
        self.thread_id = thread_id
        self.inbox: queue.Queue = queue.Queue()
        self._invoke = invoke
        self._done = done
        self.abandoned = False

    def run(self) -> None:
        while True:
            op = self.inbox.get()
            if op is None:
                return
            try:
                res = self._invoke(self.thread_id, op)
            except Exception as e:  # a client bug or crash: indeterminate
                res = {"type": "info", "error": f"{type(e).__name__}: {e}"[:300]}
            if not self.abandoned:
                self._done.put((self, op, res))


class Interpreter:
    def __init__(
        self,
        gen: Gen,
        recorder: Recorder,
        concurrency: int,
        client_factory: ClientFactory | None,
        nemesis_invoke: Callable[[dict[str, Any]], dict[str, Any]] | None,
        rng: random.Random,
        op_timeout: float,
        nemesis_timeout: float = 120.0,
        state: dict[str, Any] | None = None,
        observe: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.gen: Gen | None = gen
        self.rec = recorder
        self.concurrency = concurrency
        self.client_factory = client_factory
        self.nemesis_invoke = nemesis_invoke
        self.rng = rng
        self.op_timeout = op_timeout
        self.nemesis_timeout = nemesis_timeout
        self.state = state if state is not None else {}
        self.observe = observe
        self.stop = stop or threading.Event()
        self._done: queue.Queue = queue.Queue()
        self.threads: list[Any] = list(range(concurrency)) + (["nemesis"] if nemesis_invoke else [])
        self.process_of: dict[Any, Any] = {t: t for t in range(concurrency)}
        if nemesis_invoke:
            self.process_of["nemesis"] = "nemesis"
        self.free: set[Any] = set(self.threads)
        self.jobs: dict[Any, _Job] = {}
        self._completions = 0
        self.sleepers: dict[Any, int] = {}  # thread -> wake time (ns) of a sleep op
        self._clients: dict[Any, tuple[int, Client]] = {}
        self._clients_lock = threading.Lock()
        self.workers: dict[Any, _Worker] = {}
        for t in self.threads:
            self._spawn(t)

    # ------------------------------------------------------------ workers
    def _spawn(self, t: Any) -> None:
        w = _Worker(t, self._run_op, self._done)
        self.workers[t] = w
        w.start()

    def _run_op(self, thread: Any, op: dict[str, Any]) -> dict[str, Any]:
        if thread == "nemesis":
            return self.nemesis_invoke(op)  # type: ignore[misc]
        proc = op["process"]
        with self._clients_lock:
            cur = self._clients.get(thread)
        if cur is None or cur[0] != proc:
            if cur is not None:
                _close_quietly(cur[1])
            assert self.client_factory is not None
            c = self.client_factory(thread, proc)
            c.open()
            with self._clients_lock:
                self._clients[thread] = (proc, c)
            cur = (proc, c)
        return cur[1].invoke(op)

    # ------------------------------------------------------------ context
    def _ctx(self) -> Context:
        return Context(
            time=self.rec.now(),
            rng=self.rng,
            free=frozenset(self.free),
            process_of=dict(self.process_of),
            threads=frozenset(self.threads),
            state=self.state,
        )

    def _thread_of(self, process: Any) -> Any:
        for t, p in self.process_of.items():
            if p == process:
                return t
        return None

    # ------------------------------------------------------------ completion
    def _complete(self, worker: _Worker, op: dict[str, Any], res: dict[str, Any]) -> None:
        t = worker.thread_id
        job = self.jobs.get(t)
        if job is None or job.worker is not worker:
            return  # a late answer from an abandoned worker
        del self.jobs[t]
        self._completions += 1
        comp = dict(op)
        comp.pop("time", None)
        comp.update(res)
        comp.setdefault("type", "ok")
        if t == "nemesis":
            comp["type"] = "info"
            comp["_completion"] = True
        comp["index"] = self.rec.record(comp)
        if self.observe:
            self.observe(self.state, comp)
        self.free.add(t)
        if t != "nemesis" and comp["type"] == "info":
            self.process_of[t] = self.process_of[t] + self.concurrency
        if self.gen is not None and not self.gen.is_inert():
            self.gen = self.gen.update(self._ctx(), comp)

    def _wake(self) -> None:
        now = self.rec.now()
        for t, until in list(self.sleepers.items()):
            if now >= until:
                del self.sleepers[t]
                self.free.add(t)

    def _expire(self) -> None:
        self._wake()
        now = time.monotonic()
        for t, job in list(self.jobs.items()):
            if now < job.deadline:
                continue
            job.worker.abandoned = True
            job.worker.inbox.put(None)
            self._spawn(t)
            new_worker = self.workers[t]
            self.jobs[t] = _Job(job.op, job.deadline, new_worker)
            err = "timeout" if t != "nemesis" else "nemesis-timeout"
            self._complete(new_worker, job.op, {"type": "info", "error": err})
            if t != "nemesis":
                with self._clients_lock:
                    stale = self._clients.pop(t, None)
                if stale is not None:  # close off-thread: it may be the one that hangs
                    threading.Thread(target=_close_quietly, args=(stale[1],), daemon=True).start()

    def _wait(self, timeout: float) -> None:
        try:
            w, op, res = self._done.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return
        self._complete(w, op, res)
        while True:
            try:
                w, op, res = self._done.get_nowait()
            except queue.Empty:
                break
            self._complete(w, op, res)

    # ------------------------------------------------------------ main loop
    def run(self) -> None:
        while True:
            self._expire()
            if self.stop.is_set():
                self.gen = None
            if self.gen is None:
                if not self.jobs:
                    return  # sleepers need no waiting for: nothing follows them
                self._wait(0.05)
                continue
            ctx = self._ctx()
            r = self.gen.op(ctx)
            if r is None:
                self.gen = None
                continue
            op, gen2 = r
            if op == PENDING:
                self._wait(0.01)
                continue
            delay = (op["time"] - self.rec.now()) / 1e9
            if delay > 0:
                before = self._completions
                self._wait(min(delay, 0.05))
                if self._completions != before or self.rec.now() < op["time"]:
                    continue  # the world (and the generator) changed, or not yet time: ask again
            self.gen = gen2
            if op.get("_sleep"):
                t = self._thread_of(op["process"])
                self.free.discard(t)
                self.sleepers[t] = self.rec.now() + int(op["_sleep"])
                continue
            self._dispatch(op)

    def _dispatch(self, op: dict[str, Any]) -> None:
        t = self._thread_of(op["process"])
        if t is None or t not in self.free:
            raise RuntimeError(f"generator emitted op for busy or unknown process {op['process']!r}")
        inv = {k: v for k, v in op.items() if k != "time"}
        inv["type"] = "info" if t == "nemesis" else "invoke"
        inv["index"] = self.rec.record(inv)
        self.free.discard(t)
        timeout = op.get("_timeout") or (self.nemesis_timeout if t == "nemesis" else self.op_timeout)
        w = self.workers[t]
        self.jobs[t] = _Job(inv, time.monotonic() + timeout, w)
        if self.gen is not None and not self.gen.is_inert():
            self.gen = self.gen.update(self._ctx(), inv)
        w.inbox.put(inv)

    def close(self) -> None:
        for w in self.workers.values():
            w.inbox.put(None)
        with self._clients_lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for _, c in clients:
            _close_quietly(c)


def _close_quietly(c: Client) -> None:
    try:
        c.close()
    except Exception:
        pass
