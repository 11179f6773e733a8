"""The availability checker (checkers/availability): liveness after the
final heal judged against the run's bound, the cause of each unavailable
partition, the policy, the evidence table, and the cause of every unknown
verdict."""

from __future__ import annotations

import json

import pytest

from checkers.availability import (DESIGN, STUCK, FinalState, LivenessBound, check_availability, facts_of,
                                   liveness_bound, merge_availability, read_timeline, timeline_of,
                                   unknown_cause)
from checkers.availability.evidence import _gap_ms
from checkers.availability.factpass import FactPass
from checkers.history.op import Op
from checkers.queue.scan import scan_ops
from nemesis.faults import CLOCK_MAX_OFFSET_MS, STROBE_MAX_DELTA_MS, clock_hold_ms, parse
from tests.checkers.test_columnar_reading import _folds

S = 1_000_000_000
BOUND = LivenessBound(0, 4000, 5000, 1900, 5100)  # 16 s


class History:
    """A small history: writes, fault changes, the heal, probes, final reads."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def _add(self, type_: str, f: str, value, process, t: float, error=None, **extra) -> None:
        self.ops.append(Op(type_, f, value, process, int(t * S), len(self.ops), error, extra))

    def send(self, key: str, t0: float, t1: float, ok: bool = True, process: int = 0, acks: str = "all",
             error=None, **extra) -> "History":
        self._add("invoke", "send", [["send", key, len(self.ops)]], process, t0, acks=acks, **extra)
        value = [["send", key, [len(self.ops), 7]]] if ok else [["send", key, 7]]
        self._add("ok" if ok else "info", "send", value, process, t1, None if ok else (error or "_MSG_TIMED_OUT"),
                  acks=acks, **extra)
        return self

    def nemesis(self, f: str, t: float, **value) -> "History":
        self._add("info", f, dict(value), "nemesis", t)
        self._add("info", f, dict(value), "nemesis", t + 0.01)
        return self

    def heal(self, t: float) -> "History":
        return self.nemesis("stop-kill", t, fault="all", final=True)

    def final_read(self, key: str, t: float, ok: bool = True) -> "History":
        self._add("invoke", "poll", [["poll"]], 9, t, final=True, key=key)
        self._add("ok" if ok else "info", "poll", [["poll", {key: []}]], 9, t + 1, final=True, key=key)
        return self


def state(leader: int = -1, isr=(), elr=(), lkelr=(), lkl: int = -1, brokers=None, **rules) -> FinalState:
    brokers = brokers or {1: "active", 2: "active", 3: "active"}
    return FinalState.from_dict({
        "quorum_leader": "c1", "min_isr": 2,
        "partitions": {"t0-0": {"leader": leader, "isr": list(isr), "elr": list(elr), "last_known_elr": list(lkelr),
                                "replicas": [1, 2, 3], "last_known_leader": lkl}},
        "brokers": {str(b): {"name": f"n{b}", "running": s != "down", "registered": s != "unregistered",
                             "fenced": s != "active"} for b, s in brokers.items()},
        "rules": {"unclean_election": False, "elr": True, "recovery_strategy": None, **rules},
    })


def healed_then(probe_ok_at: float | None) -> History:
    h = History().send("t0-0", 1, 1.1).nemesis("start-kill", 2, nodes=["n1"]).heal(10)
    if probe_ok_at is None:
        h.send("t0-0", 10.02, 26.02, ok=False, probe=True)
    else:
        h.send("t0-0", 10.02, probe_ok_at, probe=True)
    return h.final_read("t0-0", 30, ok=probe_ok_at is not None)


def test_a_partition_that_took_a_probe_write_within_the_bound_after_the_heal_is_available() -> None:
    av = check_availability(facts_of(healed_then(14).ops), ["t0-0"], bound=BOUND, state=state())
    p = av["partitions"]["t0-0"]
    assert av["valid"] is True and av["unavailable"] == []
    assert p["available"] is True and p["judged_by"] == "acks=all write" and p["write_after_ms"] == pytest.approx(3990)


def test_a_first_write_later_than_the_bound_is_unavailable_and_says_when_it_came() -> None:
    av = check_availability(facts_of(healed_then(27).ops), ["t0-0"], bound=BOUND, state=state(1, [1, 2]))
    assert av["valid"] is False
    assert "accepted 17.0 s after the heal" in av["unavailable"][0]["text"]


def test_no_leader_while_an_isr_member_runs_registered_and_unfenced_is_stuck_and_invalid() -> None:
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=state(-1, isr=[2]))
    d = av["unavailable"][0]
    assert av["valid"] is False and d["kind"] == "eligible-not-elected" and d["by_design"] is False
    assert "n2" in d["text"]


def test_no_isr_no_elr_no_last_known_leader_and_unclean_election_off_is_down_by_design_reported_not_failing() -> None:
    fs = state(-1, isr=[], elr=[], lkelr=[1, 2, 3])
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=fs)
    d = av["unavailable"][0]
    assert av["valid"] is True and d["kind"] == "no-eligible-leader" and d["by_design"] is True
    assert "ISR empty" in d["text"] and "ELR empty" in d["text"] and "unclean election off" in d["text"]


def test_kafkas_last_known_leader_is_the_single_member_of_last_known_elr_and_electable_when_active() -> None:
    """Kafka 4.4's canElectLastKnownLeader: ISR and ELR empty, LastKnownELR of
    exactly one acceptable broker: not down by design."""
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=state(-1, lkelr=[3]))
    assert av["unavailable"][0]["kind"] == "eligible-not-elected" and "last known leader n3" in av["cause"]


def test_a_fenced_eligible_replica_is_a_broker_not_back_and_says_which() -> None:
    fs = state(-1, isr=[2], brokers={1: "active", 2: "fenced", 3: "active"})
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=fs)
    assert av["unavailable"][0]["kind"] == "broker-not-back" and "n2 fenced" in av["cause"]


def test_unclean_recovery_strategy_none_waits_for_an_operator_by_design() -> None:
    fs = state(-1, lkelr=[1], recovery_strategy="None")
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=fs)
    assert av["unavailable"][0]["by_design"] is True and "waits for an operator" in av["cause"]


def test_unclean_election_on_with_a_live_replica_and_no_leader_is_stuck() -> None:
    fs = state(-1, unclean_election=True)
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=fs)
    assert av["unavailable"][0]["kind"] == "eligible-not-elected"


def test_a_leader_with_an_isr_below_min_while_followers_run_is_stuck_on_their_fetches() -> None:
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=state(1, isr=[1]))
    assert av["unavailable"][0]["kind"] == "isr-below-min" and "below min.insync.replicas 2" in av["cause"]


def test_a_leader_and_isr_that_could_take_the_write_make_it_the_clients_and_name_its_errors() -> None:
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=state(1, isr=[1, 2]))
    assert av["unavailable"][0]["kind"] == "client" and "_MSG_TIMED_OUT" in av["cause"]


def test_a_quorum_without_leader_comes_first() -> None:
    fs = state(1, isr=[1, 2])
    fs.quorum_leader, fs.controllers = None, {"c1": "paused"}
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=fs)
    assert av["unavailable"][0]["kind"] == "quorum-leaderless" and "c1 paused" in av["cause"]


def test_no_state_seen_makes_the_cause_undetermined_and_the_verdict_unknown() -> None:
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=None)
    assert av["unavailable"][0]["kind"] == "undetermined" and av["valid"] == "unknown"


@pytest.mark.parametrize("policy, design, stuck", [("auto", True, False), ("strict", False, False),
                                                    ("report", True, True)])
def test_the_liveness_policy_decides_what_fails(policy, design, stuck) -> None:
    ops = facts_of(healed_then(None).ops)
    assert check_availability(ops, ["t0-0"], bound=BOUND, state=state(-1, lkelr=[1, 2]), policy=policy)["valid"] is design
    assert check_availability(ops, ["t0-0"], bound=BOUND, state=state(-1, isr=[2]), policy=policy)["valid"] is stuck


def test_without_writes_after_the_heal_the_final_read_judges() -> None:
    h = History().send("t0-0", 1, 1.1).heal(10).final_read("t0-0", 20, ok=False)
    av = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, state=state(-1, isr=[2]))
    assert av["partitions"]["t0-0"]["judged_by"] == "final read" and av["valid"] is False


def test_an_acks1_send_after_the_heal_is_no_evidence_of_acks_all_availability() -> None:
    h = History().send("t0-0", 1, 1.1).heal(10).send("t0-0", 10.1, 10.2, acks="1").final_read("t0-0", 20)
    av = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, state=state())
    assert av["partitions"]["t0-0"]["judged_by"] == "final read"


def test_a_rows_write_outage_is_the_one_under_way_at_the_change_to_its_end_or_a_longer_one_begun_in_the_row() -> None:
    acks = [2 * S, 3 * S, 7 * S]
    assert _gap_ms(acks, 1 * S, 10 * S, 12 * S) == 4000.0  # 3 s to 7 s, within the row
    assert _gap_ms(acks, 4 * S, 5 * S, 12 * S) == 3000.0  # under way at 4 s, to the ack at 7 s
    assert _gap_ms(acks, 2.5 * S, 3.5 * S, 12 * S) == 500.0  # the outage after 3 s belongs to its own row...
    assert _gap_ms(acks, 3.5 * S, 8 * S, 6 * S) == 2500.0  # ...and the workload stopped writing at 6 s
    assert _gap_ms([], 1 * S, 3 * S, 3 * S) == 2000.0


def test_each_fault_change_gets_a_row_of_leaderless_time_and_write_gap_per_partition() -> None:
    h = History()
    for i in range(3):
        h.send("t0-0", i, i + 0.05)
    h.nemesis("start-kill", 2.5, nodes=["n1"]).send("t0-0", 2.6, 6.5, ok=False)
    h.nemesis("stop-kill", 6.5)
    for i in range(7, 10):
        h.send("t0-0", i, i + 0.05)
    h.heal(11).send("t0-0", 11.1, 11.3, probe=True)
    tl = timeline_of([{"kind": "partition_metadata", "t": 2600, "tp": "t0-0", "leader": -1, "partition_epoch": 5},
                      {"kind": "partition_metadata", "t": 4100, "tp": "t0-0", "leader": 2, "partition_epoch": 6}])
    av = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, timeline=tl, state=state())
    start, stop = av["rows"]
    assert start["event"] == "start-kill n1" and start["partitions"]["t0-0"]["leaderless_ms"] == pytest.approx(1500)
    assert start["partitions"]["t0-0"]["no_write_ms"] == pytest.approx(4540)  # to the first ack after it, 7.05 s
    assert stop["partitions"]["t0-0"]["leaderless_ms"] == 0
    assert stop["partitions"]["t0-0"]["no_write_ms"] == pytest.approx(1000)  # acks a second apart; no writing after 9.05 s
    assert av["final"]["partitions"]["t0-0"]["write_after_ms"] == pytest.approx(290)


def test_a_restarted_controller_replaying_old_records_does_not_move_a_partitions_history_back() -> None:
    """Every controller replays the same records, a restarted one from the
    start: a partition's states are keyed by partition epoch and each is
    placed at the earliest time any node traced it."""
    ev = [{"kind": "partition_metadata", "t": 1000, "tp": "t0-0", "leader": 1, "partition_epoch": 1},
          {"kind": "partition_metadata", "t": 2000, "tp": "t0-0", "leader": -1, "partition_epoch": 2},
          {"kind": "partition_metadata", "t": 3000, "tp": "t0-0", "leader": 2, "partition_epoch": 3},
          {"kind": "partition_metadata", "t": 9000, "tp": "t0-0", "leader": 1, "partition_epoch": 1},
          {"kind": "partition_metadata", "t": 9001, "tp": "t0-0", "leader": -1, "partition_epoch": 2}]
    tl = timeline_of(ev)
    assert tl.state_at("t0-0", 9500 * 1_000_000).leader == 2
    assert tl.leaderless_ms("t0-0", 0, 10_000 * 1_000_000, 10_000 * 1_000_000) == 1000


def test_the_bound_sums_the_timers_of_the_runs_own_settings() -> None:
    b = liveness_bound({"broker.session.timeout.ms": 4000, "broker_heartbeat_interval_ms": 500,
                        "replica.fetch.backoff.ms": 200}, start_ms=3000, client_refresh_ms=2000,
                       client_request_timeout_ms=5000)
    assert b.as_dict() == {"total_ms": 3000 + 4000 + 5000 + 1900 + 7000, "clock_ms": 0, "start_ms": 3000,
                           "quorum_ms": 4000, "session_ms": 5000, "isr_ms": 1900, "client_ms": 7000}


def test_a_clock_the_heal_sets_back_holds_wall_clock_timers_so_the_bound_adds_the_largest_backward_step() -> None:
    """Kafka's Timer.update keeps the larger time (a KRaft follower's fetch
    timeout), a replica fetch backoff is due at a wall time: a clock set back
    by D leaves them up to D late, so the mix's largest step back comes first."""
    plain = liveness_bound({}, start_ms=0, client_refresh_ms=100, client_request_timeout_ms=5000)
    held = liveness_bound({}, start_ms=0, client_refresh_ms=100, client_request_timeout_ms=5000,
                          clock_ms=clock_hold_ms((parse("clock"), parse("clock-strobe:one"))))
    assert held.clock_ms == CLOCK_MAX_OFFSET_MS + STROBE_MAX_DELTA_MS == 65_000
    assert held.total_ms == plain.total_ms + 65_000
    assert LivenessBound.from_dict(held.as_dict()) == held
    assert clock_hold_ms((parse("kill"), parse("partition"))) == 0


def test_merging_adds_the_table_the_anomaly_by_its_kind_and_the_cause() -> None:
    res = {"valid": True, "anomaly_types": [], "anomalies": {}, "checkers": {}}
    av = check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND, state=state(-1, lkelr=[1, 2]))
    merge_availability(res, av)
    assert res["valid"] is True and res["anomaly_types"] == [DESIGN] and "ISR empty" in res["cause"]
    assert res["availability"]["final"]["partitions"]["t0-0"]["write_after_ms"] is None
    res = {"valid": True, "anomaly_types": [], "anomalies": {}, "checkers": {}}
    merge_availability(res, check_availability(facts_of(healed_then(None).ops), ["t0-0"], bound=BOUND,
                                               state=state(-1, isr=[2])))
    assert res["valid"] is False and res["anomaly_types"] == [STUCK]


@pytest.mark.parametrize("checkers, words", [
    ({"queue": {"valid": "unknown", "per_key": "budget-exceeded"}}, "time budget ran out"),
    ({"queue": {"valid": True, "evidence": {"valid": "unknown", "keys_checked": 2}}}, "no write was acknowledged"),
    ({"linearizable": {"valid": "unknown", "cause": "no-ops"}}, "no-ops"),
    ({"final-reads": {"valid": "unknown", "incomplete_keys": ["t0-1"], "unverified_acked_writes": {"t0-1": 4}},
      "availability": {"partitions": {"t0-1": {"available": True, "write_after_ms": 1500.0}}}},
     "no final read of t0-1 completed (4 acknowledged writes unverified): the partition took an acks=all write 1.5 s"),
])
def test_an_unknown_verdict_names_its_cause(checkers, words) -> None:
    assert words in unknown_cause({"valid": "unknown", "checkers": checkers})


def test_a_set_up_failure_is_its_own_cause() -> None:
    assert unknown_cause({"valid": "unknown", "error": "set-up failed", "checkers": {}}) == "set-up failed"


def _looks(times_ok: list[tuple[float, bool]]) -> list[dict]:
    """Kafka's observer's metadata marks (and a watermarks mark, which says nothing of the leaders)."""
    return ([{"kind": "observer_poll", "t": t * 1000, "part": "metadata", "ok": ok} for t, ok in times_ok]
            + [{"kind": "observer_poll", "t": 500, "part": "hw", "ok": False}])


def _leaderless_12_to_30() -> tuple[History, list[dict]]:
    h = History().send("t0-0", 1, 1.1).nemesis("start-kill", 12, nodes=["n1"]).nemesis("stop-kill", 25)
    h.send("t0-0", 31, 31.1).heal(34).send("t0-0", 34.1, 34.3, probe=True).final_read("t0-0", 36)
    meta = [{"kind": "partition_metadata", "t": 12_100, "tp": "t0-0", "leader": -1, "partition_epoch": 2},
            {"kind": "partition_metadata", "t": 30_400, "tp": "t0-0", "leader": 2, "partition_epoch": 3}]
    return h, meta


def test_a_stretch_without_an_answered_metadata_look_is_blind_and_says_why() -> None:
    looks = [(t / 2, True) for t in range(0, 41)]  # every 0.5 s to 20.0 s
    looks += [(20.5, False), (22.5, False)] + [(30.1 + t / 2, True) for t in range(0, 14)]  # none 22.5-30.1 s
    tl = timeline_of(_looks(looks))
    assert tl.blind_stretches() == [(20 * S, int(30.1 * S), "no broker answered")]
    silent = timeline_of(_looks([(1, True), (1.5, True), (9, True)]))
    assert silent.blind_stretches() == [(int(1.5 * S), 9 * S, "no look made")]
    assert silent.blind_stretches(end_ns=12 * S)[-1] == (9 * S, 12 * S, "no look made")


def test_a_leaderless_stretch_overlapping_a_blind_one_is_reported_beside_its_figure() -> None:
    h, meta = _leaderless_12_to_30()
    looks = [(t / 2, True) for t in range(0, 41)] + [(20.5, False)] + [(30.1 + t / 2, True) for t in range(0, 14)]
    tl = timeline_of(meta + _looks(looks))
    av = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, timeline=tl, state=state(2, [2, 3]))
    start = av["rows"][0]
    cell = start["partitions"]["t0-0"]
    assert cell["leaderless_ms"] == pytest.approx(12910)  # the figure itself stands: 12.1 s to the row's end, 25.01 s
    assert cell["note"] == "leaderless 12.1-30.4 s; the observer was blind 20.0-30.1 s (no broker answered)"
    assert cell["observer_blind"] == [[20.0, 30.1]] and start["observer_blind"] == [[20.0, 25.01]]
    assert av["rows"][1]["observer_blind"] == [[25.01, 30.1]]
    assert av["observer_blind"] == [{"from_s": 20.0, "to_s": 30.1, "why": "no broker answered"}]
    assert "observer_blind" not in av["final"] and av["valid"] is True
    res = merge_availability({"valid": True, "checkers": {}}, av)
    assert res["availability"]["observer_blind"] == av["observer_blind"]


def test_answered_looks_without_state_changes_are_not_blind() -> None:
    h, meta = _leaderless_12_to_30()
    tl = timeline_of(meta + _looks([(t / 2, True) for t in range(0, 80)]))
    assert tl.blind_stretches(end_ns=39 * S) == []
    av = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, timeline=tl, state=state(2, [2, 3]))
    assert av["observer_blind"] == []
    assert all("observer_blind" not in r and "note" not in r["partitions"]["t0-0"] for r in av["rows"])


def test_a_trace_without_marks_is_complete_and_its_results_unchanged() -> None:
    h, meta = _leaderless_12_to_30()
    with_hw_marks = timeline_of(meta + [{"kind": "observer_poll", "t": 500, "part": "hw", "ok": False}])
    plain = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, timeline=timeline_of(meta),
                               state=state(2, [2, 3]))
    assert "observer_blind" not in plain and all("observer_blind" not in r for r in plain["rows"])
    assert check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, timeline=with_hw_marks,
                              state=state(2, [2, 3])) == plain
    assert set(merge_availability({"valid": True, "checkers": {}}, plain)["availability"]) == {
        "bound", "heal_s", "rows", "final"}


def test_a_cause_read_inside_a_blind_stretch_says_its_state_may_be_stale_and_keeps_its_verdict() -> None:
    h = healed_then(None)
    tl = timeline_of([{"kind": "partition_metadata", "t": 3000, "tp": "t0-0", "leader": -1, "isr": [2],
                       "replicas": [1, 2, 3], "partition_epoch": 2}]
                     + _looks([(t / 2, True) for t in range(0, 24)] + [(31, True)]))
    fs = state(-1, isr=[2])
    fs.t_ns, fs.source = 26 * S, "final-state.json and traces"
    blind = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, timeline=tl, state=fs)
    seen = check_availability(facts_of(h.ops), ["t0-0"], bound=BOUND, timeline=timeline_of([]), state=fs)
    assert blind["valid"] is seen["valid"] is False
    assert blind["cause"] == seen["cause"] + (" (the observer was blind 11.5-31.0 s, no look made: the "
                                              "partitions' state at 26.0 s is the last it saw, at 11.5 s)")


def test_the_observers_metadata_marks_are_read_from_its_trace_file_and_the_other_parts_skipped(tmp_path) -> None:
    """The marks as harness/dbs/kafka/observe.py writes them, on the wall
    clock (clock.json's offset): only the metadata part's are looks."""
    (tmp_path / "nodes" / "observer").mkdir(parents=True)
    zero = 1_700_000_000_000
    lines = [{"t": zero + 1000, "node": "observer", "kind": "observer_poll", "part": "metadata", "poll": 1, "ok": True},
             {"t": zero + 1200, "node": "observer", "kind": "observer_poll", "part": "hw", "poll": 1, "ok": True},
             {"t": zero + 1300, "node": "observer", "kind": "partition_metadata", "tp": "t0-0", "leader": 1,
              "partition_epoch": 1},
             {"t": zero + 2000, "node": "observer", "kind": "observer_poll", "part": "metadata", "poll": 2,
              "ok": False},
             {"t": zero + 6000, "node": "observer", "kind": "observer_poll", "part": "metadata", "poll": 3, "ok": True}]
    (tmp_path / "nodes" / "observer" / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    tl = read_timeline(tmp_path, offset_ms=zero)
    assert tl.looks == [(1 * S, True), (2 * S, False), (6 * S, True)]
    assert tl.blind_stretches() == [(1 * S, 6 * S, "no broker answered")]


def _facts_fed_one_by_one(ops: list[Op]):
    """The facts as :meth:`checkers.availability.factpass.FactPass.feed` makes
    them from every operation in turn (what ``facts_of`` did before it
    skipped the workload's other operations itself)."""
    p = FactPass()
    for op in ops:
        p.feed(op.process, op.type, op.f, op.value, op.time, op.error, op.extra)
    return p.finish()


def _workload_poll(h: History, t: float, process: int = 3, **extra) -> History:
    h._add("invoke", "poll", [["poll"]], process, t, **extra)
    h._add("ok", "poll", [["poll", {"t0-0": [[0, 7]]}]], process, t + 0.01, **extra)
    return h


def _mixed_history(nemesis: bool) -> History:
    """Sends of both acks levels, a failed one, a workload poll and an
    assign, faults and the heal (if ``nemesis``), a send in flight when a
    probe's poll begins the final phase, probes, one left open, final reads
    (one incomplete), and a workload poll last."""
    h = History().send("t0-0", 1, 1.1).send("t0-1", 1.2, 1.3, acks="1", process=1)
    _workload_poll(h, 1.5)
    h._add("invoke", "assign", [["assign", ["t0-0"]]], 4, 1.6)
    h.send("t0-0", 2, 2.5, ok=False, process=2)
    if nemesis:
        h.nemesis("start-kill", 3, nodes=["n1"]).heal(10)
    _workload_poll(h, 9.5, acks="all")
    h._add("invoke", "send", [["send", "t0-1", 98]], 8, 9.7, acks="all")  # in flight when the final phase begins
    h._add("invoke", "poll", [["poll"]], 7, 9.8, probe=True)  # which a probe of any kind begins
    h._add("ok", "send", [["send", "t0-1", [5, 98]]], 8, 10.1, acks="all")
    h.send("t0-0", 10.02, 11, probe=True).send("t0-1", 10.05, 26, ok=False, probe=True, process=1)
    h._add("invoke", "send", [["send", "t0-0", 99]], 5, 10.5, acks="all")  # left open
    h.final_read("t0-0", 30).final_read("t0-1", 30.5, ok=False)
    h._add("ok", "poll", [["poll", {"t0-0": []}]], 9, 31.7, final=True, key="t0-0", incomplete=["t0-0"])
    _workload_poll(h, 40, process=6)  # the history's last operation
    return h


@pytest.mark.parametrize("nemesis", [True, False])
def test_the_facts_of_a_list_are_those_of_feeding_every_operation_and_of_its_file(tmp_path, nemesis) -> None:
    """``facts_of`` moves only the history's end for a client's operation
    that is neither a send nor of the final phase (checkers/availability/factpass.py
    ``FactPass.feed_op``): the facts, the end included (here a workload poll is the
    history's last operation), are those of feeding every operation, and
    those ``facts_of_jsonl`` reads from the history's file, the probe's poll
    that begins the final phase and the end included."""
    from checkers.availability import facts_of_jsonl

    h = _mixed_history(nemesis)
    got = facts_of(h.ops)
    assert got.end_ns == 40_010_000_000
    # without a nemesis the probe poll began the final phase, a send in flight
    assert got.workload_end_ns == (2_500_000_000 if nemesis else 9_800_000_000)
    assert repr(got) == repr(_facts_fed_one_by_one(h.ops))
    # the file's reading parses only the lines naming a send, the nemesis, a
    # probe or the final phase, and the last line for the history's end
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(op.to_dict()) + "\n" for op in h.ops))
    from_file = facts_of_jsonl(path)
    assert repr(got) == repr(from_file)


@pytest.mark.parametrize("nemesis", [True, False])
def test_the_facts_fed_on_the_queue_scans_walk_are_those_of_facts_of_and_leave_its_folds_alone(nemesis) -> None:
    """A simulated seed's checkers walk its operations once
    (harness/runtimes/sim.py ``SimRun.results``): ``scan_ops`` with
    ``facts`` feeds the availability checker's pass every operation on the
    queue scan's walk (checkers/queue/opbatch.py ``OpBatches.run``), in
    batches of any size; the facts are ``facts_of``'s and the queue folds
    those of a scan without the pass."""
    h = _mixed_history(nemesis)
    want = facts_of(h.ops)
    assert want.acked_all and want.after_heal and want.final_reads
    for batch, small in ((1 << 16, 256), (3, 0)):
        p = FactPass()
        scan = scan_ops(h.ops, batch, small, facts=p)
        assert repr(p.finish()) == repr(want)
        assert repr(_folds(scan)) == repr(_folds(scan_ops(h.ops, batch, small)))
