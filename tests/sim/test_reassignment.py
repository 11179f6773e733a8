"""``--nemesis reassign`` in the simulator, against the reference controller's
KIP-455 reassignment (AlterPartitionReassignments from a simulated admin
client through a broker, forwarded to the active controller): a partition's
replica swapped for a broker outside its set while partitions and kills fly
on their own timetables loses no acknowledged acks=all write on the
faithful protocol, and the controller completes the moves (its committed
metadata ends with the target replicas and nothing adding or removing)."""

import json
from pathlib import Path

from harness.config import build_config
from harness.lifecycle.runner import run_seed


def _completed(run_dir: Path, key: str, target: list[str]) -> bool:
    ids = [int(n[1:]) for n in target]
    for trace in (run_dir / "nodes").glob("c*/trace.jsonl"):
        for line in trace.open():
            e = json.loads(line)
            if (e["kind"] == "partition_metadata" and e["tp"] == key and e["replicas"] == ids
                    and not e.get("adding_replicas") and not e.get("removing_replicas")):
                return True
    return False


def test_kip455_reassignments_under_partitions_and_kills_lose_no_acknowledged_acks_all_write(tmp_path) -> None:
    cfg = build_config(None, {"backend": "sim", "brokers": 5, "nemesis": "reassign,partition,kill",
                              "nemesis_mode": "overlap", "nemesis_interval": 6, "time_limit": 60})
    completed = 0
    for seed in (1, 2):
        r = run_seed(cfg, seed, out=tmp_path)
        assert r["valid"] is True, (seed, r["anomaly_types"])
        dur = r["durability"]["acks=all"]
        assert dur["acked"] > 200 and dur["lost"] == 0
        run_dir = Path(r["run_dir"])
        ops = [json.loads(line) for line in open(run_dir / "history.jsonl")]
        moves = [o["value"] for o in ops if o["f"] == "start-reassign" and o["value"].get("from") and o["value"].get("nodes")]
        assert moves, f"seed {seed}: no reassignment was asked for"
        completed += sum(_completed(run_dir, m["key"], m["nodes"]) for m in moves)
    assert completed >= 2, "the controller completed fewer than two of the moves"
