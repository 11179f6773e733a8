"""Real Kafka's state seen from outside, without patching it (glass box from
outside, the counterpart of the reference broker's own trace events).

What can be seen, and how:

* per partition, from ``DescribeTopicPartitions`` (KIP-966's admin API,
  answered by any broker from its metadata image): leader, leader epoch,
  replicas, ISR, ELR and last-known ELR;
* per partition, the high watermark: ``ListOffsets`` LATEST with
  read_uncommitted, answered by the leader;
* the KRaft quorum, from ``DescribeQuorum`` (forwarded by a broker to the
  active controller): leader id, its epoch, the metadata log's high
  watermark and each voter's log end offset;
* the active controller, also from the controllers' ``quorum-state`` files
  (read through the host contract), when no broker answers.

What cannot be seen this way: a replica's own LEO and HW (only the leader's
HW, and only while it answers), the partition epoch (not in any client
API), the moment a follower truncates or a leader appends, the controller's
uncommitted records, a broker's pending ISR change (AlterPartition in
flight), and anything during a window shorter than the polling interval.

:class:`MetadataPoller` writes what it sees to ``<run>/nodes/observer/
trace.jsonl`` in the trace format the invariant monitor reads
(``checkers.invariants``): one ``partition_metadata`` event whenever a
partition's observed state changes (node ``observer``; ``partition_epoch`` is
the observer's own count of distinct states it has seen for that partition,
since Kafka does not expose the real one, so the monitor's per-epoch
agreement check is vacuous for it while its leader-epoch monotonicity, ISR
within replicas, leader within ISR and ELR checks apply), one ``raft_state``
event (node = the leader's name, role ``leader``) per new quorum epoch, and
``observed_hw`` events (tp, hw, leader, leader_epoch) the monitor ignores.
An answer with an older leader epoch than one seen before (a broker's stale
image) is an ``observed_stale`` event, not a state (:meth:`MetadataPoller._partition`).

The poll's parts (partition metadata; watermarks and small ISRs; the quorum)
look on threads and admin clients of their own, each ask bounded by
``PART_TIMEOUT_MS``, and each look ends with an ``observer_poll`` event
(``part``, ``poll``, ``began_us``, ``ok``). Between two metadata marks with
no ``partition_metadata`` the state held as last seen (if ``ok``); where the
marks stop, the observer did not look and the trace is no evidence.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import orjson

from harness.dbs.kafka.watch import QuorumWatch, SmallIsrSamples, leader_views, metadata_partitions

OBSERVER = "observer"
#: how long one part of a poll waits for its answers: a broker that answers
#: does so in milliseconds, one cut off or dead never does
PART_TIMEOUT_MS = 1500
#: no part has had an answer for this long: a new admin client
REBUILD_S = 10.0
#: kafka-python's admin client: a request to a broker that does not answer
#: fails after PART_TIMEOUT_MS (its connection closed, so the next ask goes
#: to another), a bootstrap gives up within two parts' time, and a broker
#: back from a fault is tried again within 2 s (the default backoff grows
#: to 30 s)
ADMIN_CONFIG = {"request_timeout_ms": PART_TIMEOUT_MS, "bootstrap_timeout_ms": 2 * PART_TIMEOUT_MS,
                "reconnect_backoff_max_ms": 2000}


def quorum_state(hosts: Any, node: str, node_dir: PurePosixPath) -> dict[str, Any] | None:
    """A controller's ``quorum-state`` file (KRaft's election state), read on its host."""
    path = str(node_dir / "data" / "__cluster_metadata-0" / "quorum-state")
    code, out, _ = hosts.exec(node, ["cat", path], timeout=5)
    if code != 0:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def quorum_leader(states: dict[str, dict[str, Any] | None], name_of: Callable[[int], str | None]) -> str | None:
    """The KRaft leader from the live voters' quorum-state files: the highest
    epoch one of them has recorded a leader for."""
    best: tuple[int, int] | None = None
    for st in states.values():
        leader, epoch = (st or {}).get("leaderId", -1), (st or {}).get("leaderEpoch", -1)
        if isinstance(leader, int) and leader >= 0 and isinstance(epoch, int):
            if best is None or (epoch, leader) > best:
                best = (epoch, leader)
    return name_of(best[1]) if best else None


class MetadataPoller:
    """Polls a Kafka cluster's metadata every ``interval`` seconds on a
    thread of its own and appends what changed to a trace file."""

    def __init__(self, bootstrap: str, topics: list[str], names: dict[int, str], out: Path,
                 interval: float = 0.25, describe_partitions: bool = True, quorum: QuorumWatch | None = None,
                 small_isr: SmallIsrSamples | None = None, settings: dict[str, Any] | None = None) -> None:
        #: DescribeTopicPartitions exists (3.7+); else Metadata (no ELR)
        self.describe_partitions = describe_partitions
        #: what harness.dbs.kafka.watch samples besides (quorum-state files, small ISRs)
        self.quorum = quorum
        self.small_isr = small_isr
        #: the settings the checks on this trace need (``observer_start``)
        self.settings = settings or {}
        self.bootstrap = bootstrap
        self.topics = topics
        self.names = names
        self.out = out
        self.interval = interval
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: every part's thread appends to the trace
        self._write = threading.Lock()
        #: the metadata part writes what it saw, the watermarks part reads it
        self._state = threading.Lock()
        self._admin_lock = threading.Lock()
        #: part -> its own admin client: kafka-python closes a connection
        #: whose request timed out, with every other request in flight on
        #: it, so a DescribeQuorum a broker holds for a controller out of
        #: reach must not share the connection the metadata asks go by
        self._admins: dict[str, Any] = {}
        #: the broker that answered the last DescribeTopicPartitions
        self._answering: int | None = None
        #: part -> when it last had an answer (monotonic)
        self._answered: dict[str, float] = {}
        self._last: dict[str, tuple] = {}
        self._versions: dict[str, int] = {}
        self._hw: dict[str, int] = {}
        self._raft_epoch = -1
        self.polls = 0
        self.errors = 0
        self.stale_samples = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.out, "ab")
        self._emit("observer_start", OBSERVER, {"interval_ms": int(self.interval * 1000),
                                                "part_timeout_ms": PART_TIMEOUT_MS, **self.settings})
        parts = [("metadata", self._poll_metadata), ("hw", self._poll_hw), ("raft", self._poll_raft)]
        self._threads = [threading.Thread(target=self._run, args=part, name=f"kafka-observer-{part[0]}", daemon=True)
                         for part in parts]
        if self.quorum is not None:
            self._threads.append(threading.Thread(target=self._run_quorum, name="kafka-observer-quorum", daemon=True))
        for th in self._threads:
            th.start()

    def stop(self) -> None:
        self._stop.set()
        for th in self._threads:
            th.join(timeout=15)
        for part in list(self._admins):
            self._close_admin(part)
        if getattr(self, "_file", None) is not None:
            self._file.close()

    def _run_quorum(self) -> None:
        """The controllers' files, read on a thread of their own whether or
        not a broker answers: a poll's asks wait up to their timeouts for
        brokers out of reach (6.3 s once, seed 2003), which the looks at the
        files must not wait behind."""
        assert self.quorum is not None
        while not self._stop.wait(self.interval):
            try:
                self.quorum.poll(self._emit)
            except Exception:
                self.errors += 1

    def _run(self, part: str, poll: Callable[[Any], None]) -> None:
        """One part of the poll (the partitions' metadata, their watermarks,
        the KRaft quorum) on a thread of its own, each ask bounded by
        ``PART_TIMEOUT_MS``: a part waiting on a broker out of reach holds up
        neither the others nor its own next look for longer than that. Each
        look ends with an ``observer_poll`` mark (``part``, its count, when
        it began, whether it got an answer), so a reader of the trace knows
        where the observer looked and saw nothing new, and where it did not
        look at all."""
        count = 0
        while not self._stop.wait(self.interval):
            began, ok = time.time(), True
            try:
                poll(self._client(part))
                self._answered[part] = time.monotonic()
            except Exception:  # a cluster in flux: brokers down, leaders moving
                ok = False
                self.errors += 1
                self._maybe_rebuild(part)
            count += 1
            if part == "metadata":
                self.polls += 1
            self._emit("observer_poll", OBSERVER, {"part": part, "poll": count, "began_us": int(began * 1_000_000),
                                                   "ok": ok})

    def _maybe_rebuild(self, part: str) -> None:
        """A new admin client for a part once it has had no answer for
        ``REBUILD_S``: kafka-python's own client reconnects and refreshes its
        metadata by itself, so a failed ask alone is no reason to throw away
        its connections to the brokers that do answer (a rebuilt client
        bootstraps again, from a broker that may be the one out of reach)."""
        now = time.monotonic()
        if now - self._answered.setdefault(part, now) > REBUILD_S:
            self._answered[part] = now
            self._close_admin(part)

    def _close_admin(self, part: str) -> None:
        with self._admin_lock:
            admin = self._admins.pop(part, None)
        if admin is not None:
            try:
                admin.close()
            except Exception:
                pass

    def _client(self, part: str) -> Any:
        with self._admin_lock:
            admin = self._admins.get(part)
        if admin is None:  # built outside the lock: a bootstrap takes up to two parts' time
            admin = _kafka_python().admin.KafkaAdminClient(
                bootstrap_servers=self.bootstrap.split(","), client_id=f"kraftwerk-observer-{part}", **ADMIN_CONFIG)
            with self._admin_lock:
                self._admins[part] = admin
        return admin

    # -- one look per part -----------------------------------------------------------------------
    def _emit(self, kind: str, node: str, data: dict[str, Any]) -> None:
        with self._write:  # stamped under the lock: the file stays in time order
            now = time.time()
            line = {"t": int(now * 1000), "t_us": int(now * 1_000_000), "node": node, "kind": kind, **data}
            self._file.write(orjson.dumps(line) + b"\n")
            self._file.flush()

    def poll_once(self) -> None:
        """Every part once, one after another (for a caller without the threads)."""
        admin = self._client("metadata")
        self._poll_metadata(admin)
        self._poll_raft(admin)
        self._poll_hw(admin)

    def _poll_metadata(self, admin: Any) -> None:
        res = None
        if self.describe_partitions:
            try:
                res = self._describe_partitions(admin)
            except Exception as e:  # kafka-python's, by name (it is loaded late, with the client)
                if type(e).__name__ != "IncompatibleBrokerVersion":
                    raise
                self.describe_partitions = False  # a build without the API: Metadata from now on
        if res is None:
            res = metadata_partitions(admin, self.topics, lambda *a: within(admin, *a))
        with self._state:
            for topic in res.get("topics", []):
                for p in topic.get("partitions", []):
                    self._partition(f"{topic['name']}-{p['partition_index']}", p)

    def _describe_partitions(self, admin: Any) -> dict[str, Any]:
        """DescribeTopicPartitions, asked of the broker that answered the
        last one while it is still connected, else of kafka-python's least
        loaded node: that one may be a broker cut off or paused whenever the
        one that answers has a request of another part in flight (with no
        request in flight, a connection being set up to a dead broker
        counts as less loaded), and the ask would then wait out its timeout."""
        manager = admin._manager
        request = _describe_partitions_request(self.topics)

        async def ask() -> Any:
            conn = manager._conns.get(self._answering)
            node = self._answering if conn is not None and conn.connected else manager.least_loaded_node()
            try:
                answer = await manager.wait_for(manager.send(request, node_id=node, request_timeout_ms=PART_TIMEOUT_MS),
                                                PART_TIMEOUT_MS)
            except Exception:
                self._answering = None
                raise
            self._answering = node
            return answer
        return {"topics": manager.run(ask).to_dict()["topics"]}

    def _poll_hw(self, admin: Any) -> None:
        """The watermarks, then the small ISRs' leaders: in this order, on one
        thread, so a ``small_isr`` sample's HW was read before its ISR
        (``harness.dbs.kafka.watch.SmallIsrSamples``); the partitions and
        their leaders are the metadata part's latest."""
        with self._state:
            last = dict(self._last)
        self._watermarks(admin, last)
        if self.small_isr is not None:
            self.small_isr.after_poll(last, dict(self._hw), self._emit,
                                      lambda leaders: leader_views(admin, leaders, PART_TIMEOUT_MS))

    def _poll_raft(self, admin: Any) -> None:
        self._quorum(within(admin, admin._async_describe_quorum, "__cluster_metadata", 0))

    def _partition(self, tp: str, p: dict[str, Any]) -> None:
        """A partition's state as one broker answered it. A broker's metadata
        may be older than what another broker answered a moment before (one
        resumed from a pause serves its image from before the pause until it
        has fetched the records since): its answer with an older leader epoch
        is set aside, as Kafka's own clients do (``Metadata.updateLatestMetadata``
        keeps the last seen leader epoch and ignores metadata for an older
        one, clients/src/main/java/org/apache/kafka/clients/Metadata.java:594
        in kafka-clients 4.4.0, by its line table; KIP-320), and
        recorded as ``observed_stale`` (tp, leader_epoch, newest), which the
        monitor ignores. Without it the monitor read such an answer as a
        controller's replay going back (``leader-epoch-regressed``)."""
        state = (p["leader_id"], p["leader_epoch"], tuple(p["replica_nodes"] or ()), tuple(p["isr_nodes"] or ()),
                 tuple(p.get("eligible_leader_replicas") or ()), tuple(p.get("last_known_elr") or ()))
        if self._last.get(tp) == state:
            return
        newest = self._last[tp][1] if tp in self._last else -1
        if 0 <= int(state[1]) < newest:
            # a broker whose metadata lags (cut off, fenced) answered: not a regression
            # of the controller's, which an outside reader of brokers' caches cannot see
            self.stale_samples += 1
            self._emit("observed_stale", OBSERVER, {"tp": tp, "leader_epoch": state[1], "newest": newest})
            return
        self._last[tp] = state
        self._versions[tp] = self._versions.get(tp, -1) + 1
        leader, le, reps, isr, elr, lkelr = state
        self._emit("partition_metadata", OBSERVER, {
            "tp": tp, "leader": leader, "leader_epoch": le, "partition_epoch": self._versions[tp],
            "replicas": list(reps), "isr": list(isr), "elr": list(elr), "last_known_elr": list(lkelr),
            "observed": True,
        })

    def _quorum(self, q: dict[str, Any]) -> None:
        for t in q.get("topics", []):
            for p in t.get("partitions", []):
                epoch, leader = int(p.get("leader_epoch", -1)), int(p.get("leader_id", -1))
                if leader >= 0 and epoch > self._raft_epoch:
                    self._raft_epoch = epoch
                    self._emit("raft_state", self.names.get(leader, str(leader)),
                               {"epoch": epoch, "role": "leader", "leader": leader, "observed": True})

    def _watermarks(self, admin: Any, last: dict[str, tuple]) -> None:
        """The HW of every partition with a leader, one ask per leader as the
        metadata part last saw it: kafka-python's ``list_partition_offsets``
        fails as a whole when one partition has no leader (it sends that
        one's request to node -1: ``UnknownBrokerIdError``; all but 3 of 338
        reads failed in a replay of finding 12, t0-1 leaderless), and
        a leader out of reach then holds up only its own partitions. Raises
        when no leader answered."""
        kafka = _kafka_python()
        by_leader: dict[int, dict[Any, Any]] = {}
        for tp, state in last.items():
            if state[0] >= 0:
                topic, _, part = tp.rpartition("-")
                by_leader.setdefault(state[0], {})[kafka.TopicPartition(topic, int(part))] = kafka.admin.OffsetSpec.LATEST
        failed: Exception | None = None
        answered = 0
        for specs in by_leader.values():
            try:
                got = within(admin, admin._async_list_partition_offsets, specs, 0, PART_TIMEOUT_MS)
            except Exception as e:  # that leader out of reach or moved: the next poll asks again
                failed = e
                continue
            answered += 1
            for tp_obj, info in got.items():
                tp = f"{tp_obj.topic}-{tp_obj.partition}"
                hw = int(getattr(info, "offset", -1))
                if hw >= 0 and self._hw.get(tp) != hw:
                    self._hw[tp] = hw
                    leader, le = last[tp][0], last[tp][1]
                    self._emit("observed_hw", OBSERVER, {"tp": tp, "hw": hw, "leader": leader, "leader_epoch": le})
        if failed is not None and not answered:
            raise failed


def within(admin: Any, ask: Callable[..., Any], *args: Any, timeout_ms: int = PART_TIMEOUT_MS) -> Any:
    """One of the admin client's asks (an ``_async_`` method of kafka-python's
    ``KafkaAdminClient``) given up after ``timeout_ms``, whatever it waits on:
    the public methods wait out a connection's set-up to a broker out of
    reach (10 s by default, not configurable on the admin client) or a
    bootstrap. The ask goes on in kafka-python's IO thread and its answer is
    dropped."""
    manager = admin._manager
    pending = manager.call_soon(ask, *args)

    async def bounded() -> Any:
        return await manager.wait_for(pending, timeout_ms)
    return manager.run(bounded)


def _describe_partitions_request(topics: list[str]) -> Any:
    DescribeTopicPartitionsRequest = _kafka_python().protocol.admin.DescribeTopicPartitionsRequest  # loaded with kafka.admin
    return DescribeTopicPartitionsRequest(topics=[DescribeTopicPartitionsRequest.TopicRequest(name=t) for t in topics],
                                          response_partition_limit=2000, cursor=None)


def _kafka_python() -> Any:
    """kafka-python, whose admin client asks what confluent-kafka's cannot
    (DescribeTopicPartitions with the ELR, DescribeQuorum)."""
    import kafka.admin  # late: kafka-python (0.25 s), for --db kafka's observer only

    return kafka
