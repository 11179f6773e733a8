"""Consumer groups and crashed clients in the simulator
(``kraftwerk sim --sub-via subscribe --crash-clients``,
reference_impl/sim/groups.py ``GroupMember`` and the crash marks of
workloads/crash.py).

* Deterministic: the same seed gives a byte-identical history, in this
  process and in another with another hash seed.
* Crash clients follow Jepsen's shape and the outcome rules
  (workloads/outcome.py): the invocation carries ``crash``, the operation
  completes ``info`` with ``crashed`` whatever it got, and the thread goes
  on as a new process with a new client.
* The group: every worker's consumer is a member, the coordinator hands
  out partitions (``rebalance-log``), polls commit what they read, some
  polls subscribe again; a crashed dynamic member sends nothing more (its
  session expires) and its replacement joins anew (a rebalance), a crashed
  static member's replacement (KIP-345) takes its place without one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.config import TestConfig
from harness.lifecycle.runner import run_seed

ROOT = Path(__file__).resolve().parents[2]
OPTS = TestConfig(backend="sim", sub_via="subscribe", crash_clients=True, crash_client_interval=4,
                  time_limit=12, nemesis=["kill"], nemesis_interval=3)


def _ops(res: dict) -> list[dict]:
    return [json.loads(line) for line in open(Path(res["run_dir"]) / "history.jsonl")]


def test_a_subscribed_run_with_crashed_clients_replays_byte_for_byte(tmp_path: Path) -> None:
    a = run_seed(OPTS, 7, tmp_path / "a")
    b = run_seed(OPTS, 7, tmp_path / "b")
    c = run_seed(OPTS, 8, tmp_path / "c")
    ha, hb, hc = ((Path(r["run_dir"]) / "history.jsonl").read_bytes() for r in (a, b, c))
    assert ha == hb and len(ha) > 1000 and ha != hc
    assert a["valid"] is True, a["anomaly_types"]


def test_crashed_operations_are_info_and_the_client_goes_on_as_a_new_process(tmp_path: Path) -> None:
    ops = _ops(run_seed(OPTS, 7, tmp_path))
    invoked = {}
    crashed = []
    for o in ops:
        if o["process"] == "nemesis":
            continue
        if o["type"] == "invoke":
            invoked[o["process"]] = o
        elif o.get("error") == "crashed":
            assert "crash" in invoked[o["process"]] and 0 <= invoked[o["process"]]["crash"] <= 100
            assert o["type"] == "info"
            crashed.append(o)
    # a crash takes sends and consumer ops alike
    assert {"send"} < {o["f"] for o in crashed} <= {"send", "poll", "subscribe"}
    marked = [o for o in ops if o["type"] == "invoke" and "crash" in o]
    assert len(marked) == len(crashed)
    for o in crashed:  # the crashed process never invokes again
        later = [x for x in ops if x["index"] > o["index"] and x["process"] == o["process"]]
        assert later == []


def test_members_are_assigned_partitions_and_commit_what_they_read(tmp_path: Path) -> None:
    ops = _ops(run_seed(OPTS, 8, tmp_path))
    assert any(o["f"] == "subscribe" and o["type"] == "ok" for o in ops)
    assigned = {k for o in ops for e in o.get("rebalance-log", ()) if e["event"] == "assigned" for k in e["keys"]}
    assert assigned == {"t0-0", "t0-1"}
    reads = [o for o in ops if o["f"] == "poll" and o["type"] == "ok" and not o.get("final") and o["value"][0][1]]
    # a crashed member holds its partitions until its session ends (no
    # LeaveGroup from a dead process), so a crash a second leaves fewer reads
    assert len(reads) >= 5 and any("commit-error" not in o for o in reads)


def test_a_crashed_static_members_replacement_takes_its_place_without_a_rebalance(tmp_path: Path) -> None:
    """No faults but crashes (each kills its process's producer and group
    member): dynamic members leave and their replacements join anew, so the
    others are revoked; static ones rejoin under their instance id, and
    nobody is. Revocations are counted from the first member's crash on:
    before it the group forms, and a member that joined alone first is
    revoked as the others join, static or not."""
    quiet = OPTS.model_copy(update={"nemesis": [], "time_limit": 12})

    def revoked(static: bool) -> tuple[int, int]:
        """Crashes, and revocations after the first crash (the group forms
        as the workers' first ops come, one by one, revoking as it grows)."""
        ops = _ops(run_seed(quiet.model_copy(update={"static_members": static}), 4, tmp_path / str(static)))
        crashed = [o["index"] for o in ops if o.get("error") == "crashed"]
        return len(crashed), sum(1 for o in ops if o["index"] > crashed[0]
                                 for e in o.get("rebalance-log", ()) if e["event"] == "revoked")

    crashes, revokes = revoked(True)
    assert crashes > 3 and revokes == 0
    crashes, revokes = revoked(False)
    assert crashes > 3 and revokes > 0


def test_the_cli_run_is_the_same_run_in_another_process_with_another_hash_seed(tmp_path: Path) -> None:
    """``kraftwerk sim --sub-via subscribe --crash-clients`` in a process of
    its own (PYTHONHASHSEED=1) writes the history this process writes."""
    flags = ["--seed", "5", "--time-limit", "6", "--sub-via", "subscribe", "--crash-clients",
             "--crash-client-interval", "3", "--nemesis", "kill"]
    p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "sim", *flags,
                        "--out", str(tmp_path / "cli"), "--json"], cwd=ROOT, env=dict(os.environ, PYTHONHASHSEED="1"),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1, 3), p.stderr
    cli = (Path(json.loads(p.stdout)["run_dir"]) / "history.jsonl").read_bytes()
    here = run_seed(TestConfig(backend="sim", sub_via="subscribe", crash_clients=True, crash_client_interval=3,
                               time_limit=6, nemesis=["kill"]), 5, tmp_path / "here")
    assert (Path(here["run_dir"]) / "history.jsonl").read_bytes() == cli


def test_idempotent_producers_killed_mid_send_append_nothing_twice(tmp_path: Path) -> None:
    """Crashed idempotent producers under kills and partitions: the
    replacement starts a new producer id, the dead one's requests on the
    wire still land, and the faithful broker's sequence checks keep every
    record once (no duplicate of either kind)."""
    opts = TestConfig(backend="sim", idempotent=True, crash_clients=True, crash_client_interval=3, time_limit=15,
                      nemesis=["kill", "partition"], nemesis_interval=3)
    for seed in (1, 2):
        res = run_seed(opts, seed, tmp_path / str(seed))
        ops = _ops(res)
        assert any(o["f"] == "send" and o.get("error") == "crashed" for o in ops)
        assert not {"duplicate", "duplicate-nonidempotent"} & set(res["anomaly_types"])
        assert res["valid"] is True and res["durability"]["acks=all"]["lost"] == 0
