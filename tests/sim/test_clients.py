"""The simulated clients take the queue workload's operations and decide ok /
fail / info like librdkafka (notes/kafka-wire.md, "Client behaviour that
decides ok / fail / info"), answering with the fields a real client's
``invoke`` returns; they record nothing (the interpreter does)."""

from __future__ import annotations

from reference_impl.core.messages import Errors
from reference_impl.sim.clients import ClientConfig, ClientSettings, Workload
from reference_impl.sim.script import Scenario


def _workload(s: Scenario, tps: list, **cfg: int) -> Workload:
    return Workload(s.sim, tps, ClientConfig(**cfg))


def _send(key: str, value: int) -> dict:
    return {"f": "send", "process": 0, "value": [["send", key, value]], "acks": "all"}


def _leader_alone_in_isr(seed: int) -> tuple[Scenario, object]:
    """Broker 1 leads a partition (RF 3, min ISR 2) whose ISR has shrunk to
    itself: it is cut from 2 and 3, and an acks=1 write made it notice."""
    s = Scenario(seed=seed)
    (tp,) = s.start(replicas=(1, 2, 3))
    s.isolate(1, from_=[2, 3])
    assert s.produce(1, tp, [0], acks=1).error == Errors.NONE
    s.wait(lambda: s.leader_isr(1, tp) == ([1], "committed"), what="ISR below min ISR")
    return s, tp


def test_not_enough_replicas_without_retries_is_a_definite_fail() -> None:
    s, tp = _leader_alone_in_isr(seed=11)
    c = _workload(s, [tp]).client(0, 0, ClientSettings("all", retries=0))
    done: list = []
    c.invoke(_send(str(tp), 7), done.append)
    s.wait(lambda: bool(done), what="the send completing")
    assert done == [{"type": "fail", "error": "NOT_ENOUGH_REPLICAS"}]


def test_not_enough_replicas_retried_until_the_delivery_timeout_is_fail_when_never_ambiguous() -> None:
    s, tp = _leader_alone_in_isr(seed=12)
    c = _workload(s, [tp]).client(0, 0, ClientSettings("all", retries=3))
    done: list = []
    c.invoke(_send(str(tp), 8), done.append)
    s.wait(lambda: bool(done), what="the send completing")
    assert done == [{"type": "fail", "error": "NOT_ENOUGH_REPLICAS"}]


def test_unreachable_cluster_ends_in_info_after_the_delivery_timeout_and_a_new_process_starts_afresh() -> None:
    s = Scenario(seed=13)
    (tp,) = s.start(replicas=(1, 2, 3))
    wl = _workload(s, [tp], delivery_timeout_ms=4000, request_timeout_ms=1000)
    c = wl.client(0, 0, ClientSettings("all"))
    s.sim.cut({(c.ep.name, b) for b in s.sim.broker_ids})
    done: list = []
    t0 = s.sim.now
    c.invoke(_send(str(tp), 9), done.append)
    s.wait(lambda: bool(done), what="the send completing")
    assert done[0]["type"] == "info" and s.sim.now - t0 >= 4000
    s.sim.heal()
    again = wl.client(0, 4, ClientSettings("all"))  # the thread's next process
    assert again is c and c.process == 4 and c.producer.meta.leaders == {}
    done.clear()
    c.invoke(_send(str(tp), 10), done.append)
    s.wait(lambda: bool(done), what="the next send")
    assert done == [{"type": "ok", "value": [["send", str(tp), [0, 10]]]}]


def test_acked_sends_are_read_back_by_a_final_read_of_their_key() -> None:
    s = Scenario(seed=14)
    (tp,) = s.start(replicas=(1, 2, 3))
    c = _workload(s, [tp]).client(0, 0, ClientSettings("1"))
    for v in range(5):
        done: list = []
        c.invoke(_send(str(tp), v), done.append)
        s.wait(lambda: bool(done), what="send")
        assert done[0]["type"] == "ok"
    got: list = []
    c.invoke({"f": "poll", "value": [["poll"]], "final": True, "key": str(tp), "upto": 4}, got.append)
    s.wait(lambda: bool(got), what="final read")
    assert got == [{"type": "ok", "value": [["poll", {str(tp): [[i, i] for i in range(5)]}]], "caught_up": True}]


def test_a_poll_reads_onwards_from_the_processs_positions_and_an_assign_starts_again_from_zero() -> None:
    s = Scenario(seed=15)
    (tp,) = s.start(replicas=(1, 2, 3))
    c = _workload(s, [tp]).client(0, 0, ClientSettings("all"))

    def do(op: dict) -> dict:
        out: list = []
        c.invoke(op, out.append)
        s.wait(lambda: bool(out), what=op["f"])
        return out[0]

    poll = {"f": "poll", "value": [["poll"]]}
    for v in range(3):
        assert do(_send(str(tp), v))["type"] == "ok"
    assert do(poll)["value"] == [["poll", {str(tp): [[0, 0], [1, 1], [2, 2]]}]]
    assert do(_send(str(tp), 3))["type"] == "ok"
    assert do(poll)["value"] == [["poll", {str(tp): [[3, 3]]}]]
    assert do({"f": "assign", "value": [str(tp)]}) == {"type": "ok", "value": [str(tp)]}
    assert do(poll)["value"] == [["poll", {str(tp): [[0, 0], [1, 1], [2, 2], [3, 3]]}]]


def test_a_poll_reads_the_partitions_assigned_last_keyed_in_key_order() -> None:
    """A consumer spells the keys of the partition list it polls once
    (reference_impl.sim.consumer._Keys), until an assign replaces the list:
    each poll reads the partitions assigned last, and its value lists their
    keys in key order whatever the order assigned (the queue workload's
    poll value, workloads.queue)."""
    s = Scenario(seed=17)
    tps = s.start(replicas=(1, 2, 3), partitions=2)
    c = _workload(s, tps).client(0, 0, ClientSettings("all"))

    def do(op: dict) -> dict:
        out: list = []
        c.invoke(op, out.append)
        s.wait(lambda: bool(out), what=op["f"])
        return out[0]

    poll = {"f": "poll", "value": [["poll"]]}
    assert do(_send("t-0", 0))["type"] == "ok" and do(_send("t-1", 1))["type"] == "ok"
    assert do(poll)["value"] == [["poll", {"t-0": [[0, 0]], "t-1": [[0, 1]]}]]
    assert do({"f": "assign", "value": ["t-1"]})["type"] == "ok"
    assert do(poll)["value"] == [["poll", {"t-1": [[0, 1]]}]]
    assert do({"f": "assign", "value": ["t-1", "t-0"]})["type"] == "ok"
    got = do(poll)["value"]
    assert got == [["poll", {"t-0": [[0, 0]], "t-1": [[0, 1]]}]] and list(got[0][1]) == ["t-0", "t-1"]


def test_a_send_marked_to_crash_is_info_crashed_and_its_client_is_dead() -> None:
    s = Scenario(seed=16)
    (tp,) = s.start(replicas=(1, 2, 3))
    c = _workload(s, [tp]).client(0, 0, ClientSettings("all"))
    done: list = []
    c.invoke({**_send(str(tp), 1), "crash": 0}, done.append)
    s.wait(lambda: bool(done), what="the crash")
    assert done == [{"type": "info", "error": "crashed"}]
    assert not c.producer.busy and c.ep._pending == {}


def test_a_send_given_as_tuples_with_its_crash_as_text_is_sent_and_answered_as_from_lists() -> None:
    """The client reads a send's one micro-op from lists without the
    generic protocol; a send spelt with tuples (a replayed or hand-made
    op) is the same send, and its crash mark is taken as ``int()`` takes
    it (``"0"``: the client dies at once, as with ``0``)."""
    s = Scenario(seed=16)
    (tp,) = s.start(replicas=(1, 2, 3))
    wl = _workload(s, [tp])
    done: list = []
    wl.client(0, 0, ClientSettings("all")).invoke(
        {"f": "send", "process": 0, "value": (("send", str(tp), 7),), "acks": "all"}, done.append)
    s.wait(lambda: bool(done), what="the send")
    assert done == [{"type": "ok", "value": [["send", str(tp), [0, 7]]]}]
    crashed: list = []
    c = wl.client(1, 1, ClientSettings("all"))
    c.invoke({**_send(str(tp), 8), "crash": "0"}, crashed.append)
    s.wait(lambda: bool(crashed), what="the crash")
    assert crashed == [{"type": "info", "error": "crashed"}]
    try:
        c.invoke({**_send(str(tp), 9), "crash": None}, crashed.append)
    except TypeError:
        pass
    else:
        raise AssertionError("a crash mark of None is refused, as int(None) refuses it")


def test_a_send_and_a_poll_are_the_answer_callbacks_of_their_requests() -> None:
    """The send a producer has in flight is the reply callback of each of
    its attempts, and a poll the answer callback of each of its fetches
    (one object per operation, where each request made one); a client
    started afresh sends and is answered as before."""
    s = Scenario(seed=14)
    (tp,) = s.start(replicas=(1, 2, 3))
    c = _workload(s, [tp]).client(0, 0, ClientSettings("all"))
    done: list = []
    c.invoke(_send(str(tp), 4), done.append)  # the producer and the consumer learn the leader
    c.consumer.poll(done.append)
    s.wait(lambda: len(done) == 2, what="the first send and poll")
    done.clear()
    s.sim.cut({(c.ep.name, b) for b in s.sim.broker_ids})  # nothing is answered while cut
    c.invoke(_send(str(tp), 5), done.append)
    c.consumer.poll(done.append)
    assert [cb for cb, _ in c.ep._pending.values()] == [c.producer._op, c.consumer._poll]
    c.kill()  # as for a new process's client: what was in flight is forgotten
    s.sim.heal()
    c.invoke(_send(str(tp), 6), done.append)
    s.wait(lambda: bool(done), what="the next send")
    assert len(done) == 1 and done[0]["type"] == "ok" and done[0]["value"][0][2][1] == 6


def test_the_clients_name_each_partition_by_the_brokers_own_object_once_metadata_showed_it() -> None:
    """The controller makes the brokers' ``TopicPartition`` (``PartitionRecord``,
    seed 000's metadata log), the harness the clients': equal objects, so a
    dict keyed by one and looked up by the other compared them by ``__eq__``
    on every request and answer. After a metadata reply the clients hold the
    brokers' object (:class:`reference_impl.sim.endpoint.Partitions`): a
    send, a poll's positions and its fetches name it, and what they read and
    answer is unchanged."""
    s = Scenario(seed=16)
    (tp,) = s.start(replicas=(1, 2, 3))
    wl = _workload(s, [tp])
    c = wl.client(0, 0, ClientSettings("all"))

    def do(op: dict) -> dict:
        out: list = []
        c.invoke(op, out.append)
        s.wait(lambda: bool(out), what=op["f"])
        return out[0]

    brokers_tp = next(k for k in s.sim.hosts[1].node.broker.partitions if k == tp)
    assert brokers_tp is not tp  # the premise: two objects for one partition
    assert do(_send(str(tp), 0)) == {"type": "ok", "value": [["send", str(tp), [0, 0]]]}
    assert wl.by_key[str(tp)] is brokers_tp and wl.parts.version == 1
    assert do({"f": "poll", "value": [["poll"]]})["value"] == [["poll", {str(tp): [[0, 0]]}]]
    assert c.consumer.assigned[0] is brokers_tp
    (key,) = c.consumer.positions
    assert key is brokers_tp and c.consumer.positions[key] == 1
    assert do(_send(str(tp), 1))["type"] == "ok"
    assert do({"f": "poll", "value": [["poll"]]})["value"] == [["poll", {str(tp): [[1, 1]]}]]


def test_a_poll_lists_the_keys_it_read_in_key_order_and_leaves_out_those_it_did_not() -> None:
    """A poll's value holds the keys that read records, sorted, each with
    its records; a key polled that read nothing is left out, whether or
    not the others read (a poll lists every key it polls from the start:
    one that read them all is its own value)."""
    s = Scenario(seed=15)
    tps = s.start(replicas=(1, 2, 3), partitions=3)
    c = _workload(s, tps).client(0, 0, ClientSettings("all"))
    done: list = []

    def send(tp: object, value: int) -> None:
        done.clear()
        c.invoke(_send(str(tp), value), done.append)
        s.wait(lambda: len(done) == 1, what="the send")
        assert done[0]["type"] == "ok"

    def read_all(want: int) -> dict:
        """Poll until ``want`` records are read: key -> values, each poll's
        keys sorted and each with records."""
        seen: dict = {}
        for _ in range(50):
            done.clear()
            c.consumer.poll(done.append)
            s.wait(lambda: len(done) == 1, what="the poll")
            ((name, got),) = done[0]["value"]
            assert name == "poll" and list(got) == sorted(got) and all(got.values())
            for k, pairs in got.items():
                seen.setdefault(k, []).extend(v for _, v in pairs)
            if sum(map(len, seen.values())) >= want:
                return seen
        raise AssertionError(seen)

    send(tps[2], 10)
    send(tps[0], 11)
    assert read_all(2) == {str(tps[0]): [11], str(tps[2]): [10]}
    for i, tp in enumerate(tps):
        send(tp, 20 + i)
    assert read_all(3) == {str(tp): [20 + i] for i, tp in enumerate(tps)}


def test_a_final_read_takes_each_record_once_in_offset_order_across_a_reset() -> None:
    """A final read takes what each fetch read as it is while its position
    only moved forward (every record past the ones before it); after a
    reset (OFFSET_OUT_OF_RANGE: the log read again from offset 0) a record
    read before is not taken again, and the reads end in offset order."""
    from reference_impl.core.messages import Batch, ClientFetchResponse, FetchPartitionResponse
    from reference_impl.sim.consumer import FinalRead

    s = Scenario(seed=16)
    (tp,) = s.start(replicas=(1, 2, 3))
    c = _workload(s, [tp]).client(0, 0, ClientSettings("all"))
    done: list = []
    fr = FinalRead(s.sim, c.ep, c.wl.topics, c.wl.cfg, tp, 9, done.append)
    # the fetches are handed in below; the loop is never run, so the
    # requests the read sends meanwhile are never answered

    def fetch(*batches: Batch, error: int = Errors.NONE, hw: int = 20) -> None:
        fr._on_fetch(ClientFetchResponse(None, (FetchPartitionResponse(tp, error, high_watermark=hw, batches=batches),)))

    b = [Batch(o, 1, 1, (100 + o,)) for o in range(12)]
    fetch(*b[0:3])
    fetch(*b[3:5])
    assert fr.reads == [[o, 100 + o] for o in range(5)] and fr.pos == 5
    fetch(error=Errors.OFFSET_OUT_OF_RANGE)
    assert fr.pos == 0
    fetch(*b[0:7])
    fetch(*b[7:11], hw=11)
    assert done and done[0]["type"] == "ok" and done[0]["resets"] == [f"{tp}@5:OFFSET_OUT_OF_RANGE"]
    assert done[0]["value"] == [["poll", {str(tp): [[o, 100 + o] for o in range(11)]}]]


def test_a_send_started_from_the_completion_of_the_last_completes_with_its_own_key_and_value() -> None:
    """A client hands its producer one send at a time, with the one
    completion object it keeps set anew for each (SimClient._send): a send
    invoked from inside the completion of the one before (the interpreter
    hands a freed thread its next op at once) completes with its own key
    and value, and the one before with its own."""
    s = Scenario(seed=17)
    tp, tp2 = s.start(replicas=(1, 2, 3), partitions=2)
    c = _workload(s, [tp, tp2]).client(0, 0, ClientSettings("all"))
    done: list = []

    def first(res: dict) -> None:
        done.append(res)
        c.invoke(_send(str(tp2), 21), done.append)

    c.invoke(_send(str(tp), 20), first)
    s.wait(lambda: len(done) == 2, what="both sends")
    assert done == [{"type": "ok", "value": [["send", str(tp), [0, 20]]]},
                    {"type": "ok", "value": [["send", str(tp2), [0, 21]]]}]
