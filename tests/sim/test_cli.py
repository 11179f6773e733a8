"""``kraftwerk sim`` input validation: a one-line error and exit code 2 for
bad input, before anything is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--variant", "kip999=on"], "unknown variant 'kip999'"),
        (["--variant", "kip101"], "--variant wants NAME=on|off"),
        (["--variant", "kip101=maybe"], "--variant wants NAME=on|off"),
        (["--nemesis", "kill,meteor"], "unknown nemesis 'meteor'"),
        (["--rf", "4"], "--rf 4 exceeds --brokers 3"),
        (["--min-isr", "3", "--rf", "2"], "--min-isr 3 exceeds --rf 2"),
        (["--time-limit", "-5"], "time limit must be positive"),
        (["--nemesis-interval", "-1"], "--nemesis-interval: Input should be greater than 0"),
        (["--acks", "2"], "'2' is not one of"),
        (["--base-port", "9000"], "--base-port is for real processes, not the simulator"),
        (["--protocol", "no.such.key=1"], "unknown config key 'no.such.key'"),
        (["--seeds", "9..3"], "need 0 <= A <= B"),
        (["--seeds", "a..b"], "must look like A..B"),
        (["--seed", "1", "--seeds", "1..2"], "not both"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--brokers", "0"], "--brokers: Input should be greater than or equal to 1"),
        (["--nemesis", "isr-crash"], "isr-crash is a story composite: use --scenario isr-crash"),
        (["--nemesis", "kill,story:expand-race"], "expand-race is a story composite: use --scenario expand-race"),
        (["--nemesis", "story"], "story composites are scenarios: use --scenario NAME"),
        (["--scenario", "unclean-loss", "--nemesis", "kill"], "--scenario unclean-loss is a fixed schedule"),
        (["--scenario", "isr-crash,unclean-loss"], "unclean-loss is a script, played alone"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(["sim", "--out", str(tmp_path), *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir()), "nothing may be started on bad input"


def test_unknown_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["sim", "--brokerz", "3"])
    assert e.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_default_jobs_is_one_worker_per_usable_cpu_and_at_most_one_per_seed():
    import os

    from harness.cli.sim import default_jobs

    cpus = len(os.sched_getaffinity(0))
    assert default_jobs(1) == 1
    assert default_jobs(1000) == cpus
    assert default_jobs(0) == 1
