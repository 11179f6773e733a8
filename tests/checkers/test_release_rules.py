"""The rules that tell a Kafka release with a fixed bug from one without it:
a committed record that vanished (``lost-read``), a read_committed final
read held below the HW (``read-committed-stuck``), and the observer's rules
(``checkers.observed``: ``stale-raft-leader``, ``hw-advanced-under-min-isr``).
Each is shown on a history or trace that has the finding and on its twin
that differs in one place and has none."""

from __future__ import annotations

from checkers.check import check_history
from checkers.observed import HW_UNDER_MIN_ISR, STALE_RAFT_LEADER, check_observed, stale_bound_ms
from checkers.queue.synth import HistoryBuilder

K = "t-0"


def anomalies(b: HistoryBuilder) -> dict:
    return check_history(b.ops)


# --- lost-read ---------------------------------------------------------------------


def read_then_final(final_has_it: bool, acks: str = "1") -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks=acks)
    b.send(0, K, 2, 1, acks=acks)
    b.poll(1, {K: [(0, 1), (1, 2)]})  # read: below the HW, so committed
    b.poll(2, {K: [(0, 1), (1, 2)] if final_has_it else [(0, 1)]}, final=True)
    return b


def test_a_read_record_missing_from_the_final_read_is_lost_read_whatever_its_acks_level() -> None:
    for acks in ("1", "all"):
        res = anomalies(read_then_final(final_has_it=False, acks=acks))
        assert "lost-read" in res["anomaly_types"] and res["valid"] is False
        assert res["anomalies"]["lost-read"][0]["value"] == 2


def test_a_read_record_the_final_read_holds_is_not_lost_read() -> None:
    res = anomalies(read_then_final(final_has_it=True))
    assert "lost-read" not in res["anomaly_types"] and res["valid"] is True


def test_lost_read_needs_a_complete_final_read() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks="1")
    b.poll(1, {K: [(0, 1)]})
    b.poll(2, {K: []}, type="info", final=True)  # the final read never completed
    assert "lost-read" not in anomalies(b)["anomaly_types"]


def test_a_failed_send_read_then_gone_is_g1a_not_lost_read() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, None, type="fail")
    b.poll(1, {K: [(0, 1)]})
    b.poll(2, {K: []}, final=True)
    types = anomalies(b)["anomaly_types"]
    assert "G1a" in types and "lost-read" not in types


# --- read-committed-stuck ---------------------------------------------------------------


def final_read(stuck: bool) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.poll(1, {K: [(0, 1), (1, 2)]})
    b.invoke(2, "poll", [["poll"]], final=True, key=K)
    b.complete(2, "ok", [["poll", {K: [[0, 1], [1, 2]]}]],
               **({"lso_stuck": {"position": 3, "hw": 9}} if stuck else {}))
    return b


def test_a_final_read_held_below_the_hw_until_its_deadline_is_read_committed_stuck() -> None:
    res = anomalies(final_read(stuck=True))
    assert res["valid"] is False and "read-committed-stuck" in res["anomaly_types"]
    assert res["anomalies"]["read-committed-stuck"][0]["hw"] == 9


def test_a_final_read_that_caught_up_is_not_stuck() -> None:
    res = anomalies(final_read(stuck=False))
    assert res["valid"] is True and "read-committed-stuck" not in res["anomaly_types"]


# --- stale-raft-leader ---------------------------------------------------------------


START = {"kind": "observer_start", "t": 0, "node": "observer", "fetch_timeout_ms": 2000,
         "election_timeout_ms": 1000, "interval_ms": 250, "min_isr": 2}


def qs(t: int, node: str, leader: str | None, epoch: int, fresh: bool = True, alive: bool = True) -> dict:
    if not alive:
        return {"kind": "quorum_state", "t": t, "node": node, "alive": False}
    return {"kind": "quorum_state", "t": t, "node": node, "alive": True, "leader": leader, "epoch": epoch,
            "voted": None, "fresh": fresh}


def isolated_leader(resigns_after_ms: int | None, fresh: bool = True) -> list[dict]:
    """c1 leads epoch 1; cut off, the others elect c2 in epoch 2 at 3 s; c1's
    file names itself leader until it resigns (or the heal at 20 s)."""
    evs = [START, qs(100, "c1", "c1", 1), qs(100, "c2", "c1", 1), qs(100, "c3", "c1", 1),
           qs(3000, "c2", "c2", 2), qs(3050, "c3", "c2", 2)]
    if not fresh:  # c1 restarted at 2 s: its file is its previous life's
        evs.insert(4, qs(2000, "c1", "c1", 1, fresh=False))
    end = 3000 + resigns_after_ms if resigns_after_ms is not None else 20_000
    evs.append(qs(end, "c1", None, 3 if resigns_after_ms is not None else 2))
    return evs


def test_a_leader_that_never_resigns_while_another_epoch_leads_is_a_stale_raft_leader() -> None:
    res = check_observed(isolated_leader(None))
    assert res["counts"] == {STALE_RAFT_LEADER: 1} and res["valid"] is False
    assert "epoch 1" in res["violations"][0]["message"] and res["violations"][0]["node"] == "c1"


def test_a_leader_that_resigns_within_the_bound_is_not_stale() -> None:
    assert stale_bound_ms(START) == 2000 + 2 * 1000 + 2 * 250
    assert check_observed(isolated_leader(1500))["valid"] is True


def test_a_restarted_nodes_old_file_is_not_a_claim() -> None:
    assert check_observed(isolated_leader(None, fresh=False))["valid"] is True


def test_a_leader_shutting_down_claims_nothing_from_its_sigterm_but_stale_before_it_is_still_found() -> None:
    """Seed 2003 of the power-loss campaign on Kafka 4.4: c3, cut off,
    resigned (in memory) and was sent a SIGTERM 0.3 s after another voter
    led a higher epoch; its graceful shutdown (5 s) makes no election, so
    its file named it leader of epoch 1 until it was restarted 6.2 s later.
    A leader already stale for longer than the bound when the SIGTERM came
    is still a stale leader."""
    shut = isolated_leader(None)[:-1] + [
        {**qs(3300, "c1", "c1", 1), "stopping": True}, qs(9200, "c1", "c1", 1, fresh=False)]
    assert check_observed(shut)["valid"] is True
    late = isolated_leader(None)[:-1] + [
        {**qs(8000, "c1", "c1", 1), "stopping": True}, qs(14000, "c1", "c1", 1, fresh=False)]
    res = check_observed(late)
    assert res["counts"] == {STALE_RAFT_LEADER: 1}
    assert "for 5000 ms" in res["violations"][0]["message"]


def test_a_node_down_claims_nothing() -> None:
    evs = isolated_leader(None)[:-1] + [qs(3100, "c1", None, -1, alive=False), qs(20_000, "c1", "c2", 2)]
    assert check_observed(evs)["valid"] is True


def looks(first: int, last: int, every: int = 250) -> list[dict]:
    return [{"kind": "quorum_poll", "t": t, "node": "observer"} for t in range(first, last + 1, every)]


def _by_time(evs: list[dict]) -> list[dict]:
    return sorted(evs, key=lambda e: (e["t"], e["kind"] == "quorum_poll"))  # a look's changes, then its mark


def test_a_claim_lasts_only_to_the_last_look_that_saw_it_so_a_gap_in_the_looks_is_no_evidence() -> None:
    """Seed 2003's second replay on Kafka 4.4: c1 (cut off) was seen naming
    itself leader of epoch 3 by the look that first saw epoch 4, then the
    looks stalled for 6.3 s; c1 wrote its unattached state 0.8 s into the
    gap, and the next look found it. Counted to that look the claim was
    6.3 s, over the bound; counted to the last look that saw it, none."""
    evs = isolated_leader(6300)
    gap = _by_time(evs + looks(0, 3000) + looks(9300, 12_000))
    assert check_observed(gap)["valid"] is True
    assert check_observed(evs)["valid"] is False  # a trace without looks: counted to the look that found it over


def test_a_leader_still_seen_stale_by_every_look_is_found_with_the_looks() -> None:
    evs = _by_time(isolated_leader(None) + looks(0, 20_000))
    res = check_observed(evs)
    assert res["counts"] == {STALE_RAFT_LEADER: 1}
    assert "for 16750 ms" in res["violations"][0]["message"]  # 3000 ms to the last look before 20 s that saw it


# --- hw-advanced-under-min-isr ------------------------------------------------------------


def sample(poll: int, hw: int, isr: list[int], le: int = 4) -> dict:
    return {"kind": "small_isr", "t": 1000 + 250 * poll, "node": "observer", "tp": "t-0", "poll": poll,
            "leader": 1, "leader_epoch": le, "isr": isr, "hw": hw, "small": len(isr) < 2}


def test_hw_rising_over_three_polls_of_a_small_isr_is_found() -> None:
    res = check_observed([START, sample(1, 10, [1]), sample(2, 15, [1]), sample(3, 15, [1])])
    assert res["counts"] == {HW_UNDER_MIN_ISR: 1}
    assert "HW 10 -> 15" in res["violations"][0]["message"]


def test_an_isr_back_to_size_on_the_next_poll_explains_the_rise() -> None:
    """The HW may jump the moment the ISR grows back, between one poll's
    metadata and its watermark read: the third poll must still see it small."""
    assert check_observed([START, sample(1, 10, [1]), sample(2, 15, [1]), sample(3, 15, [1, 2])])["valid"]


def test_a_frozen_hw_under_a_small_isr_is_fine_and_gaps_between_polls_do_not_join() -> None:
    assert check_observed([START, sample(1, 10, [1]), sample(2, 10, [1]), sample(3, 10, [1])])["valid"]
    assert check_observed([START, sample(1, 10, [1]), sample(3, 15, [1]), sample(4, 15, [1])])["valid"]
    assert check_observed([START, sample(1, 10, [1]), sample(2, 15, [1], le=5), sample(3, 15, [1], le=5)])["valid"]


# --- the same rule on a trace whose leaders report their own state (the model's) -----------------


def leader_trace(isr_size: int) -> list[dict]:
    isr = [2, 3, 1][:isr_size]
    return [{"kind": "isr", "node": 2, "tp": "t0-1", "isr": isr, "state": "committed", "leader_epoch": 0, "t": 1},
            {"kind": "hw", "node": 2, "tp": "t0-1", "hw": 5, "role": "leader", "t": 2},
            {"kind": "hw", "node": 2, "tp": "t0-1", "hw": 9, "role": "leader", "t": 3}]


def test_a_leaders_hw_rising_with_a_committed_isr_below_min_isr_is_found_in_its_own_trace() -> None:
    from checkers.observed import hw_under_min_isr_in_trace

    found = hw_under_min_isr_in_trace(leader_trace(1), min_isr=2)
    assert [f["kind"] for f in found] == [HW_UNDER_MIN_ISR] and "HW 5 -> 9" in found[0]["message"]
    assert hw_under_min_isr_in_trace(leader_trace(2), min_isr=2) == []
