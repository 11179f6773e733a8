"""``kraftwerk check`` through the real console script: inputs, results.json,
and the exit-code contract (0 valid, 1 invalid, 2 bad input, 3 unknown)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.history import write_edn, write_jsonl
from checkers.queue.synth import HistoryBuilder, valid_history
from tests.shared_data import KNOSSOS as KNOSSOS_DIR

KRAFTWERK = [sys.executable, "-c", "from harness.cli import main; main()"]
ROOT = Path(__file__).resolve().parents[2]
KNOSSOS = KNOSSOS_DIR


def run(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    env.pop("KRAFTWERK_DEBUG", None)
    return subprocess.run(KRAFTWERK + list(args), capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli")
    good = valid_history(300, 3, 4, seed=2)
    run_dir = d / "run"
    run_dir.mkdir()
    write_jsonl(run_dir / "history.jsonl", good)
    write_jsonl(d / "good.jsonl", good)
    write_edn(d / "good.edn", good)
    b = HistoryBuilder()
    b.send(0, "t-0", 1, 0)
    b.send(0, "t-0", 2, 1)
    b.poll(1, {"t-0": [(1, 2)]})
    write_jsonl(d / "bad.jsonl", b.ops)
    lines = (d / "good.jsonl").read_text().splitlines(keepends=True)
    (d / "malformed.jsonl").write_text("".join(lines[:3] + ['{"type": "ok", "f":\n'] + lines[3:]))
    (d / "truncated.jsonl").write_text("".join(lines) + '{"index": 9999, "type": "o')
    (d / "empty_dir").mkdir()
    (d / "notes.txt").write_text("hello\n")
    return {"dir": d, "run": run_dir}


def test_valid_run_directory_exits_0_and_writes_results_json(files) -> None:
    p = run("check", str(files["run"]))
    assert p.returncode == 0, p.stderr
    assert "VALID" in p.stdout
    res = json.loads((files["run"] / "results.json").read_text())
    assert res["valid"] is True
    for field in ("anomaly_types", "anomalies", "durability", "stats", "checkers"):
        assert field in res
    assert res["durability"]["acks=all"]["acked"] > 0


def test_invalid_history_exits_1_and_json_names_anomalies(files) -> None:
    p = run("check", str(files["dir"] / "bad.jsonl"), "--json")
    assert p.returncode == 1, p.stderr
    res = json.loads(p.stdout)
    assert res["valid"] is False
    assert "lost-write" in res["anomaly_types"]


def test_invalid_history_table_says_what_each_anomaly_means(files) -> None:
    from checkers.glossary import describe

    p = run("check", str(files["dir"] / "bad.jsonl"))
    assert p.returncode == 1, p.stderr
    assert "lost-write: " + describe("lost-write") in " ".join(p.stdout.split())


def test_anomaly_table_counts_every_invariant_violation_not_the_examples_kept(files, tmp_path) -> None:
    """25 violations of one invariant in a run's traces: the monitor keeps 20
    examples, the table says 25."""
    run_dir = tmp_path / "run"
    shutil.copytree(files["run"], run_dir)
    trace = run_dir / "nodes" / "n1" / "trace.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_text("".join(json.dumps({"t": i, "node": 1, "kind": "hw", "tp": "t-0", "hw": 5, "leo": 1,
                                         "role": "follower"}) + "\n" for i in range(25)))
    p = run("check", str(run_dir))
    assert p.returncode == 1, p.stderr
    (row,) = [line for line in p.stdout.splitlines() if line.strip().startswith("hw-above-leo ")]
    assert row.split()[2] == "25", row


def test_edn_history_is_checked_like_jsonl(files) -> None:
    a = json.loads(run("check", str(files["dir"] / "good.edn"), "--json").stdout)
    b = json.loads(run("check", str(files["dir"] / "good.jsonl"), "--json").stdout)
    assert a["valid"] is True and a["durability"] == b["durability"]
    assert a["checkers"]["queue"]["counts"] == b["checkers"]["queue"]["counts"]


def test_malformed_line_exits_2_with_one_line_naming_file_and_line(files) -> None:
    p = run("check", str(files["dir"] / "malformed.jsonl"))
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "malformed.jsonl:4:" in err[0]
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("event,what", [
    ({"t": 5, "node": 1, "kind": "append", "tp": "t-0", "base": "x", "count": 1, "epoch": 0}, "unreadable 'append' event"),
    ({"t": 5, "node": 1, "kind": "hw", "tp": "t-0"}, "missing field 'hw'"),
    ({"t": "soon", "node": 1, "kind": "hw", "tp": "t-0", "hw": 1}, "bad time stamp"),
])
def test_a_malformed_trace_event_exits_2_with_one_line_naming_file_and_line(files, tmp_path, event, what) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(files["run"], run_dir)
    trace = run_dir / "nodes" / "n1" / "trace.jsonl"
    trace.parent.mkdir(parents=True)
    good = {"t": 1, "node": 1, "kind": "hw", "tp": "t-0", "hw": 0, "leo": 0, "role": "leader"}
    trace.write_text(json.dumps(good) + "\n" + json.dumps(event) + "\n")
    history = (run_dir / "history.jsonl").read_bytes()
    p = run("check", str(run_dir))
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and f"{trace}:2:" in err[0] and what in err[0], err
    assert "Traceback" not in p.stderr
    assert (run_dir / "history.jsonl").read_bytes() == history


def test_truncated_last_line_is_tolerated_and_reported(files) -> None:
    p = run("check", str(files["dir"] / "truncated.jsonl"), "--json")
    assert p.returncode == 0
    assert "truncated last line" in p.stderr
    assert any("truncated" in w for w in json.loads(p.stdout)["warnings"])


@pytest.mark.parametrize("args,needle", [
    (["--model", "nonsense"], "nonsense"),
    (["--engine", "gpu"], "gpu"),
    (["--time-budget", "-1"], "time-budget"),
])
def test_bad_options_exit_2(files, args, needle) -> None:
    p = run("check", str(files["run"]), *args)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("target,needle", [
    ("empty_dir", "no history.jsonl"),
    ("missing.jsonl", "no such file"),
    ("notes.txt", "expected a run directory"),
])
def test_bad_paths_exit_2_with_one_line(files, target, needle) -> None:
    p = run("check", str(files["dir"] / target))
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr


def test_budget_exhausted_exits_3(files) -> None:
    p = run("check", str(files["dir"] / "good.jsonl"), "--time-budget", "0.000001", "--json")
    assert p.returncode == 3, p.stderr
    assert json.loads(p.stdout)["valid"] == "unknown"


def test_register_models_go_to_the_linearizability_checker() -> None:
    good = run("check", str(KNOSSOS / "cas-register/good/memstress3-4.edn"), "--model", "cas-register", "--json")
    bad = run("check", str(KNOSSOS / "cas-register/bad/rethink-fail-minimal.edn"), "--model", "cas-register")
    assert good.returncode == 0, good.stderr
    assert "linearizable" in json.loads(good.stdout)["checkers"]
    assert bad.returncode == 1 and "INVALID" in bad.stdout


@pytest.mark.parametrize("value", [
    [["poll", {"t-0": [5]}]],          # a pair that is not [offset, value]
    [["send", "t-0", [1, [2, 3]]]],    # an unhashable message value
])
def test_malformed_queue_values_exit_2(tmp_path: Path, value) -> None:
    b = HistoryBuilder()
    b.send(0, "t-0", 1, 0)
    b.invoke(1, "poll", [["poll"]])
    b.complete(1, "ok", value)
    write_jsonl(tmp_path / "h.jsonl", b.ops)
    p = run("check", str(tmp_path / "h.jsonl"))
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def _poll_skip_history() -> list:
    """One consumer's second poll skips offset 1 (a poll-skip, allowed only
    with subscribe); another consumer reads everything."""
    b = HistoryBuilder()
    for i, v in enumerate((1, 2, 3)):
        b.send(0, "t-0", v, i)
    b.poll(1, {"t-0": [(0, 1)]})
    b.poll(1, {"t-0": [(2, 3)]})
    b.poll(2, {"t-0": [(0, 1), (1, 2), (2, 3)]})
    return b.ops


def test_run_directory_test_json_subscribe_allows_poll_skip(tmp_path: Path) -> None:
    """A run's test.json says how consumers got partitions; with subscribe a
    poll-skip is allowed (Jepsen's allowed-error-types)."""
    write_jsonl(tmp_path / "history.jsonl", _poll_skip_history())
    assert run("check", str(tmp_path)).returncode == 1
    (tmp_path / "test.json").write_text(json.dumps({"sub_via": ["subscribe"]}))
    p = run("check", str(tmp_path), "--json")
    assert p.returncode == 0, p.stdout
    assert json.loads(p.stdout)["anomaly_types"] == ["poll-skip"]


@pytest.mark.spark
def test_unusable_spark_master_is_one_line_harness_error_and_leaves_no_files(files, tmp_path: Path) -> None:
    # the check's private Spark directory is made under TMPDIR: point it at
    # an empty one and see nothing left there once the command has failed
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = run("check", str(files["run"]), "--spark-master", "bogus://nowhere", env_extra={"TMPDIR": str(tmp)})
    assert p.returncode == 4
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "cannot start Spark" in err[0] and "Master must" in err[0]
    assert "KRAFTWERK_DEBUG=1 keeps Spark's log" in err[0]
    assert list(tmp.iterdir()) == []


def test_cli_flags_configure_allowed_anomalies(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "h.jsonl", _poll_skip_history())
    h = str(tmp_path / "h.jsonl")
    assert run("check", h).returncode == 1
    assert run("check", h, "--sub-via", "subscribe").returncode == 0
    assert run("check", h, "--allow", "poll-skip").returncode == 0
    p = run("check", h, "--allow", "poll-skipped")
    assert p.returncode == 2 and "not a queue anomaly type" in p.stderr


def test_cli_no_ww_deps_strict_cycles_and_all_errors(tmp_path: Path) -> None:
    """Jepsen's switches: a wr-only G1c cycle is allowed with ww deps (the
    default) and invalid with --no-ww-deps; a G0 cycle is invalid only under
    --strict-cycles; --all-errors keeps every example."""
    b = HistoryBuilder()
    b.invoke(0, "txn", [["send", "x", "a"], ["poll"]])
    b.invoke(1, "txn", [["send", "y", "b"], ["poll"]])
    b.complete(0, "ok", [["send", "x", [0, "a"]], ["poll", {"y": [[0, "b"]]}]])
    b.complete(1, "ok", [["send", "y", [0, "b"]], ["poll", {"x": [[0, "a"]]}]])
    write_jsonl(tmp_path / "g1c.jsonl", b.ops)
    h = str(tmp_path / "g1c.jsonl")
    assert run("check", h).returncode == 0
    assert run("check", h, "--no-ww-deps").returncode == 1
    assert run("check", h, "--strict-cycles").returncode == 1
    u = HistoryBuilder()
    for v in range(40):
        u.send(0, "x", v, v)
    u.poll(1, {"x": []})
    write_jsonl(tmp_path / "unseen.jsonl", u.ops)
    p = run("check", str(tmp_path / "unseen.jsonl"), "--all-errors", "--json")
    assert p.returncode == 1 and len(json.loads(p.stdout)["anomalies"]["unseen"]) == 40
