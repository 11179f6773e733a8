"""The interpreter: history order, op timeouts as info, crashed processes are
replaced, nemesis ops interleave with client ops, the history is streamed."""

import random
import threading
import time

from checkers.history.jsonl import read_jsonl
import generator as g
from checkers.history.recorder import Recorder
from harness.lifecycle.interpreter import Interpreter


class ListClient:
    """An in-memory append-only log shared by processes (a real, tiny system
    under test for the interpreter, not a stand-in for Kafka)."""

    log: list = []
    lock = threading.Lock()

    def __init__(self, thread, process, hang_on=None):
        self.process = process
        self.hang_on = hang_on
        self.opened = False

    def open(self):
        self.opened = True

    def close(self):
        pass

    def invoke(self, op):
        if op["f"] == "hang" and self.hang_on:
            self.hang_on["released"].wait(60)  # held until the test lets go
            self.hang_on["returned"].set()
            return {"type": "ok"}
        with self.lock:
            self.log.append(op["value"])
            return {"type": "ok", "value": [op["value"], len(self.log) - 1]}


def run(gen, tmp_path, concurrency=3, op_timeout=5.0, nemesis=None, factory=None):
    rec = Recorder(tmp_path / "h.jsonl", fsync_every=1)
    it = Interpreter(gen, rec, concurrency, factory or (lambda t, p: ListClient(t, p)), nemesis,
                     random.Random(1), op_timeout=op_timeout)
    it.run()
    it.close()
    rec.close()
    return read_jsonl(tmp_path / "h.jsonl")


def test_every_invoke_has_one_completion_in_file_order(tmp_path):
    ops = run(g.clients(g.limit(30, lambda c: {"f": "w", "value": c.rng.randint(0, 9)})), tmp_path)
    assert [o.index for o in ops] == list(range(len(ops)))
    assert sum(o.type == "invoke" for o in ops) == 30
    assert sum(o.type == "ok" for o in ops) == 30
    open_ = {}
    for o in ops:
        if o.type == "invoke":
            assert o.process not in open_  # a process runs one op at a time
            open_[o.process] = o
        else:
            assert open_.pop(o.process).f == o.f
    assert all(a.time <= b.time for a, b in zip(ops, ops[1:]))


def test_timed_out_op_is_info_and_its_process_is_replaced(tmp_path):
    gen = g.clients(g.seq(g.Once({"f": "hang", "process": 0}), g.limit(5, lambda c: {"f": "w", "value": 1})))
    hang_on = {"released": threading.Event(), "returned": threading.Event()}
    try:
        ops = run(gen, tmp_path, concurrency=2, op_timeout=0.3,
                  factory=lambda t, p: ListClient(t, p, hang_on=hang_on))
        # the run finished while the call was still blocked: it did not wait for it
        assert not hang_on["returned"].is_set()
    finally:
        hang_on["released"].set()
    hang = [o for o in ops if o.f == "hang"]
    assert [o.type for o in hang] == ["invoke", "info"] and hang[1].error == "timeout"
    assert 0 not in {o.process for o in ops if o.f == "w"}  # process 0 never reused


def test_info_completion_retires_the_process(tmp_path):
    class Crashy(ListClient):
        def invoke(self, op):
            return {"type": "info", "error": "boom"} if op["f"] == "crash" else super().invoke(op)

    rec = Recorder(tmp_path / "h.jsonl")
    gen = g.clients(g.seq(g.Once({"f": "crash", "process": 1}), g.Synchronize(g.Once({"f": "w", "value": 0, "process": 4}))))
    it = Interpreter(gen, rec, 3, lambda t, p: Crashy(t, p), None, random.Random(1), op_timeout=5)
    it.run()
    it.close()
    rec.close()
    ops = read_jsonl(tmp_path / "h.jsonl")
    assert it.process_of[1] == 4  # thread 1 continues as process 1 + concurrency
    assert [(o.f, o.type, o.process) for o in ops] == [
        ("crash", "invoke", 1), ("crash", "info", 1), ("w", "invoke", 4), ("w", "ok", 4)]


def test_nemesis_ops_interleave_and_are_info(tmp_path):
    done = []

    def nem(op):
        done.append(op["f"])
        return {"value": {"ok": True}}

    gen = g.any_(
        g.clients(g.time_limit(0.6, g.delay(0.02, lambda c: {"f": "w", "value": 0}))),
        g.nemesis(g.seq(g.sleep(0.2), {"f": "start-kill"}, g.sleep(0.2), {"f": "stop-kill"})),
    )
    ops = run(gen, tmp_path, nemesis=nem)
    nem_ops = [o for o in ops if o.process == "nemesis"]
    assert [o.f for o in nem_ops] == ["start-kill", "start-kill", "stop-kill", "stop-kill"]
    assert {o.type for o in nem_ops} == {"info"}
    first_client = min(o.index for o in ops if o.f == "w")
    last_client = max(o.index for o in ops if o.f == "w")
    assert first_client < nem_ops[0].index < last_client  # interleaved, not sequential
    assert done == ["start-kill", "stop-kill"]


def test_history_is_streamed_while_the_run_goes_on(tmp_path):
    """Lines reach the file within the drain interval, long before close: a
    SIGKILLed harness leaves a checkable history."""
    rec = Recorder(tmp_path / "h.jsonl")
    for i in range(10):
        rec.record({"type": "invoke", "f": "w", "value": i, "process": 0, "_private": 1, "acks": "all"})
    deadline = time.monotonic() + 2
    while len(read_jsonl(tmp_path / "h.jsonl")) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    ops = read_jsonl(tmp_path / "h.jsonl")
    assert [o.value for o in ops] == list(range(10)) and [o.index for o in ops] == list(range(10))
    assert ops[0].extra == {"acks": "all"}  # _-keys are never recorded
    rec.close()
