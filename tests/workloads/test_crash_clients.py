"""``--crash-clients`` (Jepsen's): a client process is killed mid-operation
and replaced; its operation is ``info`` (nobody learned the outcome) and the
thread goes on as a new process with a fresh client. With idempotent
producers the faithful broker appends nothing twice; the duplicate side of
that rule (sequence checks off) is tests/sim/test_producer_sequence_checks.py."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import generator as g
from workloads.crash import MAX_CRASH_MS, crash_clients

ROOT = Path(__file__).resolve().parents[2]


def _ctx(t_ns: int, rng: random.Random) -> g.Context:
    return g.Context(time=t_ns, rng=rng, free=frozenset({0, 1}), process_of={0: 0, 1: 1}, threads=frozenset({0, 1}))


def test_one_operation_per_interval_over_concurrency_is_marked_to_crash():
    """Jepsen staggers crashes by crash-client-interval / concurrency: with
    interval 4 s and 2 clients, one op in each 2 s is marked, within
    MAX_CRASH_MS of its start, and the marks depend only on the seed."""
    def marks(seed: int) -> list[tuple[int, int]]:
        rng = random.Random(seed)
        gen = crash_clients(g.lift(lambda ctx: {"f": "send", "value": []}), 4.0, 2)
        out = []
        for i in range(100):  # an op every 100 ms for 10 s
            o, gen = gen.op(_ctx(i * 100_000_000, rng))
            if "crash" in o:
                out.append((i, o["crash"]))
        return out

    m = marks(1)
    assert [i for i, _ in m] == [20, 40, 60, 80]
    assert all(0 <= ms <= MAX_CRASH_MS for _, ms in m)
    assert marks(1) == m


@pytest.mark.integration
def test_crashed_clients_are_info_and_replaced_and_idempotent_producers_append_once(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "run", "--idempotent",
                        "--crash-clients", "--crash-client-interval", "4", "--nemesis", "partition",
                        "--nemesis-interval", "4", "--time-limit", "12", "--seed", "5", "--out", str(tmp_path),
                        "--json", "--no-report"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "KRAFTWERK_DEBUG": ""})
    assert r.returncode == 0, r.stderr[-800:]
    res = json.loads(r.stdout)
    ops = [json.loads(line) for line in open(Path(res["run_dir"]) / "history.jsonl")]
    crashed = [o for o in ops if o["type"] == "info" and o.get("error") == "crashed"]
    assert len(crashed) >= 3  # one in each second (4 clients, 4 s apart each): about 11
    invoked = {o["process"]: o for o in ops if o["type"] == "invoke"}
    assert all(invoked[o["process"]].get("crash") is not None for o in crashed)
    # each crashed process never runs again: its thread continues as process + concurrency
    for o in crashed:
        later = [x for x in ops if x["process"] == o["process"] and x["index"] > o["index"]]
        assert not later and o["process"] + 4 in invoked
    assert res["valid"] is True and not any("duplicate" in t for t in res["anomaly_types"])
    assert json.loads((Path(res["run_dir"]) / "test.json").read_text())["crash_clients"] is True
    assert not (Path(res["run_dir"]) / "index.html").exists()  # --no-report: the verdict alone
