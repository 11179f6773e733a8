"""What the observer samples beyond the metadata (``harness.dbs.kafka.observe``),
for the checks that tell releases apart (``checkers.observed``).

* :class:`QuorumWatch`: each controller's ``quorum-state`` file, read through
  the host contract, as a ``quorum_state`` event whenever it changes (the
  leader it names, the epoch, whom it voted for) or the node goes down or
  comes back. KRaft persists the file on every election state it enters but
  Resigned, so a voter whose file names itself leader of an epoch below
  another voter's leader is a stale leader (KAFKA-15489: until 3.7.0 a leader
  cut from the other voters never resigned). A node just (re)started still
  shows the file of its previous life until it writes a new one; its events
  say ``fresh: false`` until then, and the check ignores them. Each look
  ends with a ``quorum_poll`` event, so the check counts a claim only
  between looks that saw it (a look delayed is no evidence).
* :class:`SmallIsrSamples`: per poll, each partition whose ISR is below
  ``min.insync.replicas`` as its own leader answers (asked right after the
  poll's HW read: :func:`leader_views`), with that HW (``small_isr`` events,
  and one more when the ISR is back to size), so the check can see a high
  watermark that advanced while the ISR stayed small (KAFKA-15583: until
  3.7.0 a leader advanced it whatever the ISR's size).
* :func:`metadata_partitions`: the partitions as Metadata lists them, in
  DescribeTopicPartitions' shape, for releases before 3.8 whose brokers lack
  that API (no ELR there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

Emit = Callable[[str, str, dict[str, Any]], None]


def metadata_partitions(admin: Any, topics: list[str], run: Callable[..., Any] | None = None) -> dict[str, Any]:
    """``describe_topic_partitions``' answer built from a Metadata request
    (kafka-python's ``describe_topics``): leader, leader epoch, replicas
    and ISR per partition; no ELR fields (the release has none). ``run``
    runs the admin client's ask (``observe.within``: with a deadline)."""
    metadata = (run or admin._manager.run)(admin._get_cluster_metadata, topics)
    return {"topics": [t for t in metadata["topics"] if not t.get("error_code")]}


@dataclass
class QuorumWatch:
    """``read()`` -> {controller: (its process's start count, its
    quorum-state dict, {} before the file exists, or None while the node is
    down or paused[, whether the process was sent a SIGTERM])}; ``names``:
    node.id -> node name. A shutting-down process's events say
    ``stopping``: Kafka's graceful shutdown of the raft client (5 s at most)
    makes no election, so a leader that resigned just before it keeps a
    file naming itself (``checkers.observed``)."""

    read: Callable[[], dict[str, tuple[Any, ...]]]
    names: dict[int, str]
    _life: dict[str, int] = field(default_factory=dict)
    #: the last state read while the node was up (in whichever life)
    _state: dict[str, tuple] = field(default_factory=dict)
    _fresh: dict[str, bool] = field(default_factory=dict)
    _emitted: dict[str, tuple] = field(default_factory=dict)

    def poll(self, emit: Emit) -> None:
        for node, (life, st, *more) in sorted(self.read().items()):
            stopping = bool(more and more[0])
            if st is None:
                if self._emitted.get(node) != DOWN:
                    self._emitted[node] = DOWN
                    emit("quorum_state", node, {"alive": False, "observed": True})
                continue
            state = (_int(st.get("leaderId")), _int(st.get("leaderEpoch")), _int(st.get("votedId")))
            if node not in self._life:  # first sight: formatted by this run
                self._fresh[node] = True
            elif life != self._life[node]:  # restarted: the old life's file until it changes
                self._fresh[node] = state != self._state.get(node)
            elif state != self._state.get(node):
                self._fresh[node] = True
            self._life[node], self._state[node] = life, state
            out = (state, self._fresh[node], stopping)
            if self._emitted.get(node) == out:
                continue
            self._emitted[node] = out
            leader, epoch, voted = state
            emit("quorum_state", node, {"alive": True, "leader": self.names.get(leader) if leader >= 0 else None,
                                        "epoch": epoch, "voted": self.names.get(voted) if voted >= 0 else None,
                                        "fresh": self._fresh[node], "observed": True,
                                        **({"stopping": True} if stopping else {})})
        emit("quorum_poll", "observer", {})  # the look ended: what it did not change still held


DOWN = ("down",)


def _int(x: Any) -> int:
    return x if isinstance(x, int) else -1


def leader_views(admin: Any, leaders: dict[str, int], timeout_ms: int = 30000) -> dict[str, tuple[int, int, tuple[int, ...]]]:
    """tp -> (leader, leader epoch, ISR) as each partition's own leader
    answers Metadata: the broker whose HW the observer reads, and the first
    to know of an ISR change it made (any other broker's metadata may lag by
    seconds after a partition heals, and would show an ISR already grown
    back as still small). kafka-python's admin client sends a request to a
    chosen node only through its network manager. A leader that does not
    answer within ``timeout_ms`` is left out (no sample), the others kept."""
    from kafka.protocol.metadata import MetadataRequest  # late: kafka-python, with the admin client

    out: dict[str, tuple[int, int, tuple[int, ...]]] = {}
    by_leader: dict[int, set[str]] = {}
    for tp, leader in leaders.items():
        by_leader.setdefault(leader, set()).add(tp)
    for leader, tps in sorted(by_leader.items()):
        topics = sorted({tp.rpartition("-")[0] for tp in tps})
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False)

        async def ask(req: Any = request, node: int = leader) -> Any:
            return await admin._manager.wait_for(admin._manager.send(req, node_id=node, request_timeout_ms=timeout_ms),
                                                 timeout_ms)

        try:
            answer = admin._manager.run(ask).to_dict()
        except Exception:  # that leader out of reach: the next one may answer
            continue
        for t in answer["topics"]:
            for p in t["partitions"]:
                tp = f"{t['name']}-{p['partition_index']}"
                if tp in tps and not p.get("error_code"):
                    out[tp] = (p["leader_id"], p["leader_epoch"], tuple(p["isr_nodes"] or ()))
    return out


@dataclass
class SmallIsrSamples:
    """Emits, per poll, a ``small_isr`` sample of every partition whose ISR
    is below ``min_isr`` (and one when it is back to size): the poll's
    number, and leader, leader epoch and ISR as the leader itself answered
    (asked after the HW read) with the HW that poll read."""

    min_isr: int
    _small: set[str] = field(default_factory=set)
    polls: int = 0

    def after_poll(self, state: dict[str, tuple], hws: dict[str, int], emit: Emit,
                   views: Callable[[dict[str, int]], dict[str, tuple]] | None = None) -> None:
        """``state``: tp -> (leader, leader epoch, replicas, ISR, ...) as the
        poll saw it; ``hws``: tp -> the latest HW read; ``views``: the
        leaders' own (leader, leader epoch, ISR) of the partitions asked
        (:func:`leader_views`), or None to take ``state``'s."""
        self.polls += 1
        asked = {tp: st[0] for tp, st in state.items()
                 if st[0] >= 0 and (len(st[3]) < self.min_isr or tp in self._small)}
        if not asked:
            return
        seen = views(asked) if views is not None else {tp: (state[tp][0], state[tp][1], state[tp][3]) for tp in asked}
        for tp in sorted(asked):
            if tp not in seen:
                continue  # the leader did not answer for it: no sample, so no run of polls through here
            leader, le, isr = seen[tp]
            small = len(isr) < self.min_isr
            if small or tp in self._small:
                emit("small_isr", "observer", {"tp": tp, "poll": self.polls, "leader": leader, "leader_epoch": le,
                                               "isr": list(isr), "hw": hws.get(tp), "small": small})
            if small:
                self._small.add(tp)
            else:
                self._small.discard(tp)
