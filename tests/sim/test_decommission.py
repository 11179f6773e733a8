"""``--nemesis decommission`` in the simulator: a broker removed as an
operator removes one (its replicas reassigned away, KIP-455; a clean
shutdown once they moved; UnregisterBroker, KIP-631) and then started again
as a broker the controller no longer knows, while partitions and kills fly:
no acknowledged acks=all write is lost on the faithful protocol, and the
controller really forgets the broker and registers it afresh."""

import json
from pathlib import Path

from harness.config import build_config
from harness.lifecycle.runner import run_seed


def _controller_events(run_dir: Path, kind: str) -> list[dict]:
    out = []
    for trace in (run_dir / "nodes").glob("c*/trace.jsonl"):
        out += [e for e in map(json.loads, trace.open()) if e["kind"] == kind]
    return out


def test_kip631_decommissions_under_partitions_and_kills_lose_no_acknowledged_acks_all_write(tmp_path) -> None:
    cfg = build_config(None, {"backend": "sim", "brokers": 5, "nemesis": "decommission,partition,kill",
                              "nemesis_mode": "overlap", "nemesis_interval": 8, "time_limit": 60})
    removed = []
    for seed in (1, 2):
        r = run_seed(cfg, seed, out=tmp_path)
        assert r["valid"] is True, (seed, r["anomaly_types"])
        dur = r["durability"]["acks=all"]
        assert dur["acked"] > 300 and dur["lost"] == 0
        run_dir = Path(r["run_dir"])
        ops = [json.loads(line) for line in open(run_dir / "history.jsonl")]
        stops = [o["value"] for o in ops if o["f"] == "stop-decommission" and "steps" in o["value"]]
        done = [s for s in stops if s["steps"] == ["moved", "shut-down", "unregistered"]]
        gone = {f"n{e['broker']}": e["t"] for e in _controller_events(run_dir, "broker_unregistered")}
        back = _controller_events(run_dir, "broker_unfenced")
        for s in done:
            for n in s["added"]:
                # the controller forgot it, and the broker started again registered as new
                assert n in gone and any(f"n{e['broker']}" == n and e["t"] > gone[n] for e in back), n
        removed += done
    assert removed, "no broker was moved off, shut down and unregistered"
