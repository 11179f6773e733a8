"""The verdict judges each write by the promise its acks level carried, and
never calls a record lost where the history cannot show it.

* seed 000/003: an acks=all acknowledgement means the whole ISR had the
  record, so no clean leader change may lose it — a loss is an anomaly;
  acks=1 was answered by the leader alone (a leader change truncates what
  followers had not fetched) and acks=0 by nobody, so their losses are
  reported, and count only with ``strict_acks1`` (acks=1).
* Every other anomaly (duplicates, G1a, ordering, cycles) applies to every
  acks level: weaker acks never allow a consumer to see a broken log.
* A key whose final read never completed is unverified: its unseen records
  make the verdict "unknown"; a ``lost-write`` proper (a later offset was read,
  this acknowledged one never) is still evidence and stays invalid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.check import check_history
from checkers.final_reads import final_read_coverage
from checkers.history import write_jsonl
from checkers.queue.synth import HistoryBuilder
from tests.shared_data import KNOSSOS as KNOSSOS_DIR

K, K1 = "t-0", "t-1"
ROOT = Path(__file__).resolve().parents[2]
KRAFTWERK = [sys.executable, "-c", "from harness.cli import main; main()"]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KRAFTWERK_DEBUG", None)
    return subprocess.run(KRAFTWERK + list(args), capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


# --- histories ----------------------------------------------------------------


def tail_truncated(acks: str) -> HistoryBuilder:
    """Two acknowledged sends; after a leader change the final read returns
    only the first (seed 003: the unreplicated tail was truncated)."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks=acks)
    b.send(0, K, 2, 1, acks=acks)
    b.poll(1, {K: [(0, 1)]}, final=True)
    return b


def final_read(b: HistoryBuilder, process: int, key: str, type: str, reads: list) -> None:
    """The real harness's final read of one key (``workloads.queue``):
    ``info`` when the partition stayed unreadable until the deadline."""
    b.invoke(process, "poll", [["poll"]], final=True, key=key)
    b.complete(process, type, [["poll", {key: [list(p) for p in reads]}]])


def unreadable_key(acks: str = "all") -> HistoryBuilder:
    """K1's final read never completed; its acknowledged record 9 was never
    read. K is fine."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks=acks)
    b.send(0, K1, 9, 0, acks=acks)
    final_read(b, 1, K, "ok", [(0, 1)])
    final_read(b, 2, K1, "info", [])
    return b


# --- acks levels --------------------------------------------------------------


def test_acks1_loss_is_reported_but_valid() -> None:
    r = check_history(tail_truncated("1").ops)
    assert r["valid"] is True
    row = r["durability"]["acks=1"]
    assert (row["acked"], row["lost"], row["lost_rate"]) == (2, 1, 0.5)
    # reported under names that say which promise was broken
    assert set(r["anomaly_types"]) == {"lost-acks1-write", "unseen-acks1"}
    (ex,) = r["checkers"]["durability"]["examples"]["lost-acks1-write"]
    assert ex["value"] == 2 and ex["key"] == K
    assert r["anomalies"]["unseen-acks1"][0]["acks"] == "1"
    assert r["checkers"]["durability"]["bad_anomaly_types"] == []
    assert "unseen-acks1" in r["checkers"]["queue"]["allowed_anomaly_types"]


def test_seed003_acks1_offset_reused_after_truncation_is_not_inconsistent() -> None:
    """A non-idempotent acks=1 send is appended twice (the first reply lost,
    the retry answered at offset 2); a leader change truncates offset 2 and
    reuses it for another record, while the first copy survives at 1. The
    acknowledged offset was never durable: not inconsistent-offsets, and the
    value is not lost either (it is read at offset 1)."""
    for acks, invalid in (("1", False), ("all", True)):
        b = HistoryBuilder()
        b.send(0, K, 1, 0, acks=acks, idempotent=False)
        b.send(1, K, 2, 2, acks=acks, idempotent=False)
        b.send(2, K, 3, 2, acks=acks, idempotent=False)
        b.poll(3, {K: [(0, 1), (1, 2), (2, 3)]}, final=True)
        r = check_history(b.ops)
        assert ("inconsistent-offsets" in r["anomaly_types"]) is invalid, (acks, r["anomaly_types"])
        assert r["valid"] is (not invalid)
        assert not any(t.startswith("lost") for t in r["anomaly_types"])


def test_seed003_acks1_send_order_is_read_from_the_log_not_its_acknowledged_offset() -> None:
    """A process's acks=1 send is acknowledged at offset 2 (its retry's copy,
    later truncated) while its first copy survives at 1; its next send is
    acknowledged at the reused offset 2. Where a poll read the records, the
    sends are in process order: no nonmonotonic-send. With acks=all the
    acknowledged offsets are durable and the repeat is reported."""
    for acks, invalid in (("1", False), ("all", True)):
        b = HistoryBuilder()
        b.send(0, K, 1, 0, acks=acks, idempotent=False)
        b.send(0, K, 2, 2, acks=acks, idempotent=False)
        b.send(0, K, 3, 2, acks=acks, idempotent=False)
        b.poll(3, {K: [(0, 1), (1, 2), (2, 3)]}, final=True)
        r = check_history(b.ops)
        assert ("nonmonotonic-send" in r["anomaly_types"]) is invalid, (acks, r["anomaly_types"])
        assert r["valid"] is (not invalid)


def test_acks1_loss_is_invalid_with_strict_acks1() -> None:
    r = check_history(tail_truncated("1").ops, strict_acks1=True)
    assert r["valid"] is False
    assert r["checkers"]["durability"]["bad_anomaly_types"] == ["lost-acks1-write"]
    assert r["checkers"]["queue"]["bad_anomaly_types"] == ["unseen-acks1"]


def test_strict_acks1_comes_from_test_json() -> None:
    assert check_history(tail_truncated("1").ops, test={"strict_acks1": True})["valid"] is False
    assert check_history(tail_truncated("1").ops, test={"options": {"strict_acks1": True}})["valid"] is False
    # an explicit argument wins over test.json
    assert check_history(tail_truncated("1").ops, test={"strict_acks1": True}, strict_acks1=False)["valid"] is True


def test_acks0_loss_is_reported_and_allowed_even_when_strict() -> None:
    """acks=0 promises nothing, not even that the leader got the record."""
    for strict in (False, True):
        r = check_history(tail_truncated("0").ops, strict_acks1=strict)
        assert r["valid"] is True
        assert {"lost-acks0-write", "unseen-acks0"} == set(r["anomaly_types"])
        assert r["durability"]["acks=0"]["lost"] == 1


def test_acks_all_loss_is_invalid() -> None:
    r = check_history(tail_truncated("all").ops)
    assert r["valid"] is False
    assert {"lost-acked-write", "unseen"} <= set(r["anomaly_types"])
    assert r["durability"]["acks=all"]["lost"] == 1


def test_acks1_lost_write_proper_is_named_for_its_level() -> None:
    """Read past offset 0 without seeing it: Jepsen's lost-write, for an
    acks=1 send reported as lost-write-acks1 and allowed by default."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks="1")
    b.send(0, K, 2, 1, acks="1")
    b.poll(1, {K: [(1, 2)]})
    r = check_history(b.ops)
    assert r["valid"] is True
    assert "lost-write-acks1" in r["anomaly_types"] and "lost-write" not in r["anomaly_types"]
    assert check_history(b.ops, strict_acks1=True)["valid"] is False


def test_mixed_acks_run_with_only_acks1_losses_is_valid() -> None:
    """--acks mixed under a leader kill: the acks=1 record at offset 1 was on
    the old leader only; the new leader truncated it and gave offset 1 to the
    next record (seed 003). The acks=all records all survived."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks="all")
    b.send(1, K, 2, 1, acks="1")
    b.send(0, K, 3, 1, acks="all")  # offset 1 reused after the truncation
    b.send(1, K, 4, 2, acks="1")
    b.poll(2, {K: [(0, 1), (1, 3), (2, 4)]}, final=True)
    r = check_history(b.ops)
    assert r["valid"] is True
    assert r["durability"]["acks=all"]["lost"] == 0 and r["durability"]["acks=1"]["lost"] == 1
    # the unreplicated acknowledgement is no evidence about offset 1: no
    # inconsistent-offsets, no skip, no nonmonotonic send of process 1
    assert set(r["anomaly_types"]) == {"lost-acks1-write", "lost-write-acks1", "unseen-acks1"}
    assert check_history(b.ops, strict_acks1=True)["valid"] is False


def test_reads_disagreeing_on_an_acks1_record_offset_are_still_inconsistent() -> None:
    """Once a poll returned the acks=1 record, its offset is evidence."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks="1")
    b.send(0, K, 2, 0, acks="1")
    b.poll(1, {K: [(0, 1)]})
    b.poll(2, {K: [(0, 2)]})
    r = check_history(b.ops)
    assert "inconsistent-offsets" in r["anomaly_types"] and r["valid"] is False


def duplicate(acks: str) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks=acks)
    b.poll(1, {K: [(0, 1)]})
    b.poll(2, {K: [(1, 1)]})  # the same record again at offset 1
    return b


def g1a(acks: str) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, None, type="fail", acks=acks)
    b.poll(1, {K: [(0, 1)]})
    return b


def nonmonotonic_poll(acks: str) -> HistoryBuilder:
    b = HistoryBuilder()
    b.send(0, K, 1, 0, acks=acks)
    b.send(0, K, 2, 1, acks=acks)
    b.poll(1, {K: [(0, 1), (1, 2)]})
    b.poll(1, {K: [(0, 1)]})
    return b


@pytest.mark.parametrize("acks", ["1", "0"])
@pytest.mark.parametrize("build,anomaly", [(duplicate, "duplicate"), (g1a, "G1a"),
                                            (nonmonotonic_poll, "nonmonotonic-poll")])
def test_duplicates_and_ordering_of_weak_acks_sends_still_invalid(acks, build, anomaly) -> None:
    r = check_history(build(acks).ops)
    assert anomaly in r["anomaly_types"]
    assert r["valid"] is False


# --- unverifiable keys --------------------------------------------------------


def test_unseen_on_key_whose_final_read_failed_is_unknown() -> None:
    r = check_history(unreadable_key().ops)
    assert r["valid"] == "unknown"
    assert r["anomaly_types"] == ["unverified-unseen"]
    assert r["anomalies"]["unverified-unseen"][0]["key"] == K1
    fr = r["checkers"]["final-reads"]
    assert fr["incomplete_keys"] == [K1] and fr["failed_keys"] == [K1]
    assert fr["unverified_acked_writes"] == {K1: 1}
    assert r["checkers"]["queue"]["inconclusive_anomaly_types"] == ["unverified-unseen"]


def test_key_without_final_read_while_others_have_one_is_unverified() -> None:
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K1, 9, 0)
    final_read(b, 1, K, "ok", [(0, 1)])
    r = check_history(b.ops)
    assert r["valid"] == "unknown"
    assert r["checkers"]["final-reads"]["unread_keys"] == [K1]


def test_key_named_in_test_json_without_final_read_is_unverified() -> None:
    cov = final_read_coverage(unreadable_key().ops, keys=[K, K1, "t-2"])
    assert cov["incomplete_keys"] == [K1, "t-2"] and cov["unread_keys"] == ["t-2"]


def test_history_without_final_reads_judges_unseen_as_jepsen_does() -> None:
    """No final reads at all (a partial or Jepsen history): no coverage rule,
    unseen stays an anomaly."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.poll(1, {K: []})
    r = check_history(b.ops)
    assert final_read_coverage(b.ops) is None
    assert r["valid"] is False and "unseen" in r["anomaly_types"]


def test_lost_write_on_unverified_key_stays_invalid() -> None:
    """An ordinary poll read offset 1 but never offset 0: evidence of loss,
    whatever happened to the final read."""
    b = HistoryBuilder()
    b.send(0, K1, 1, 0)
    b.send(0, K1, 2, 1)
    b.poll(1, {K1: [(1, 2)]})
    b.send(0, K, 5, 0)
    final_read(b, 2, K, "ok", [(0, 5)])
    final_read(b, 3, K1, "info", [])
    r = check_history(b.ops)
    assert r["valid"] is False
    assert {"lost-write", "lost-acked-write", "unverified-unseen"} <= set(r["anomaly_types"])
    assert "unseen" not in r["anomaly_types"]


def test_unverified_key_with_only_acks1_writes_does_not_make_the_run_unknown() -> None:
    """Nothing was at stake there by default; with strict_acks1 it is."""
    r = check_history(unreadable_key("1").ops)
    assert r["valid"] is True and r["anomaly_types"] == ["unverified-unseen-acks1"]
    assert check_history(unreadable_key("1").ops, strict_acks1=True)["valid"] == "unknown"


def test_unverified_key_holding_acked_writes_makes_a_clean_run_unknown() -> None:
    """Every record was read once, but K1's final read never completed: its
    acknowledged write is not shown to have survived."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K1, 9, 0)
    b.poll(3, {K: [(0, 1)], K1: [(0, 9)]})
    final_read(b, 1, K, "ok", [(0, 1)])
    final_read(b, 2, K1, "info", [])
    r = check_history(b.ops)
    assert r["valid"] == "unknown" and r["anomaly_types"] == []


def test_simulator_final_read_without_the_partition_leaves_it_unverified() -> None:
    """The simulator reads every partition in one ``ok`` poll and names the
    ones it could not cover in ``incomplete``; a partition it returned
    nothing for is unverified, one it returned is judged."""
    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K, 2, 1)
    b.send(0, K1, 9, 0)
    b.invoke(5, "poll", [["poll"]], final=True)
    b.complete(5, "ok", [["poll", {K: [[0, 1]]}]], incomplete=[K, K1])
    r = check_history(b.ops)
    assert r["checkers"]["final-reads"]["incomplete_keys"] == [K1]
    # K was returned: its missing record is lost, acks=all, invalid
    assert r["valid"] is False
    assert r["durability"]["acks=all"]["lost"] == 1
    assert {"unseen", "unverified-unseen", "lost-acked-write"} == set(r["anomaly_types"])


# --- results.json contract ----------------------------------------------------


def test_results_json_contract() -> None:
    r = check_history(tail_truncated("1").ops)
    for field in ("valid", "anomaly_types", "anomalies", "durability", "stats", "checkers"):
        assert field in r
    for level in ("acks=all", "acks=1"):
        assert {"acked", "lost", "lost_rate"} <= set(r["durability"][level])
    assert r["anomaly_types"] == sorted(r["anomalies"])
    assert {"queue", "durability", "final-reads"} <= set(r["checkers"])
    json.dumps(r)  # serialisable as is


# --- through the CLI ----------------------------------------------------------


def test_cli_unseen_on_unreadable_key_exits_3(tmp_path) -> None:
    write_jsonl(tmp_path / "h.jsonl", unreadable_key().ops)
    p = cli("check", str(tmp_path / "h.jsonl"))
    assert p.returncode == 3, p.stdout + p.stderr
    assert "UNKNOWN" in p.stdout and "unverified" in p.stdout


def test_cli_acks1_loss_exits_0_and_1_with_fail_on_acks1_loss(tmp_path) -> None:
    write_jsonl(tmp_path / "h.jsonl", tail_truncated("1").ops)
    p = cli("check", str(tmp_path / "h.jsonl"), "--json")
    assert p.returncode == 0, p.stderr
    assert "lost-acks1-write" in json.loads(p.stdout)["anomaly_types"]
    p = cli("check", str(tmp_path / "h.jsonl"), "--fail-on-acks1-loss")
    assert p.returncode == 1, p.stderr
    assert "INVALID" in p.stdout


MULTI = KNOSSOS_DIR / "multi-register" / "good" / "multi-register.edn"


def test_cli_multi_register_needs_and_takes_its_initial_state() -> None:
    """Knossos's corpus checks this history against (multi-register {:x 0 :y 0})."""
    p = cli("check", str(MULTI), "--model", "multi-register", "--json")
    assert p.returncode == 1  # from nil, the first read of x=0,y=0 is impossible
    p = cli("check", str(MULTI), "--model", "multi-register", "--model-option", 'initial={"x": 0, "y": 0}',
            "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["valid"] is True


@pytest.mark.parametrize("opt,says", [("initial", "KEY=VALUE"), ("=1", "KEY=VALUE"),
                                      ("colour=1", "colour"), ("initial=5", "bad options")])
def test_cli_bad_model_option_is_one_line_exit_2(opt: str, says: str) -> None:
    p = cli("check", str(MULTI), "--model", "multi-register", "--model-option", opt)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], p.stderr


def test_cli_model_option_on_queue_model_is_a_usage_error(tmp_path) -> None:
    write_jsonl(tmp_path / "h.jsonl", tail_truncated("1").ops)
    p = cli("check", str(tmp_path / "h.jsonl"), "--model-option", "initial=0")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_run_directory_with_unreadable_key_named_in_test_json_exits_3(tmp_path) -> None:
    """The harness's path: a run directory, test.json naming the keys; a key
    no final read covered leaves its acknowledged writes unverified."""
    from harness.lifecycle.checking import check_run

    b = HistoryBuilder()
    b.send(0, K, 1, 0)
    b.send(0, K1, 9, 0)
    b.poll(3, {K: [(0, 1)], K1: [(0, 9)]})
    final_read(b, 1, K, "ok", [(0, 1)])  # K1's final read was never even started
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_jsonl(run_dir / "history.jsonl", b.ops)
    (run_dir / "test.json").write_text(json.dumps({"keys": [K, K1]}))
    res = check_run(run_dir)
    assert res["valid"] == "unknown"
    assert res["checkers"]["final-reads"]["unread_keys"] == [K1]
    p = cli("check", str(run_dir))
    assert p.returncode == 3, p.stdout + p.stderr
    assert json.loads((run_dir / "results.json").read_text())["valid"] == "unknown"


def test_verdicts_combine_as_three_valued_conjunction() -> None:
    from checkers.verdict import UNKNOWN, combine

    assert combine([True, True]) is True
    assert combine([True, UNKNOWN]) == UNKNOWN
    assert combine([UNKNOWN, False, True]) is False
    assert combine([True, None]) == UNKNOWN   # a missing verdict decides nothing
    assert combine([]) is True
