"""Jepsen's verdict for Jepsen's histories: the ``jepsen`` reading allows
exactly ``jepsen.tests.kafka/allowed-error-types`` for the test's options
(checkers/queue/readings.py), and kraftwerk's readings stay available by
flag, each verdict naming the one it used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.check import check_history, queue_options_from_test
from checkers.history import write_edn
from checkers.queue.checker import QueueOptions, allowed_anomalies
from checkers.queue.readings import JEPSEN, declared_options
from checkers.queue.synth import HistoryBuilder
from tests.checkers.test_jepsen_parity import _g0_txns, _wr_cycle
from tests.checkers.test_queue_anomalies import nonmonotonic_poll, poll_skip

ROOT = Path(__file__).resolve().parents[2]
KRAFTWERK = [sys.executable, "-c", "from harness.cli import main; main()"]

#: allowed-error-types of jepsen.tests.kafka (kafka.clj, lines 2433-2463 at
#: c4c7473), written out for each option set
ALWAYS = {"int-send-skip", "G0", "G0-process", "G0-realtime", "PL-1-cycle-exists", "strong-PL-1-cycle-exists"}
SUBSCRIBE = {"poll-skip", "nonmonotonic-poll"}
WW = {"G1c", "G1c-process", "G1c-realtime", "PL-2-cycle-exists", "strong-PL-2-cycle-exists"}


def jepsen(**kw: object) -> QueueOptions:
    return QueueOptions(reading=JEPSEN, ww_deps=False, **kw)  # type: ignore[arg-type]


def kraftwerk_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(KRAFTWERK + list(args), capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("sub_via, ww_deps, expected", [
    (("assign",), False, ALWAYS),
    (("subscribe",), False, ALWAYS | SUBSCRIBE),
    (("assign",), True, ALWAYS | WW),
    (("assign", "subscribe"), True, ALWAYS | SUBSCRIBE | WW),
])
def test_jepsens_reading_allows_exactly_jepsens_allowed_error_types(sub_via, ww_deps, expected) -> None:
    """Nothing of kraftwerk's own allowances (acks=0/1 losses, a
    non-idempotent retry's duplicate) and nothing for txn: Jepsen's rule
    reads only :sub-via and :ww-deps."""
    for txn in (False, True):
        opts = QueueOptions(reading=JEPSEN, sub_via=sub_via, ww_deps=ww_deps, txn=txn)
        assert allowed_anomalies(opts) == expected


def test_ww_deps_are_off_in_jepsens_reading_unless_the_test_sets_them() -> None:
    assert queue_options_from_test({}, JEPSEN).ww_deps is False
    assert queue_options_from_test({"ww_deps": True}, JEPSEN).ww_deps is True
    assert queue_options_from_test({}).ww_deps is True  # kraftwerk's reading


def test_g1c_invalidates_in_jepsens_reading_unless_ww_deps() -> None:
    b = _wr_cycle()
    r = check_history(b.ops, queue_options=jepsen())
    assert "G1c" in r["anomaly_types"] and r["valid"] is False and r["reading"] == "jepsen"
    r = check_history(b.ops, queue_options=QueueOptions(reading=JEPSEN, ww_deps=True))
    assert "G1c" in r["anomaly_types"] and r["valid"] is True


def test_g0_is_allowed_in_jepsens_reading_always() -> None:
    """Jepsen finds G0 only with ww edges, and allows it whatever the options."""
    r = check_history(_g0_txns().ops, queue_options=QueueOptions(reading=JEPSEN, ww_deps=True))
    assert "G0" in r["anomaly_types"] and r["valid"] is True
    assert "G0" not in check_history(_g0_txns().ops, queue_options=jepsen())["anomaly_types"]


def test_poll_skip_and_nonmonotonic_poll_are_allowed_in_jepsens_reading_only_with_subscribe() -> None:
    for build, typ in ((poll_skip, "poll-skip"), (nonmonotonic_poll, "nonmonotonic-poll")):
        ops = build(True).ops
        r = check_history(ops, queue_options=jepsen())
        assert typ in r["anomaly_types"] and r["valid"] is False
        assert check_history(ops, queue_options=jepsen(sub_via=("subscribe",)))["valid"] is True


def test_a_loss_in_a_key_without_a_final_read_is_unseen_in_jepsens_reading_and_unknown_in_kraftwerks() -> None:
    """Jepsen has no unverified keys: a record nobody read is unseen."""
    b = HistoryBuilder()
    b.send(0, "t-0", 1, 0)
    b.send(0, "t-1", 2, 0)
    b.poll(1, {"t-1": [(0, 2)]}, final=True)
    k = check_history(b.ops)
    assert "unverified-unseen" in k["anomaly_types"] and k["valid"] == "unknown" and k["reading"] == "kraftwerk"
    j = check_history(b.ops, queue_options=jepsen())
    assert j["valid"] is False and "unverified-unseen" in j["checkers"]["queue"]["bad_anomaly_types"]


def test_an_acks1_loss_invalidates_in_jepsens_reading_as_a_lost_write_would() -> None:
    b = HistoryBuilder()
    b.send(0, "t-0", 1, 0, acks="1")
    b.send(0, "t-0", 2, 1, acks="1")
    b.poll(1, {"t-0": [(1, 2)]}, final=True)
    assert check_history(b.ops)["valid"] is True  # kraftwerk: acks=1 promised nothing across a failover
    j = check_history(b.ops, queue_options=jepsen())
    assert j["valid"] is False and "lost-write-acks1" in j["checkers"]["queue"]["bad_anomaly_types"]


def test_a_jepsen_history_declares_its_subscription_method_by_its_own_operations() -> None:
    b = poll_skip(True)
    b.assign(3, ["t-0"], f="subscribe")
    assert declared_options(b.ops) == {"sub_via": ("subscribe",)}
    b.txn(4, [["send", "t-0", [3, 4]]])
    assert declared_options(b.ops) == {"sub_via": ("subscribe",), "txn": True}
    assert declared_options(poll_skip(True).ops) == {}


def test_check_judges_an_edn_history_by_jepsens_reading_and_by_kraftwerks_on_request(tmp_path) -> None:
    """The G1c cycle of wr edges: Jepsen's defaults (no ww deps) make it
    invalid; --ww-deps or kraftwerk's reading allow it; the JSON and the
    terminal name the reading."""
    p = tmp_path / "g1c.edn"
    write_edn(p, _wr_cycle().ops)
    r = kraftwerk_cli("check", str(p), "--json")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)
    assert res["reading"] == "jepsen" and "G1c" in res["checkers"]["queue"]["bad_anomaly_types"]
    assert kraftwerk_cli("check", str(p), "--ww-deps").returncode == 0
    r = kraftwerk_cli("check", str(p), "--kraftwerk")
    assert r.returncode == 0 and "reading: kraftwerk (" in r.stdout
    r = kraftwerk_cli("check", str(p))
    assert "reading: jepsen (sub-via assign, ww-deps off" in r.stdout


def test_check_reads_subscribe_from_an_edn_historys_subscribe_operations(tmp_path) -> None:
    sub, asg = poll_skip(True), poll_skip(True)
    sub.assign(3, ["t-0"], f="subscribe")
    asg.assign(3, ["t-0"], f="assign")
    write_edn(tmp_path / "sub.edn", sub.ops)
    write_edn(tmp_path / "asg.edn", asg.ops)
    assert kraftwerk_cli("check", str(tmp_path / "sub.edn")).returncode == 0
    assert kraftwerk_cli("check", str(tmp_path / "asg.edn")).returncode == 1
    assert kraftwerk_cli("check", str(tmp_path / "asg.edn"), "--sub-via", "subscribe").returncode == 0


def test_jepsen_mode_on_a_jsonl_history_and_strict_cycles_is_kraftwerks_only(tmp_path) -> None:
    from checkers.history import write_jsonl

    p = tmp_path / "g1c.jsonl"
    write_jsonl(p, _wr_cycle().ops)
    assert kraftwerk_cli("check", str(p)).returncode == 0  # kraftwerk's reading: ww deps on
    assert kraftwerk_cli("check", str(p), "--jepsen").returncode == 1
    r = kraftwerk_cli("check", str(p), "--jepsen", "--strict-cycles")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--strict-cycles" in r.stderr


def test_a_knossos_edn_history_under_a_register_model_is_judged_by_no_queue_reading() -> None:
    """The readings are the queue checker's: an EDN history from
    ../shared/data checked for linearizability keeps its verdict and names
    no reading."""
    from tests.shared_data import KNOSSOS

    for path, code in (("cas-register/good/memstress3-4.edn", 0), ("cas-register/bad/rethink-fail-minimal.edn", 1)):
        r = kraftwerk_cli("check", str(KNOSSOS / path), "--model", "cas-register", "--json")
        assert r.returncode == code, r.stderr
        assert "reading" not in json.loads(r.stdout)
