"""Bad input: a one-line error, exit 2, and nothing started (no run directory,
no state file, no process)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def kraftwerk(*args):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "KRAFTWERK_DEBUG": ""})


@pytest.mark.parametrize(
    "args, words",
    [
        (["--rf", "5", "--brokers", "3"], "--rf 5 exceeds --brokers 3"),
        (["--nemesis", "partition,meteor"], "unknown nemesis 'meteor'"),
        (["--time-limit", "0"], "time limit must be positive"),
        (["--time-limit", "-5"], "time limit must be positive"),
        (["--variant", "kip966"], "NAME=on|off"),
        (["--acks", "2"], "'2' is not one of"),
        (["--db", "external", "--bootstrap", "nohost"], "HOST:PORT"),
        (["--workload", "txn"], "the reference implementation does not model: use --db kafka"),
        (["--abort-probability", "0.2"], "--abort-probability is a setting of --workload txn"),
        (["--workload", "txn", "--db", "kafka", "--abort-probability", "1.5"], "--abort-probability"),
        (["--workload", "txn", "--db", "kafka", "--sub-via", "subscribe"], "a mode of --workload queue"),
        (["--workload", "ctp", "--ctp-txn"], "--ctp-txn needs Kafka's transaction coordinator"),
        (["--ctp-txn", "--db", "kafka"], "--ctp-txn is a setting of --workload ctp"),
        (["--workload", "ctp", "--acks", "1"], "acks=all: drop --acks"),
    ],
)
def test_bad_flags_exit_2_with_one_line_and_start_nothing(tmp_path, args, words):
    out = tmp_path / "results"
    r = kraftwerk("run", "--out", str(out), *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_port_in_use_exits_2_before_starting_anything(tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    out = tmp_path / "results"
    try:
        r = kraftwerk("run", "--out", str(out), "--base-port", str(port), "--time-limit", "1")
    finally:
        busy.close()
    assert r.returncode == 2, r.stderr
    assert f"port {port}" in r.stderr and "in use" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_config_file_is_a_usage_error(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("rf: [unclosed\n")
    r = kraftwerk("run", "--config", str(f))
    assert r.returncode == 2 and "not valid YAML" in r.stderr
    f.write_text("rf: 3\nwarp_speed: 9\n")
    r = kraftwerk("run", "--config", str(f), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "warp" in r.stderr
