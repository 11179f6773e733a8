"""bench/kraft_leaderless.py: how long a node went without a KRaft leader,
from the simulator's traces and from Kafka's server.log, whose lines carry
the node's own (libfaketime) clock."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from harness.cli.options import config_from_flags
from harness.lifecycle.runner import run_seed

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from kraft_leaderless import first_change_after, kafka_events, measure, stretches  # noqa: E402

ZERO_MS = 1_796_000_000_000.0


def _stamp(run_ms: int) -> str:
    """A log4j time stamp for a run time (ms after ZERO_MS), in UTC."""
    return datetime.fromtimestamp((ZERO_MS + run_ms) / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def _line(run_ms: int, state: str, rest: str = "epoch=1, leader=102)") -> str:
    stamp = _stamp(run_ms)
    return f"[{stamp}] INFO [RaftManager id=3] Completed transition to {state}({rest} from X (org.apache.kafka.raft.QuorumState)"


def test_a_stretch_counts_once_a_leader_was_known_and_only_when_it_ends() -> None:
    events = [(0, None), (5, False), (100, True), (200, False), (900, True), (1000, False)]
    assert stretches(iter(events)) == [(200, 900)]


def test_kafka_log_times_are_put_back_on_the_run_clock_across_a_jump_and_its_reset(tmp_path: Path) -> None:
    """The node's clock ran 55 s ahead from 1000 to 3000 ms: a line it
    wrote at 1500 ms reads 56.5 s, one after the reset reads its own time."""
    log = tmp_path / "server.log"
    log.write_text("\n".join([
        _line(500, "FollowerState"),
        _line(1500 + 55_000, "UnattachedState", "epoch=2, leaderId=OptionalInt.empty)"),
        _line(3400, "FollowerState"),
    ]) + "\n")
    changes = [(-1 << 60, 0), (1000, 55_000), (3000, 0)]
    got = list(kafka_events(log, ZERO_MS, changes))
    assert got == [(500, True), (1500, False), (3400, True)]
    assert stretches(iter(got)) == [(1500, 3400)]


def test_a_brokers_metadata_flows_again_at_its_first_partition_change_after_the_op(tmp_path: Path) -> None:
    stamp = _stamp
    log = tmp_path / "server.log"
    log.write_text("\n".join([
        f"[{stamp(900)}] INFO [Broker id=3] Transitioning 1 partition(s) to local followers. (state.change.logger)",
        f"[{stamp(2400 + 55_000)}] INFO [BrokerLifecycleManager id=3] Unable to send a heartbeat",
        f"[{stamp(3400)}] INFO [Broker id=3] Transitioning 1 partition(s) to local followers. (state.change.logger)",
    ]) + "\n")
    changes = [(-1 << 60, 0), (1000, 55_000), (3000, 0)]
    assert first_change_after(log, ZERO_MS, changes, 3000) == 400
    assert first_change_after(log, ZERO_MS, changes, 5000) is None


def test_seed_308s_schedule_on_the_model_measures_the_brokers_stretch_after_the_reset(tmp_path: Path) -> None:
    cfg = config_from_flags("sim", {"schedule": str(ROOT / "tests/sim/schedules/terminated-brokers-outlast-their-grace.json"),
                                    "out": str(tmp_path)})
    res = run_seed(cfg, cfg.seed, tmp_path)
    at, rows = measure(Path(res["run_dir"]), "stop-clock")
    history = [json.loads(x) for x in (Path(res["run_dir"]) / "history.jsonl").read_text().splitlines()]
    reset = next(op for op in history if op["f"] == "stop-clock" and "reset" in op["value"])
    assert at == reset["time"] // 1_000_000
    assert 0 < rows["n3"]["longest_ms"] < 3_000 and 0 < rows["n3"]["ended_after_ms"] < 3_000
