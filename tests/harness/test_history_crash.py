"""A harness killed at any moment leaves a history that checks: the file is
always a prefix of what was recorded (only its last line can be torn, which is
not corruption), every operation flushed before the kill is in it, and
`kraftwerk check` says the run is partial."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from checkers.history.jsonl import is_partial, read_jsonl

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent("""
    import sys
    import time
    from pathlib import Path
    from checkers.history.recorder import Recorder
    rec = Recorder(Path(sys.argv[1]))
    i = 0
    while True:
        for _ in range(50):  # a send invoked and acknowledged, as the workload records them
            rec.record({"type": "invoke", "f": "send", "process": i % 4, "value": [["send", "t-0", i]]})
            rec.record({"type": "ok", "f": "send", "process": i % 4, "value": [["send", "t-0", [i, i]]],
                        "acks": "all", "padding": "x" * (i % 700)})
            i += 1
        rec.flush()
        print(i, flush=True)  # acknowledged: flushed to the OS before this line
        time.sleep(0.002)
""")


def test_history_of_a_recorder_killed_at_random_moments_checks(tmp_path):
    rnd = random.Random(23)
    for n in range(8):
        hist = tmp_path / f"h{n}" / "history.jsonl"
        hist.parent.mkdir()
        p = subprocess.Popen([sys.executable, "-c", WRITER, str(hist)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        # The random moment counts from the writer's first acknowledgement, not from its start: on a busy
        # machine the interpreter's start and imports alone can outlast a fixed delay.
        first = p.stdout.readline()
        time.sleep(rnd.random() * 0.7)
        p.send_signal(signal.SIGKILL)
        acked = [int(x) for x in (first + p.stdout.read()).split()]
        p.wait()
        p.stdout.close()
        assert acked, "the writer never got going"
        warnings: list[str] = []
        ops = read_jsonl(hist, warnings)
        sends = {op.value[0][2][0] for op in ops if op.type == "ok"}
        assert set(range(acked[-1])) <= sends, "an acknowledged operation is missing"
        assert [op.index for op in ops] == list(range(len(ops)))  # a prefix, in order
        assert is_partial(hist)
        if n >= 2:
            continue  # the reader's view above holds for every kill; the CLI's for two
        r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "check", str(hist),
                            "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 1, 3), r.stderr
        assert json.loads(r.stdout)["partial"] is True
        assert "partial run" in r.stderr


def test_a_closed_history_is_not_partial(tmp_path):
    from checkers.history.recorder import Recorder

    hist = tmp_path / "history.jsonl"
    rec = Recorder(hist)
    rec.record({"type": "invoke", "f": "send", "process": 0, "value": [["send", "t-0", 1]]})
    assert is_partial(hist)
    rec.close()
    assert not is_partial(hist)
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "check", str(hist), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "partial" not in json.loads(r.stdout) and "partial run" not in r.stderr


def test_a_partial_history_without_final_reads_is_unknown_not_invalid(tmp_path):
    """Killed before its final reads, a run cannot say whether its acknowledged
    writes survived: unverified (exit 3), not lost (which would be a false
    INVALID). The same history, complete, keeps Jepsen's rule."""
    from checkers.history.recorder import Recorder

    hist = tmp_path / "history.jsonl"
    rec = Recorder(hist)
    for i in range(3):
        rec.record({"type": "invoke", "f": "send", "process": 0, "value": [["send", "t-0", i]], "acks": "all"})
        rec.record({"type": "ok", "f": "send", "process": 0, "value": [["send", "t-0", [i, i]]], "acks": "all"})
    rec.flush()  # the recorder is never closed: the harness "died"
    cli = [sys.executable, "-c", "from harness.cli import main; main()", "check", str(hist), "--json"]
    r = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stdout[-500:] + r.stderr
    assert json.loads(r.stdout)["valid"] == "unknown"
    rec.close()
    r = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1  # complete, with no final reads at all: Jepsen's rule, unseen is a loss
