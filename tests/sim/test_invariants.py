"""The invariant monitor on synthetic traces: each invariant has a trace that
keeps it and one that breaks it (seed references in checkers/invariants.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.invariants import InvariantMonitor, check_trace_dir

TP = "t-0"


def ev(t: int, node: int, kind: str, **data: Any) -> dict[str, Any]:
    return {"t": t, "node": node, "kind": kind, **data}


def kinds(events: list[dict[str, Any]], **kw: Any) -> dict[str, int]:
    return InvariantMonitor(seed=42, **kw).observe_all(events).counts


def replicated(n: int, epoch: int = 0, nodes: tuple[int, ...] = (1, 2, 3), leader: int = 1) -> list[dict[str, Any]]:
    """``n`` single-record batches on every node, the leader's HW following."""
    out = [ev(0, leader, "become_leader", tp=TP, leader_epoch=epoch, partition_epoch=epoch, isr=list(nodes), leo=0, hw=0)]
    for x in nodes:
        if x != leader:
            out.append(ev(0, x, "become_follower", tp=TP, leader=leader, leader_epoch=epoch, partition_epoch=epoch))
    for i in range(n):
        for x in nodes:
            out.append(ev(i + 1, x, "append", tp=TP, base=i, count=1, epoch=epoch, leo=i + 1,
                          role="leader" if x == leader else "follower"))
        out.append(ev(i + 1, leader, "hw", tp=TP, hw=i + 1, leo=i + 1, role="leader"))
    return out


def test_clean_replication_keeps_every_invariant() -> None:
    assert kinds(replicated(10)) == {}


def test_hw_above_leo_is_reported_with_seed_step_time_and_node() -> None:
    m = InvariantMonitor(seed=7).observe_all(replicated(2) + [ev(9, 2, "hw", tp=TP, hw=5, leo=2, role="follower")])
    (v,) = m.violations
    assert v.kind == "hw-above-leo" and v.seed == 7 and v.node == 2 and v.t == 9 and v.step == len(replicated(2)) + 1
    assert "seed 7" in str(v)


def test_leader_hw_is_monotonic_within_a_leadership() -> None:
    assert kinds(replicated(3) + [ev(9, 1, "hw", tp=TP, hw=1, leo=3, role="leader")]) == {"hw-regressed": 1}


def test_a_restart_begins_a_new_replica_lifetime() -> None:
    evs = replicated(3) + [
        ev(9, 1, "node_start", incarnation=2, reason="restart"),
        ev(9, 1, "loaded", tp=TP, leo=3, hw=1, log_start=0, epochs=[[0, 0]]),
        ev(10, 1, "become_leader", tp=TP, leader_epoch=1, partition_epoch=1, isr=[1, 2, 3], leo=3, hw=1),
        ev(10, 1, "hw", tp=TP, hw=2, leo=3, role="leader"),
    ]
    assert kinds(evs) == {}


def test_a_restart_or_a_load_forgets_the_replica_the_monitor_found_last() -> None:
    """The monitor keeps the replica it found last (InvariantMonitor._rep);
    a node's start and a ``loaded`` event begin a new replica, so a leader
    HW below the previous lifetime's is no regression."""
    m = InvariantMonitor(seed=1)
    m.observe(ev(1, 1, "hw", tp=TP, hw=5, leo=5, role="leader"))
    m.observe(ev(2, 1, "node_start", incarnation=2, reason="restart"))
    m.observe(ev(3, 1, "hw", tp=TP, hw=1, leo=5, role="leader"))
    m.observe(ev(4, 1, "loaded", tp=TP, leo=2, hw=0, log_start=0, epochs=[[0, 0]]))
    m.observe(ev(5, 1, "hw", tp=TP, hw=0, role="leader"))
    assert m.counts == {}
    m.observe(ev(6, 2, "hw", tp=TP, hw=3, leo=3, role="leader"))
    m.observe(ev(7, 1, "hw", tp=TP, hw=3, leo=1, role="leader"))  # node 1's own replica, not node 2's
    assert m.counts == {"hw-above-leo": 1}


def test_a_replica_whose_leo_no_event_named_yet_holds_no_hw_or_append_to_it() -> None:
    """A replica's LEO is unknown (``_Replica.leo`` -1) until an event names
    it: an HW event without one checks no HW against it, and a first append
    at any offset is no gap; once named, both are checked (an LEO of 0 is
    one: the sentinel is below every offset, not a falsy value)."""
    m = InvariantMonitor(seed=1)
    m.observe(ev(1, 2, "hw", tp=TP, hw=4, role="follower"))  # no LEO known: nothing to hold the HW to
    m.observe(ev(2, 2, "append", tp=TP, base=7, count=1, epoch=0, leo=8, role="follower"))  # nothing to be at
    assert m.counts == {}
    m.observe(ev(3, 3, "hw", tp=TP, hw=0, leo=0, role="follower"))  # LEO 0, named
    m.observe(ev(4, 3, "hw", tp=TP, hw=1, role="follower"))  # above it
    m.observe(ev(5, 3, "append", tp=TP, base=2, count=1, epoch=0, leo=3, role="follower"))  # not at it
    assert m.counts == {"hw-above-leo": 1, "append-not-at-leo": 1}


def test_new_leader_missing_committed_offsets_breaks_leader_completeness() -> None:
    # seed 003: offset 5 committed (HW 6) on the leader; a replica holding only 0..4 is elected
    evs = replicated(6, nodes=(1, 2)) + [
        ev(0, 3, "become_follower", tp=TP, leader=1, leader_epoch=0, partition_epoch=0)]
    evs += [ev(1, 3, "append", tp=TP, base=i, count=1, epoch=0, leo=i + 1, role="follower") for i in range(5)]
    evs.append(ev(20, 3, "become_leader", tp=TP, leader_epoch=1, partition_epoch=3, isr=[3], leo=5, hw=5))
    m = InvariantMonitor(seed=3).observe_all(evs)
    assert m.counts == {"leader-completeness": 1}
    assert "[5, 6)" in m.violations[0].message


def test_new_leader_with_a_different_batch_at_a_committed_offset_breaks_leader_completeness() -> None:
    evs = replicated(3, nodes=(1, 2))
    evs += [ev(0, 3, "become_follower", tp=TP, leader=1, leader_epoch=0, partition_epoch=0)]
    evs += [ev(1, 3, "append", tp=TP, base=0, count=1, epoch=0, leo=1, role="follower"),
            ev(2, 3, "append", tp=TP, base=1, count=2, epoch=5, leo=3, role="follower"),
            ev(3, 3, "become_leader", tp=TP, leader_epoch=6, partition_epoch=6, isr=[3], leo=3, hw=0)]
    assert kinds(evs) == {"leader-completeness": 1}


def test_follower_disagreeing_below_its_hw_breaks_log_matching() -> None:
    evs = replicated(4, nodes=(1, 2))
    evs += [ev(10, 2, "truncate", tp=TP, to=2, leo_before=4, reason="hw"),
            ev(11, 2, "append", tp=TP, base=2, count=2, epoch=9, leo=4, role="follower"),
            ev(12, 2, "hw", tp=TP, hw=4, leo=4, role="follower")]
    assert kinds(evs) == {"log-matching": 1, "committed-truncated": 1}


def test_epoch_truncation_of_committed_entries_is_reported() -> None:
    evs = replicated(4, nodes=(1, 2)) + [ev(10, 2, "truncate", tp=TP, to=1, leo_before=4, reason="diverging-epoch")]
    assert kinds(evs) == {"committed-truncated": 1}


def test_truncation_of_uncommitted_tail_is_fine() -> None:
    evs = replicated(4, nodes=(1, 2)) + [
        ev(10, 2, "append", tp=TP, base=4, count=3, epoch=0, leo=7, role="follower"),
        ev(11, 2, "truncate", tp=TP, to=4, leo_before=7, reason="diverging-epoch")]
    assert kinds(evs) == {}


def test_epochs_never_go_back_on_a_broker() -> None:
    evs = [ev(0, 2, "become_follower", tp=TP, leader=1, leader_epoch=4, partition_epoch=9),
           ev(1, 2, "become_follower", tp=TP, leader=3, leader_epoch=3, partition_epoch=10)]
    assert kinds(evs) == {"leader-epoch-regressed": 1}


def pm(t: int, node: int, **kw: Any) -> dict[str, Any]:
    base = dict(tp=TP, leader=1, leader_epoch=0, partition_epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3], elr=[],
                last_known_elr=[], recovery_state=0)
    base.update(kw)
    return ev(t, node, "partition_metadata", **base)


def test_controller_partition_records_keep_isr_and_elr_invariants() -> None:
    good = [pm(0, 101), pm(1, 101, isr=[1, 2], partition_epoch=1),
            pm(2, 101, isr=[1], elr=[2], partition_epoch=2),
            pm(3, 101, isr=[], elr=[1, 2], leader=-1, leader_epoch=1, partition_epoch=3)]
    assert kinds(good, min_isr=2) == {}
    bad = [pm(0, 101, isr=[1, 4]), pm(1, 101, leader=3, isr=[1, 2], partition_epoch=1),
           pm(2, 101, isr=[1, 2], elr=[2], partition_epoch=2), pm(3, 101, isr=[1, 2], elr=[3], partition_epoch=3)]
    assert kinds(bad, min_isr=2) == {"isr-not-subset": 1, "leader-not-in-isr": 1, "elr-in-isr": 1,
                                     "elr-with-isr-at-min": 2}


def test_controller_replay_epochs_monotonic_and_controllers_agree() -> None:
    evs = [pm(0, 101, partition_epoch=3, leader_epoch=2), pm(1, 101, partition_epoch=2, leader_epoch=2),
           pm(2, 102, partition_epoch=3, leader_epoch=2, isr=[1, 2])]
    assert kinds(evs) == {"partition-epoch-regressed": 1, "metadata-divergence": 1}


def test_two_quorum_leaders_in_one_epoch_are_reported() -> None:
    evs = [ev(0, 101, "raft_state", epoch=3, role="leader", leader=101),
           ev(1, 102, "raft_state", epoch=3, role="leader", leader=102),
           ev(2, 103, "raft_state", epoch=4, role="leader", leader=103)]
    assert kinds(evs) == {"two-raft-leaders": 1}


def test_trace_directory_is_merged_by_time(tmp_path: Path) -> None:
    evs = replicated(3, nodes=(1, 2)) + [ev(50, 2, "become_leader", tp=TP, leader_epoch=1, partition_epoch=1,
                                             isr=[2], leo=1, hw=1)]
    # node 2 only got one record: rewrite its appends
    evs = [e for e in evs if not (e["node"] == 2 and e["kind"] == "append" and e["base"] > 0)]
    for node in (1, 2):
        d = tmp_path / "nodes" / f"n{node}"
        d.mkdir(parents=True)
        (d / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs if e["node"] == node))
    out = check_trace_dir(tmp_path, seed=5)
    assert out["valid"] is False and out["counts"] == {"leader-completeness": 1}
    assert out["violations"][0]["seed"] == 5 and out["violations"][0]["node"] == 2


def test_append_spanning_an_epoch_change_uses_the_batch_epochs() -> None:
    # a follower catching up fetches [0,3) of epoch 0 and [3,5) of epoch 1 in one response
    evs = [ev(0, 1, "become_leader", tp=TP, leader_epoch=1, partition_epoch=1, isr=[1, 2], leo=3, hw=0),
           ev(0, 1, "loaded", tp=TP, leo=3, hw=0, log_start=0, epochs=[[0, 0]]),
           ev(1, 1, "append", tp=TP, base=3, count=2, epoch=1, leo=5, role="leader"),
           ev(2, 2, "append", tp=TP, base=0, count=5, epoch=1, leo=5, role="follower", epochs=[[0, 0], [1, 3]]),
           ev(3, 1, "hw", tp=TP, hw=5, leo=5, role="leader"),
           ev(4, 2, "hw", tp=TP, hw=5, leo=5, role="follower")]
    assert kinds(evs) == {}
    without = [dict(e) for e in evs]
    del without[3]["epochs"]
    assert kinds(without) == {"log-matching": 1}


def test_hw_truncation_of_committed_entries_is_reported_pre_kip101() -> None:
    evs = replicated(4, nodes=(1, 2)) + [ev(10, 2, "truncate", tp=TP, to=2, leo_before=4, reason="hw")]
    assert kinds(evs) == {"committed-truncated": 1}


def test_full_truncation_is_exempt() -> None:
    evs = replicated(4, nodes=(1, 2)) + [ev(10, 2, "truncate", tp=TP, to=0, leo_before=4, reason="full")]
    assert kinds(evs) == {}


def _expansion(follower_leo: int) -> list[dict[str, Any]]:
    # leader 2 of epoch 1 starts at offset 10 (HW 9); follower 3 fetched at follower_leo
    evs = [ev(0, 3, "loaded", tp=TP, leo=follower_leo, hw=follower_leo, log_start=0, epochs=[[0, 0]]),
           ev(0, 2, "loaded", tp=TP, leo=10, hw=9, log_start=0, epochs=[[0, 0]]),
           ev(1, 2, "become_leader", tp=TP, leader_epoch=1, partition_epoch=4, isr=[2], leo=10, hw=9),
           ev(2, 2, "isr", tp=TP, isr=[2], maximal_isr=[2, 3], state="pending-expand", partition_epoch=4,
              leader_epoch=1)]
    return evs


def test_isr_expansion_below_the_leader_epoch_start_offset_is_reported() -> None:
    assert kinds(_expansion(9)) == {"isr-expanded-early": 1}
    assert kinds(_expansion(10)) == {}
    assert kinds(_expansion(8)) == {"isr-expanded-early": 1}


def test_an_isr_expansion_below_the_leaders_hw_names_when_the_followers_leo_last_moved() -> None:
    """Follower 3's LEO (15) is past the leader's epoch start (10) but
    below its HW (18): the violation says when that LEO was set, so a
    reader can tell a follower whose appends were never seen (set long
    before) from one whose events merged late."""
    evs = [ev(0, 3, "loaded", tp=TP, leo=15, hw=9, log_start=0, epochs=[[0, 0]]),
           ev(0, 2, "loaded", tp=TP, leo=10, hw=9, log_start=0, epochs=[[0, 0]]),
           ev(1, 2, "become_leader", tp=TP, leader_epoch=1, partition_epoch=4, isr=[2], leo=10, hw=9),
           ev(2, 2, "append", tp=TP, base=10, count=10, epoch=1, leo=20, role="leader"),
           ev(3, 2, "hw", tp=TP, hw=18, leo=20, role="leader"),
           ev(4, 2, "isr", tp=TP, isr=[2], maximal_isr=[2, 3], state="pending-expand", partition_epoch=4,
              leader_epoch=1)]
    m = InvariantMonitor(seed=42).observe_all(evs)
    assert m.counts == {"isr-expanded-early": 1}
    assert m.violations[0].message == ("replica 3 joined the ISR at LEO 15, below the leader's HW 18 "
                                       "(its LEO last moved at t=0)")


def test_unstamped_events_get_the_same_checks_and_violation_records_as_stamped_ones() -> None:
    """observe_data (the simulator's path for appends, HWs and produces,
    node and time given apart) reaches the verdicts observe reaches on the
    same events stamped: here a gap, an epoch regression, HW above LEO, a
    regressed leader HW and a log-matching break, each with its node, time
    and step; other kinds given unstamped still reach their handlers."""
    evs = replicated(3) + [
        ev(7, 2, "append", tp=TP, base=5, count=1, epoch=0, leo=6, role="follower"),   # gap: LEO was 3
        ev(8, 3, "truncate", tp=TP, to=2, reason="diverging"),                          # committed offset 2 removed
        ev(8, 3, "append", tp=TP, base=2, count=1, epoch=5, leo=3, role="follower"),
        ev(9, 3, "hw", tp=TP, hw=3, leo=3, role="follower"),                            # epoch 5 at 2, below HW 3
        ev(9, 3, "append", tp=TP, base=3, count=1, epoch=1, leo=4, role="follower"),   # epoch goes back
        ev(10, 2, "hw", tp=TP, hw=9, leo=6, role="follower"),                           # above LEO
        ev(11, 1, "hw", tp=TP, hw=1, leo=3, role="leader"),                             # leader HW regressed
        ev(12, 2, "produce", tp=TP, acks=-1, error=0, base=3, count=1),
    ]
    stamped = InvariantMonitor(seed=5).observe_all(evs)
    unstamped = InvariantMonitor(seed=5)
    for e in evs:
        data = {k: v for k, v in e.items() if k not in ("t", "node", "kind")}
        unstamped.observe_data(e["node"], e["t"], e["kind"], data)
    assert set(stamped.counts) >= {"append-not-at-leo", "epoch-regressed-in-log", "hw-above-leo", "hw-regressed",
                                   "log-matching", "committed-truncated"}
    assert unstamped.counts == stamped.counts and unstamped.step == stamped.step == len(evs)
    assert [v.to_dict() for v in unstamped.violations] == [v.to_dict() for v in stamped.violations]


def test_typed_hot_events_get_the_same_checks_and_violation_records_as_their_dicts() -> None:
    """observe_append / observe_hw / observe_produce (the simulator's path
    for the core's typed AppendTrace, HwTrace and ProduceTrace, values given
    apart) reach the verdicts observe_data reaches on their dicts: each
    check, message, node, time and step the same."""
    evs = replicated(3) + [
        ev(7, 2, "append", tp=TP, base=5, count=1, epoch=0, epochs=[[0, 5]], leo=6, role="follower"),   # gap
        ev(8, 3, "truncate", tp=TP, to=2, reason="diverging"),
        ev(8, 3, "append", tp=TP, base=2, count=1, epoch=5, epochs=[[5, 2]], leo=3, role="follower"),
        ev(9, 3, "hw", tp=TP, hw=3, leo=3, role="follower"),                            # log matching
        ev(9, 3, "append", tp=TP, base=3, count=2, epoch=1, epochs=[[1, 3], [2, 4]], leo=5, role="follower"),
        ev(10, 2, "hw", tp=TP, hw=9, leo=6, role="follower"),                           # above LEO
        ev(11, 1, "hw", tp=TP, hw=1, leo=3, role="leader"),                             # leader HW regressed
        ev(12, 2, "produce", tp=TP, acks=-1, error=0, base=3, count=1),
    ]
    by_dict, typed = InvariantMonitor(seed=5), InvariantMonitor(seed=5)
    for e in evs:
        data = {k: v for k, v in e.items() if k not in ("t", "node", "kind")}
        by_dict.observe_data(e["node"], e["t"], e["kind"], dict(data))
        if e["kind"] == "append" and "epochs" in e:
            typed.observe_append(e["node"], e["t"], e["tp"], e["base"], e["count"], e["epoch"], e["epochs"], e["leo"])
        elif e["kind"] == "hw":
            typed.observe_hw(e["node"], e["t"], e["tp"], e["hw"], e["leo"], e["role"])
        elif e["kind"] == "produce":
            typed.observe_produce()
        else:
            typed.observe_data(e["node"], e["t"], e["kind"], dict(data))
    assert set(by_dict.counts) >= {"append-not-at-leo", "epoch-regressed-in-log", "hw-above-leo", "hw-regressed",
                                   "log-matching", "committed-truncated"}
    assert typed.counts == by_dict.counts and typed.step == by_dict.step == len(evs)
    assert [v.to_dict() for v in typed.violations] == [v.to_dict() for v in by_dict.violations]


def _sole_isr_power_loss(rejoin: bool = False, election: str = "last-known-leader") -> list[dict[str, Any]]:
    """Leader 1 commits 6 offsets with 2 and 3; the ISR shrinks to [1]; 1
    loses power with its unfsynced log and comes back empty; it is elected
    again (``election``: how the controller says it chose it). With
    ``rejoin`` it first leaves the ISR and joins it again under leader 2
    (it caught up), so a later hole in its log is not the power loss's
    doing (the synthetic log does not show the catching up: only the
    metadata matters here)."""
    evs = replicated(6)
    evs += [ev(10, 101, "partition_metadata", tp=TP, leader=1, leader_epoch=0, partition_epoch=3, isr=[1],
               elr=[], replicas=[1, 2, 3]),
            ev(11, 1, "node_stop", reason="power-loss", lost_entries=6),
            ev(12, 1, "node_start", incarnation=2, reason="restart"),
            ev(12, 1, "loaded", tp=TP, leo=0, hw=0, log_start=0, epochs=[])]
    if rejoin:  # out of the ISR under leader 2, then back in: it caught up
        evs += [ev(13, 101, "partition_metadata", tp=TP, leader=2, leader_epoch=1, partition_epoch=4, isr=[2],
                   elr=[], replicas=[1, 2, 3]),
                ev(13, 101, "partition_metadata", tp=TP, leader=2, leader_epoch=1, partition_epoch=5, isr=[2, 1],
                   elr=[], replicas=[1, 2, 3])]
    evs += [ev(14, 101, "partition_metadata", tp=TP, leader=1, leader_epoch=2, partition_epoch=6, isr=[1],
               elr=[], replicas=[1, 2, 3]),
            ev(14, 101, "election", tp=TP, data_kind=election, leader=1, leader_epoch=2),
            ev(15, 1, "become_leader", tp=TP, leader_epoch=2, partition_epoch=6, isr=[1], leo=0, hw=0)]
    return evs


def test_last_known_leader_elected_after_its_power_loss_breaks_leader_completeness_by_design_as_kafka_does() -> None:
    m = InvariantMonitor(seed=1626).observe_all(_sole_isr_power_loss())
    (v,) = m.violations
    assert m.counts == {"leader-completeness": 1} and m.summary()["by_design"] == {"leader-completeness": 1}
    assert v.by_design and v.election == "last-known-leader" and v.lost_range == [0, 6]
    assert v.why is not None and "broker 1 lost power at 0.0 s (6 log entries not fsynced)" in v.why
    assert "last known leader without committed offsets [0, 6)" in v.why


def test_a_clean_or_elr_election_missing_committed_offsets_is_never_by_design() -> None:
    for kind in ("clean", "elr", "unclean"):
        m = InvariantMonitor().observe_all(_sole_isr_power_loss(election=kind))
        assert m.counts == {"leader-completeness": 1} and not m.violations[0].by_design, kind
        assert "by_design" not in m.summary()


def test_a_node_that_rejoined_the_isr_after_its_power_loss_loses_committed_offsets_not_by_design() -> None:
    m = InvariantMonitor().observe_all(_sole_isr_power_loss(rejoin=True))
    assert m.counts == {"leader-completeness": 1} and not m.violations[0].by_design


def test_a_last_known_leader_without_a_power_loss_that_lacks_committed_offsets_is_not_by_design() -> None:
    evs = [e for e in _sole_isr_power_loss() if e["kind"] != "node_stop"]
    m = InvariantMonitor().observe_all(evs)
    assert m.counts == {"leader-completeness": 1} and not m.violations[0].by_design


def test_is_clip_says_exactly_when_a_kept_prefix_equals_the_clip_of_the_runs():
    """The monitor keeps a partition's committed runs when a leader's HW
    move leaves them as they were (``is_clip``, no list made): it must say
    yes exactly when ``clip`` would give an equal list."""
    import random as _random

    from checkers.invariants import clip, is_clip

    rng = _random.Random(7)
    for _ in range(2000):
        runs = sorted({(rng.randrange(12), rng.randrange(4)) for _ in range(rng.randrange(5))})
        end = rng.randrange(14)
        kept = clip(runs, end) if rng.random() < 0.5 else clip(runs, rng.randrange(14))
        if rng.random() < 0.2 and kept:
            kept = kept[:-1] + [(kept[-1][0], kept[-1][1] + 1)]
        assert is_clip(kept, runs, end) == (kept == clip(runs, end)), (kept, runs, end)


def test_a_replica_that_agreed_with_the_committed_log_is_checked_again_once_its_log_changes():
    """The monitor remembers that a replica's runs equalled the committed
    runs (``_Replica.agreed_runs``) and skips the comparison at its next HW
    while neither changed; a run appended since (here a batch of another
    epoch below the committed HW) is compared again, and the Log Matching
    violation is found (seed 000, "Leader epochs & epoch-based truncation")."""
    mon = InvariantMonitor()
    mon.observe_append(1, 1, "t-0", 0, 10, 0, None, 10)
    mon.observe_hw(1, 2, "t-0", 10, 10, "leader")  # committed: epoch 0 up to 10
    mon.observe_append(2, 3, "t-0", 0, 5, 0, None, 5)
    mon.observe_hw(2, 4, "t-0", 5, 5, "follower")  # agrees
    mon.observe_hw(2, 5, "t-0", 5, 5, "follower")  # agrees, unchanged
    assert mon.valid
    mon.observe_append(2, 6, "t-0", 5, 5, 1, None, 10)  # epoch 1 at 5: not the committed batch
    mon.observe_hw(2, 7, "t-0", 10, 10, "follower")
    assert mon.counts == {"log-matching": 1}


def test_replicas_found_before_are_found_again_by_both_their_node_and_partition() -> None:
    """The monitor keeps the replicas it found (InvariantMonitor._rep's
    slots, by identity of node and partition name): events rotating over
    many replicas, more than it keeps, each reach their own replica. Each
    replica's LEO is its own (the node times the partition's number), so an
    append or an HW given another's replica is a gap or an HW above its LEO."""
    m = InvariantMonitor(seed=1)
    tps = [f"t-{i}" for i in range(7)]
    nodes = (1, 2, 3)
    for rnd in range(3):
        for tp_i, tp in enumerate(tps):
            for node in nodes:
                size = node * (tp_i + 1)
                base = rnd * size
                m.observe(ev(rnd, node, "append", tp=tp, base=base, count=size, epoch=0, leo=base + size,
                             role="follower"))
                m.observe(ev(rnd, node, "hw", tp=tp, hw=base + size, leo=base + size, role="follower"))
    assert m.counts == {}
    m.observe(ev(9, 2, "hw", tp=tps[3], hw=3 * 8 + 1, role="follower"))  # node 2's LEO on t-3 is 24
    assert m.counts == {"hw-above-leo": 1}
