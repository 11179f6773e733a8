"""Each model against small hand-made histories: a valid and an invalid one,
plus the crash (``info``) and ``fail`` rules:

* ``fail``: the op did not happen, so it must not affect the model;
* ``info``: the op may take effect at any time after its invocation, or never.
"""

from __future__ import annotations

from typing import Any

import pytest

from checkers.history.op import Op
from checkers.linearizable import check
from checkers.linearizable.models import KV, CASRegister, KafkaLog, MultiRegister, freeze


def H(*rows: tuple) -> list[Op]:
    """rows: (type, process, f, value)."""
    return [Op(type=t, f=f, value=v, process=p, index=i) for i, (t, p, f, v) in enumerate(rows)]


def valid(ops: list[Op], model: str, **kw: Any) -> Any:
    return check(ops, model=model, time_budget=5.0, **kw)["valid"]


# -- register -------------------------------------------------------------

def test_register_read_sees_latest_completed_write():
    ops = H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
            ("invoke", 1, "read", None), ("ok", 1, "read", 1))
    assert valid(ops, "register", initial=0) is True


def test_register_stale_read_after_completed_write_is_a_violation():
    ops = H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
            ("invoke", 1, "read", None), ("ok", 1, "read", 0))
    assert valid(ops, "register", initial=0) is False


def test_register_read_concurrent_with_write_may_see_either_value():
    for seen in (0, 1):
        ops = H(("invoke", 0, "write", 1), ("invoke", 1, "read", None),
                ("ok", 1, "read", seen), ("ok", 0, "write", 1))
        assert valid(ops, "register", initial=0) is True


def test_register_nil_read_is_an_unknown_read_knossos():
    ops = H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
            ("invoke", 1, "read", None), ("ok", 1, "read", None))
    assert valid(ops, "register", initial=0) is True


def test_register_crashed_write_may_take_effect_later():
    # write 2 crashes; a much later read sees 2: it took effect after its invoke
    ops = H(("invoke", 0, "write", 2), ("info", 0, "write", 2),
            ("invoke", 1, "read", None), ("ok", 1, "read", 0),
            ("invoke", 1, "read", None), ("ok", 1, "read", 2))
    assert valid(ops, "register", initial=0) is True


def test_register_crashed_write_may_never_take_effect():
    ops = H(("invoke", 0, "write", 2), ("info", 0, "write", 2),
            ("invoke", 1, "read", None), ("ok", 1, "read", 0))
    assert valid(ops, "register", initial=0) is True


def test_register_crashed_write_cannot_take_effect_before_its_invocation():
    ops = H(("invoke", 1, "read", None), ("ok", 1, "read", 2),
            ("invoke", 0, "write", 2), ("info", 0, "write", 2))
    assert valid(ops, "register", initial=0) is False


def test_register_unmatched_invoke_counts_as_crashed():
    ops = H(("invoke", 0, "write", 3),
            ("invoke", 1, "read", None), ("ok", 1, "read", 3))
    assert valid(ops, "register", initial=0) is True


def test_register_crashed_write_takes_effect_at_most_once():
    # seen 2, then overwritten by 5, then 2 again: one crashed write can't do both
    ops = H(("invoke", 0, "write", 2), ("info", 0, "write", 2),
            ("invoke", 1, "read", None), ("ok", 1, "read", 2),
            ("invoke", 1, "write", 5), ("ok", 1, "write", 5),
            ("invoke", 1, "read", None), ("ok", 1, "read", 2))
    assert valid(ops, "register", initial=0) is False


def test_register_identical_crashed_writes_can_each_take_effect():
    # two crashed writes of 1: one explains the first read of 1, the other the
    # read of 1 after the overwrite with 0 (identical crashed ops are pruned
    # by symmetry, but both may still be used)
    ops = H(("invoke", 0, "write", 1), ("info", 0, "write", 1),
            ("invoke", 2, "write", 1), ("info", 2, "write", 1),
            ("invoke", 1, "read", None), ("ok", 1, "read", 1),
            ("invoke", 1, "write", 0), ("ok", 1, "write", 0),
            ("invoke", 1, "read", None), ("ok", 1, "read", 1))
    assert valid(ops, "register", initial=0) is True
    # ...but not three times with only two crashed writes
    more = ops + H(("invoke", 1, "write", 0), ("ok", 1, "write", 0),
                   ("invoke", 1, "read", None), ("ok", 1, "read", 1))[0:4]
    for i, o in enumerate(more):
        o.index = i
    assert valid(more, "register", initial=0) is False


# -- cas-register -----------------------------------------------------------

def test_cas_register_successful_cas_changes_value():
    ops = H(("invoke", 0, "cas", [0, 4]), ("ok", 0, "cas", [0, 4]),
            ("invoke", 1, "read", None), ("ok", 1, "read", 4))
    assert valid(ops, "cas-register", initial=0) is True


def test_cas_register_ok_cas_from_wrong_value_is_a_violation():
    ops = H(("invoke", 0, "write", 1), ("ok", 0, "write", 1),
            ("invoke", 0, "cas", [0, 4]), ("ok", 0, "cas", [0, 4]))
    assert valid(ops, "cas-register", initial=0) is False


def test_cas_register_failed_cas_did_not_happen():
    # the cas failed, so a read of 4 afterwards has no writer
    ops = H(("invoke", 0, "cas", [0, 4]), ("fail", 0, "cas", [0, 4]),
            ("invoke", 1, "read", None), ("ok", 1, "read", 4))
    assert valid(ops, "cas-register", initial=0) is False
    ok_read_0 = H(("invoke", 0, "cas", [0, 4]), ("fail", 0, "cas", [0, 4]),
                  ("invoke", 1, "read", None), ("ok", 1, "read", 0))
    assert valid(ok_read_0, "cas-register", initial=0) is True


def test_cas_register_crashed_cas_may_apply_later():
    ops = H(("invoke", 0, "cas", [0, 4]), ("info", 0, "cas", [0, 4]),
            ("invoke", 1, "read", None), ("ok", 1, "read", 0),
            ("invoke", 1, "read", None), ("ok", 1, "read", 4))
    assert valid(ops, "cas-register", initial=0) is True


def test_cas_register_model_rejects_malformed_cas_value():
    with pytest.raises(ValueError):
        CASRegister().step(0, ("cas", 5))


def test_cas_register_failed_cas_as_observation_porcupine_etcd():
    """Porcupine's etcd model: a failed cas ran and saw another value."""
    ops = H(("invoke", 0, "write", 4), ("ok", 0, "write", 4),
            ("invoke", 1, "cas", [4, 5]), ("fail", 1, "cas", [4, 5]))
    assert valid(ops, "cas-register", initial=0) is True  # Knossos: dropped
    assert valid(ops, "cas-register", initial=0, failed_cas="observed") is False


def test_cas_register_strict_nil_read_means_no_value_yet():
    ops = H(("invoke", 0, "write", 4), ("ok", 0, "write", 4),
            ("invoke", 1, "read", None), ("ok", 1, "read", None))
    assert valid(ops, "cas-register") is True  # Knossos: unknown read
    assert valid(ops, "cas-register", nil_read="value") is False
    first = H(("invoke", 1, "read", None), ("ok", 1, "read", None))
    assert valid(first, "cas-register", nil_read="value") is True


def test_independent_cas_register_keys_are_separate_registers():
    ops = H(("invoke", 0, "write", ["a", 1]), ("ok", 0, "write", ["a", 1]),
            ("invoke", 1, "read", ["b", None]), ("ok", 1, "read", ["b", 0]),
            ("invoke", 1, "cas", ["b", [0, 3]]), ("ok", 1, "cas", ["b", [0, 3]]))
    r = check(ops, model="cas-register", initial=0, independent=True)
    assert r["valid"] is True
    assert set(r["keys"]) == {"a", "b"}


# -- multi-register -------------------------------------------------------

def test_multi_register_txn_reads_are_atomic_snapshots():
    ops = H(("invoke", 0, "txn", [["write", "x", 1], ["write", "y", 1]]),
            ("ok", 0, "txn", [["write", "x", 1], ["write", "y", 1]]),
            ("invoke", 1, "txn", [["read", "x", None], ["read", "y", None]]),
            ("ok", 1, "txn", [["read", "x", 1], ["read", "y", 1]]))
    assert valid(ops, "multi-register", initial={"x": 0, "y": 0}) is True


def test_multi_register_torn_read_across_keys_is_a_violation():
    # the write of x and y is one txn; a concurrent read may not see half of it
    ops = H(("invoke", 0, "txn", [["write", "x", 1], ["write", "y", 1]]),
            ("invoke", 1, "txn", [["read", "x", None], ["read", "y", None]]),
            ("ok", 1, "txn", [["read", "x", 1], ["read", "y", 0]]),
            ("ok", 0, "txn", [["write", "x", 1], ["write", "y", 1]]))
    assert valid(ops, "multi-register", initial={"x": 0, "y": 0}) is False


def test_multi_register_keys_joined_by_a_txn_form_one_subhistory():
    ops = H(("invoke", 0, "txn", [["write", "x", 1], ["write", "y", 1]]),
            ("ok", 0, "txn", [["write", "x", 1], ["write", "y", 1]]),
            ("invoke", 1, "txn", [["write", "z", 5]]), ("ok", 1, "txn", [["write", "z", 5]]))
    r = check(ops, model="multi-register", initial={"x": 0, "y": 0, "z": 0})
    assert r["valid"] is True
    assert set(r["keys"]) == {"x,y", "z"}


def test_multi_register_nil_read_is_always_legal():
    state = MultiRegister({"x": 0}).init()
    assert MultiRegister().step(state, ("txn", (("read", "x", None),))) == (True, state)


# -- mutex -------------------------------------------------------------------

def test_mutex_acquire_release_alternate():
    ops = H(("invoke", 0, "acquire", None), ("ok", 0, "acquire", None),
            ("invoke", 1, "acquire", None), ("invoke", 0, "release", None),
            ("ok", 0, "release", None), ("ok", 1, "acquire", None))
    assert valid(ops, "mutex") is True


def test_mutex_two_holders_is_a_violation():
    ops = H(("invoke", 0, "acquire", None), ("ok", 0, "acquire", None),
            ("invoke", 1, "acquire", None), ("ok", 1, "acquire", None))
    assert valid(ops, "mutex") is False


def test_mutex_crashed_release_may_free_the_lock():
    ops = H(("invoke", 0, "acquire", None), ("ok", 0, "acquire", None),
            ("invoke", 0, "release", None), ("info", 0, "release", None),
            ("invoke", 1, "acquire", None), ("ok", 1, "acquire", None))
    assert valid(ops, "mutex") is True


def test_mutex_failed_release_did_not_free_the_lock():
    ops = H(("invoke", 0, "acquire", None), ("ok", 0, "acquire", None),
            ("invoke", 0, "release", None), ("fail", 0, "release", None),
            ("invoke", 1, "acquire", None), ("ok", 1, "acquire", None))
    assert valid(ops, "mutex") is False


# -- set ---------------------------------------------------------------------

def test_set_read_returns_every_completed_add():
    ops = H(("invoke", 0, "add", 1), ("ok", 0, "add", 1),
            ("invoke", 1, "add", 2), ("invoke", 0, "read", None),
            ("ok", 0, "read", [1]), ("ok", 1, "add", 2),
            ("invoke", 0, "read", None), ("ok", 0, "read", [2, 1]))
    assert valid(ops, "set") is True


def test_set_lost_add_is_a_violation():
    ops = H(("invoke", 0, "add", 1), ("ok", 0, "add", 1),
            ("invoke", 0, "read", None), ("ok", 0, "read", []))
    assert valid(ops, "set") is False


def test_set_crashed_add_may_appear_or_not():
    for seen in ([], [7]):
        ops = H(("invoke", 0, "add", 7), ("info", 0, "add", 7),
                ("invoke", 1, "read", None), ("ok", 1, "read", seen))
        assert valid(ops, "set") is True


# -- fifo-queue ----------------------------------------------------------------

def test_fifo_queue_dequeues_in_enqueue_order():
    ops = H(("invoke", 0, "enqueue", 1), ("ok", 0, "enqueue", 1),
            ("invoke", 0, "enqueue", 2), ("ok", 0, "enqueue", 2),
            ("invoke", 1, "dequeue", None), ("ok", 1, "dequeue", 1),
            ("invoke", 1, "dequeue", None), ("ok", 1, "dequeue", 2))
    assert valid(ops, "fifo-queue") is True


def test_fifo_queue_reordering_is_a_violation():
    ops = H(("invoke", 0, "enqueue", 1), ("ok", 0, "enqueue", 1),
            ("invoke", 0, "enqueue", 2), ("ok", 0, "enqueue", 2),
            ("invoke", 1, "dequeue", None), ("ok", 1, "dequeue", 2))
    assert valid(ops, "fifo-queue") is False


def test_fifo_queue_concurrent_enqueues_may_be_ordered_either_way():
    ops = H(("invoke", 0, "enqueue", 1), ("invoke", 2, "enqueue", 2),
            ("ok", 0, "enqueue", 1), ("ok", 2, "enqueue", 2),
            ("invoke", 1, "dequeue", None), ("ok", 1, "dequeue", 2),
            ("invoke", 1, "dequeue", None), ("ok", 1, "dequeue", 1))
    assert valid(ops, "fifo-queue") is True


def test_fifo_queue_failed_enqueue_cannot_be_dequeued():
    ops = H(("invoke", 0, "enqueue", 1), ("fail", 0, "enqueue", 1),
            ("invoke", 1, "dequeue", None), ("ok", 1, "dequeue", 1))
    assert valid(ops, "fifo-queue") is False


def test_fifo_queue_crashed_dequeue_may_have_consumed_the_head():
    ops = H(("invoke", 0, "enqueue", 1), ("ok", 0, "enqueue", 1),
            ("invoke", 0, "enqueue", 2), ("ok", 0, "enqueue", 2),
            ("invoke", 2, "dequeue", None), ("info", 2, "dequeue", None),
            ("invoke", 1, "dequeue", None), ("ok", 1, "dequeue", 2))
    assert valid(ops, "fifo-queue") is True


# -- kv (Porcupine) ---------------------------------------------------------

def test_kv_unset_key_reads_empty_string_and_append_concatenates():
    ops = H(("invoke", 0, "get", ["k", None]), ("ok", 0, "get", ["k", ""]),
            ("invoke", 0, "put", ["k", "a"]), ("ok", 0, "put", ["k", "a"]),
            ("invoke", 1, "append", ["k", "b"]), ("ok", 1, "append", ["k", "b"]),
            ("invoke", 0, "get", ["k", None]), ("ok", 0, "get", ["k", "ab"]))
    r = check(ops, model="kv")
    assert r["valid"] is True and list(r["keys"]) == ["k"]


def test_kv_lost_append_is_a_violation_on_that_key_only():
    ops = H(("invoke", 0, "append", ["k", "x"]), ("ok", 0, "append", ["k", "x"]),
            ("invoke", 0, "get", ["k", None]), ("ok", 0, "get", ["k", ""]),
            ("invoke", 1, "put", ["j", "y"]), ("ok", 1, "put", ["j", "y"]))
    r = check(ops, model="kv")
    assert r["valid"] is False
    assert r["failed_keys"] == ["k"] and r["keys"]["j"]["valid"] is True
    assert r["unlinearizable"] == [2, 3]


def test_kv_accepts_the_key_in_a_field_of_its_own():
    """Porcupine's kv logs: ``{:f :get, :key "k", :value nil}``; the same
    verdict as ``[k, v]`` values."""
    def row(t, p, f, k, v):
        return {"type": t, "process": p, "f": f, "key": k, "value": v}
    ok = [row("invoke", 0, "put", "k", "a"), row("ok", 0, "put", "k", "a"),
          row("invoke", 1, "get", "k", None), row("ok", 1, "get", "k", "a"),
          row("invoke", 1, "get", "j", None), row("ok", 1, "get", "j", "")]
    r = check(ok, model="kv")
    assert r["valid"] is True and sorted(r["keys"]) == ["j", "k"]
    bad = ok[:2] + [row("invoke", 1, "get", "k", None), row("ok", 1, "get", "k", "")]
    assert check(bad, model="kv")["failed_keys"] == ["k"]


def test_kv_crashed_append_may_apply_later():
    ops = H(("invoke", 0, "append", ["k", "x"]), ("info", 0, "append", ["k", "x"]),
            ("invoke", 1, "get", ["k", None]), ("ok", 1, "get", ["k", ""]),
            ("invoke", 1, "get", ["k", None]), ("ok", 1, "get", ["k", "x"]))
    assert valid(ops, "kv") is True


# -- kafka-log ------------------------------------------------------------

def send(p: int, key: str, v: int, off: int | None = None, t: str = "ok") -> list[tuple]:
    done = [["send", key, [off, v]]] if off is not None else [["send", key, v]]
    return [("invoke", p, "send", [["send", key, v]]), (t, p, "send", done)]


def poll(p: int, seen: dict) -> list[tuple]:
    return [("invoke", p, "poll", [["poll"]]), ("ok", p, "poll", [["poll", seen]])]


def test_kafka_log_poll_sees_a_contiguous_slice_in_offset_order():
    ops = H(*send(0, "t-0", 10, 0), *send(1, "t-0", 11, 1), *send(0, "t-1", 20, 0),
            *poll(2, {"t-0": [[0, 10], [1, 11]], "t-1": [[0, 20]]}),
            *poll(2, {"t-0": [[1, 11]]}))
    r = check(ops, model="kafka-log")
    assert r["valid"] is True
    assert set(r["keys"]) == {"t-0", "t-1"}


def test_kafka_log_poll_skipping_an_acked_record_is_a_violation():
    ops = H(*send(0, "t-0", 10, 0), *send(0, "t-0", 11, 1), *send(0, "t-0", 12, 2),
            *poll(1, {"t-0": [[0, 10], [2, 12]]}))
    r = check(ops, model="kafka-log")
    assert r["valid"] is False and r["failed_keys"] == ["t-0"]


def test_kafka_log_offsets_must_follow_real_time_order_of_sends():
    # send 11 completes before send 10 is invoked, yet got the lower offset
    ops = H(*send(0, "t-0", 11, 1), *send(1, "t-0", 10, 0))
    assert valid(ops, "kafka-log") is False


def test_kafka_log_offset_gaps_are_allowed_unless_dense():
    ops = H(*send(0, "t-0", 10, 0), *send(0, "t-0", 11, 5))
    assert valid(ops, "kafka-log") is True
    assert valid(ops, "kafka-log", dense=True) is False
    # the first record may sit at any offset (log start after retention)
    later = H(*send(0, "t-0", 10, 7), *send(0, "t-0", 11, 8))
    assert valid(later, "kafka-log", dense=True) is True


def test_kafka_log_dense_unseen_crashed_send_may_fill_the_gap():
    ops = H(*send(0, "t-0", 10, 0),
            ("invoke", 1, "send", [["send", "t-0", 11]]), ("info", 1, "send", [["send", "t-0", 11]]),
            *send(0, "t-0", 12, 2))
    assert valid(ops, "kafka-log", dense=True) is True


def test_kafka_log_poll_of_unacked_value_needs_a_crashed_send():
    crashed = H(("invoke", 0, "send", [["send", "t-0", 7]]),
                ("info", 0, "send", [["send", "t-0", 7]]),
                *poll(1, {"t-0": [[0, 7]]}))
    assert valid(crashed, "kafka-log") is True
    failed = H(("invoke", 0, "send", [["send", "t-0", 7]]),
               ("fail", 0, "send", [["send", "t-0", 7]]),
               *poll(1, {"t-0": [[0, 7]]}))
    assert valid(failed, "kafka-log") is False


def test_kafka_log_model_poll_matches_slice_by_offset():
    m = KafkaLog()
    ok, log = m.step(m.init(), ("txn", (("send", 0, "a"), ("send", 1, "b"), ("send", 2, "c"))))
    assert ok and log.records() == [(0, "a"), (1, "b"), (2, "c")]
    assert m.step(log, ("txn", (("poll", ((1, "b"), (2, "c"))),)))[0] is True
    assert m.step(log, ("txn", (("poll", ((0, "a"), (1, "b"))),)))[0] is True
    assert m.step(log, ("txn", (("poll", ((1, "c"),)),)))[0] is False
    assert m.step(log, ("txn", (("poll", ((0, "a"), (2, "c"))),)))[0] is False
    assert m.step(log, ("txn", (("poll", ((3, "d"),)),)))[0] is False


def test_kafka_log_states_reached_by_different_paths_are_equal():
    m = KafkaLog()
    _, a = m.step(m.init(), ("txn", (("send", 0, "a"),)))
    _, b = m.step(m.init(), ("txn", (("send", 0, "a"),)))
    _, a2 = m.step(a, ("txn", (("send", 1, "b"),)))
    _, b2 = m.step(b, ("txn", (("send", None, "b"),)))
    assert a2 == b2 and hash(a2) == hash(b2) and a2 is not b2
    _, c2 = m.step(a, ("txn", (("send", 2, "b"),)))
    assert c2 != a2


def test_kv_split_of_plain_and_nested_values_is_the_frozen_value() -> None:
    kv = KV()
    for value in (["k", "x 0 0 y"], ["k", None], [1, 2.5], ["k", ["a", 1]], ["k", {"a": 1}], ("k", "v")):
        fv = freeze(value)
        assert kv.split("append", value) == [(fv[0], "append", fv[1])]
