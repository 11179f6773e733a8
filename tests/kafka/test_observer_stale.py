"""The observer polls whichever broker answers; one resumed from a pause
answers from its metadata image of before the pause. Such an answer (an
older leader epoch than one seen) is set aside as Kafka's clients set it
aside, recorded as ``observed_stale``, so the invariant monitor does not
read it as a controller replay going back (the hunt's seed 61 on Kafka:
``leader-epoch-regressed`` from n2's and n3's images after their pause)."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.invariants import InvariantMonitor
from harness.dbs.kafka.observe import MetadataPoller


def _answer(leader: int, epoch: int, isr: list[int]) -> dict:
    return {"leader_id": leader, "leader_epoch": epoch, "replica_nodes": [2, 3, 1], "isr_nodes": isr,
            "eligible_leader_replicas": [], "last_known_elr": []}


def test_an_older_leader_epoch_from_a_stale_broker_is_set_aside_and_the_monitor_stays_valid(tmp_path: Path):
    out = tmp_path / "trace.jsonl"
    poller = MetadataPoller("127.0.0.1:1", ["t0"], {}, out)
    poller._file = open(out, "ab")
    for answer in (_answer(2, 0, [2, 3, 1]), _answer(-1, 1, []), _answer(2, 0, [2, 3, 1]), _answer(2, 2, [2])):
        poller._partition("t0-0", answer)
    poller._file.close()
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["kind"], e["leader_epoch"]) for e in events] == [
        ("partition_metadata", 0), ("partition_metadata", 1), ("observed_stale", 0), ("partition_metadata", 2)]
    assert InvariantMonitor().observe_all(events).valid
    # the stale answer read as a state, as before: the monitor calls it a regression
    stale = [e if e["kind"] != "observed_stale" else {**events[0], "t": e["t"]} for e in events]
    assert not InvariantMonitor().observe_all(stale).valid
