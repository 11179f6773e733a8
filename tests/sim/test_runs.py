"""Whole simulated runs: determinism (ARCHITECTURE.md principle 6: a seed
replays byte for byte) and the run directory ``kraftwerk sim`` leaves."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import TestConfig
from harness.lifecycle.runner import run_seed
from harness.lifecycle.runner import sim_run

ROOT = Path(__file__).resolve().parents[2]
OPTS = TestConfig(backend="sim", time_limit=8, nemesis=("all",), nemesis_interval=2, rate=80,
                  final_read_timeout=10, topics=2, partitions=2, acks="mixed")


def test_same_seed_and_options_give_a_byte_identical_history(tmp_path: Path) -> None:
    a = run_seed(OPTS, 21, tmp_path / "a")
    b = run_seed(OPTS, 21, tmp_path / "b")
    c = run_seed(OPTS, 22, tmp_path / "c")
    ha = (Path(a["run_dir"]) / "history.jsonl").read_bytes()
    hb = (Path(b["run_dir"]) / "history.jsonl").read_bytes()
    hc = (Path(c["run_dir"]) / "history.jsonl").read_bytes()
    assert ha == hb and len(ha) > 1000
    assert ha != hc
    assert a["stats"]["faults"] > 0, "the schedule injected faults"
    for n in ("n1", "c1"):
        assert (Path(a["run_dir"]) / "nodes" / n / "trace.jsonl").read_bytes() == \
            (Path(b["run_dir"]) / "nodes" / n / "trace.jsonl").read_bytes()


def test_replay_is_identical_in_another_process_with_another_hash_seed(tmp_path: Path) -> None:
    """Two separate ``kraftwerk sim`` processes (different PYTHONHASHSEED)
    write the same history for the same seed."""
    digests = []
    for hs in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hs)
        out = tmp_path / hs
        p = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "sim", "--seed", "5", "--time-limit", "5",
                            "--nemesis", "kill,partition", "--nemesis-interval", "1",
                            "--out", str(out), "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode in (0, 1, 3), p.stderr
        res = json.loads(p.stdout)
        digests.append((Path(res["run_dir"]) / "history.jsonl").read_bytes())
    assert digests[0] == digests[1]


def test_sim_command_writes_a_complete_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["sim", "--seed", "3", "--time-limit", "6", "--nemesis", "partition-leader,kill", "--partitions", "3",
              "--nemesis-interval", "2", "--variant", "maximal_isr=on", "--acks", "mixed", "--out", str(tmp_path),
              "--json"])
    res = json.loads(capsys.readouterr().out)
    assert e.value.code == {True: 0, False: 1}.get(res["valid"], 3)
    run = Path(res["run_dir"])
    assert run.parent == tmp_path / "queue" and run.name.endswith("-3")
    assert (tmp_path / "latest").resolve() == run.resolve()
    test = json.loads((run / "test.json").read_text())
    assert test["seed"] == 3 and test["variants"]["maximal_isr"] is True and test["runtime"] == "sim"
    assert test["nemesis"] == ["partition:primaries", "kill"]
    results = json.loads((run / "results.json").read_text())
    for k in ("valid", "durability", "invariants", "anomaly_types", "stats"):
        assert k in results
    assert {"acks=all", "acks=1"} <= set(results["durability"])
    lines = (run / "history.jsonl").read_text().splitlines()
    ops = [json.loads(x) for x in lines]
    assert [o["index"] for o in ops] == list(range(len(ops)))
    nem = [o for o in ops if o["process"] == "nemesis"]
    assert nem and all(o["type"] == "info" for o in nem)
    assert {o["f"] for o in nem} <= {"start-partition", "stop-partition", "start-kill", "stop-kill"}
    # every fault interval closes: each start is followed by a stop of its kind
    # (the final heal stops every kind in use, started or not)
    for kind in ("partition", "kill"):
        fs = [o["f"] for o in nem if o["f"].endswith(f"-{kind}")]
        assert not fs or fs[-1] == f"stop-{kind}"
    assert any(o.get("final") for o in ops)
    assert {o.get("acks") for o in ops if o["f"] == "send"} == {"all", "1"}
    assert sorted(p.name for p in (run / "nodes").iterdir()) == ["c1", "c2", "c3", "n1", "n2", "n3"]
    assert (run / "index.html").exists(), "one seed: the HTML report is written"
    assert set(results["anomalies"]) <= set(results["anomaly_types"])


def test_many_seeds_run_in_parallel_jobs_and_summarize(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["sim", "--seeds", "1..3", "--jobs", "2", "--time-limit", "3", "--nemesis", "none",
              "--out", str(tmp_path), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert [r["seed"] for r in res] == [1, 2, 3]
    valid = [r["valid"] for r in res]
    assert e.value.code == (0 if all(v is True for v in valid) else 1 if False in valid else 3)
    assert all(r["acks_all"]["acked"] > 0 for r in res)


def test_a_run_stopped_by_an_exception_still_leaves_every_recorded_operation_on_disk(tmp_path: Path) -> None:
    """The simulator buffers history lines (a replay rebuilds them), so the
    runner closes the history whatever stops the run: nothing recorded is lost."""
    from harness.lifecycle.runner import sim_run

    run = sim_run(TestConfig(backend="sim", time_limit=20, rate=200, nemesis=("none",)), 3, run_dir=tmp_path)

    def boom() -> None:
        raise RuntimeError("stop here")

    run.sim.at(8_000, boom)
    with pytest.raises(RuntimeError, match="stop here"):
        run.run()
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert len(lines) == len(run.history.ops) > 600
    assert json.loads(lines[-1])["index"] == run.history.ops[-1].index


def _timeless(res: object) -> object:
    """Results without the wall-clock figures, which differ run to run."""
    if isinstance(res, dict):
        return {k: _timeless(v) for k, v in res.items() if k not in ("wall_s", "sim_speed") and not k.endswith("seconds")}
    return res


def _cyclic_garbage_after(opts: TestConfig, seed: int, release: bool) -> tuple[dict, int]:
    """A run's results, and how many objects the cyclic collector finds once
    the run object is dropped."""
    gc.collect()
    run = sim_run(opts, seed)
    res = run.run(release=release)
    was = gc.isenabled()
    gc.disable()
    try:
        del run
        return res, gc.collect()
    finally:
        if was:
            gc.enable()


def test_a_released_run_gives_the_same_results_and_leaves_the_cyclic_collector_little() -> None:
    opts = TestConfig(backend="sim", time_limit=10, rate=200, nemesis=("kill", "partition"), nemesis_interval=3,
                      concurrency=8, partitions=3)
    kept, kept_garbage = _cyclic_garbage_after(opts, 2, release=False)
    released, released_garbage = _cyclic_garbage_after(opts, 2, release=True)
    assert _timeless(released) == _timeless(kept)
    assert kept["stats"]["completions"]["send:ok"] > 500
    # the history's operations and what hangs off the nodes went by reference counting
    assert kept_garbage > 5_000
    assert released_garbage * 3 < kept_garbage
