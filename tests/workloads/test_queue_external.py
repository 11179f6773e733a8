"""``kraftwerk run --db external`` against a cluster of reference-broker
processes that it knows only by its bootstrap address: the whole pipeline
(workload, generator, history, checkers, report) over the Kafka protocol."""

import json
import os
import subprocess
import sys
from pathlib import Path

from checkers.history.jsonl import read_jsonl
from workloads.queue import QueueClient

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args, timeout=120):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


def test_short_external_run_writes_history_results_and_report(reference_bootstrap, tmp_path):
    out = tmp_path / "results"
    r = kraftwerk("run", "--db", "external", "--bootstrap", reference_bootstrap, "--time-limit", "3",
                  "--rate", "80", "--concurrency", "4", "--acks", "mixed", "--partitions", "2",
                  "--seed", "42", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    run_dir = Path(res["run_dir"])
    assert run_dir.parent == out / "queue" and run_dir.name.endswith("-42")
    assert (out / "latest").resolve() == run_dir.resolve()
    test = json.loads((run_dir / "test.json").read_text())
    assert test["seed"] == 42 and test["db"] == "external"
    ops = read_jsonl(run_dir / "history.jsonl")
    sends = [o for o in ops if o.f == "send" and o.type == "ok"]
    assert len(sends) > 20
    assert {o.extra["acks"] for o in sends} == {"all", "1"}  # mixed: both process groups
    finals = [o for o in ops if o.extra.get("final") and o.f == "poll" and o.type == "ok"]
    prefix = test["topic_prefix"]
    assert prefix.startswith("kraftwerk.queue.") and prefix.endswith("-42.t")  # fresh topics per run
    assert sorted(next(iter(o.value[0][1])) for o in finals) == [f"{prefix}0-0", f"{prefix}0-1"]
    assert all(o.extra["caught_up"] for o in finals)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True
    assert results["durability"]["acks=all"]["lost"] == 0
    assert results["durability"]["acks=all"]["acked"] + results["durability"]["acks=1"]["acked"] == len(sends)
    html = (run_dir / "index.html").read_text()
    assert "VALID" in html and "latency-raw.png" in html
    assert (run_dir / "latency-raw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (run_dir / "history.edn").exists()


def test_real_client_a_request_the_broker_refuses_is_a_definite_fail(reference_bootstrap):
    """The broker refuses acks=2 before any append: the real client's send
    is a fail, as the simulated client's is (tests/workloads/test_outcome.py,
    the same rule in workloads/outcome.py)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": reference_bootstrap})
    admin.create_topics([NewTopic("refused", 1, 3)])["refused"].result(timeout=30)
    c = QueueClient(reference_bootstrap, ["refused-0"], "2", 0, op_timeout=10)
    c.open()
    warm = c.invoke({"f": "send", "value": [["send", "refused-0", 0]]})  # waits out the first metadata
    try:
        r = c.invoke({"f": "send", "value": [["send", "refused-0", 1]]})
    finally:
        c.close()
    assert r["type"] == "fail", (warm, r)


def test_config_file_and_test_count_give_one_run_per_seed(reference_bootstrap, tmp_path):
    cfg = tmp_path / "campaign.yaml"
    cfg.write_text(f"db: external\nbootstrap: {reference_bootstrap}\ntime-limit: 1\nrate: 30\nname: twice\n")
    out = tmp_path / "results"
    r = kraftwerk("run", "--config", str(cfg), "--test-count", "2", "--seed", "100", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert [Path(x["run_dir"]).name.split("-")[-1] for x in res] == ["100", "101"]
    for x in res:
        assert json.loads((Path(x["run_dir"]) / "test.json").read_text())["time_limit"] == 1
        assert (Path(x["run_dir"]) / "index.html").exists()
