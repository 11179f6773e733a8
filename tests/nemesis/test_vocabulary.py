"""One fault vocabulary: ``kind`` or ``kind:target``, a few aliases and
groups, every name checked before a run starts, and a fault the runtime
cannot make refused with a one-line reason."""

import pytest

from harness.dbs.reference.local import CAPABILITIES as LOCAL
from nemesis.control import Capability, Unsupported
from nemesis.faults import GROUPS, KINDS, FaultSpec, UnknownFault, check_supported, expand, parse
from reference_impl.sim.control import CAPABILITIES as SIM


def test_a_kind_alone_draws_its_usual_targets_a_kind_with_a_target_keeps_it():
    assert parse("kill") == FaultSpec("kill") and parse("kill").targets() == ("one", "minority", "majority", "all")
    assert parse("kill:majority").targets() == ("majority",)


def test_aliases_name_kind_target_pairs():
    assert parse("leader-kill") == FaultSpec("kill", "primaries")
    assert parse("controller-kill") == FaultSpec("kill", "controller")
    assert parse("partition-ring") == FaultSpec("partition", "majorities-ring")


def test_expand_takes_groups_and_comma_lists_canonical_and_once():
    assert expand(["kill,leader-kill", "kill:primaries", "none"]) == (FaultSpec("kill"), FaultSpec("kill", "primaries"))
    assert expand(["all"]) == tuple(expand(list(GROUPS["all"])))


@pytest.mark.parametrize("bad", ["meteor", "kill:everyone", "partition:one", ":one"])
def test_unknown_names_are_one_line_errors(bad):
    with pytest.raises(UnknownFault, match=f"unknown nemesis '{bad}'") as e:
        expand([bad])
    assert "\n" not in str(e.value)


def test_every_kinds_history_name_is_a_documented_fault_interval():
    assert {k.op_name for k in KINDS.values()} <= {"partition", "kill", "terminate", "pause", "clock",
                                                    "lose-unfsynced", "latency", "loss", "reassign",
                                                    "decommission"}


def test_a_fault_the_runtime_cannot_make_is_refused_with_its_reason():
    check_supported(expand(("loss", "kill:majority")), "sim", SIM)
    with pytest.raises(Unsupported, match="loss needs loss, which the local runtime cannot make"):
        check_supported(expand(("kill", "loss")), "local", LOCAL)


def test_both_runtimes_make_every_kind_but_loss_and_torn_writes_and_the_simulator_loss_too():
    """... reassignment included: the reference controller implements
    AlterPartitionReassignments (KIP-455), so both runtimes make it."""
    needs = {c for k in KINDS.values() for c in k.needs}
    assert needs - {Capability(c) for c in SIM} == {Capability.TORN_WRITE}
    assert needs - set(LOCAL) == {Capability.LOSS, Capability.TORN_WRITE}
    check_supported(expand(("reassign", "decommission")), "sim", SIM)
    check_supported(expand(("reassign", "decommission")), "local", LOCAL)


def test_decommission_is_made_on_db_kafka_too():
    """UnregisterBroker (KIP-631) is sent to Kafka's controller as to the
    reference's (harness.dbs.admin frames it)."""
    from harness.config import TestConfig
    from harness.dbs.kafka.db import capabilities_for

    check_supported(expand(("decommission",)), "local", capabilities_for(TestConfig(db="kafka", brokers=4)))


def test_a_torn_write_is_the_filesystems_and_refused_elsewhere_with_where_to_get_it():
    """torn-write (a power loss keeping a prefix of un-fsynced writes) is
    made only by the kraftwerk fs mounts of storage lazyfs; the simulator,
    local processes and a hosted cluster without the mounts refuse it."""
    from harness.config import TestConfig
    from harness.dbs.reference.hosted import capabilities_for

    assert parse("torn-write") == FaultSpec("torn-write") == parse("power-loss-torn")
    assert parse("torn-write").op_name == "lose-unfsynced"  # a power loss in the history
    for runtime, have in (("sim", SIM), ("local", LOCAL),
                          ("netns", capabilities_for(TestConfig(backend="netns", storage="pagecache")))):
        with pytest.raises(Unsupported) as e:
            check_supported(expand(("torn-write:one",)), runtime, have)
        assert str(e.value).startswith(f"torn-write:one needs torn-write, which the {runtime} runtime cannot make")
        assert "--storage lazyfs" in str(e.value) and "\n" not in str(e.value)
    check_supported(expand(("torn-write", "lose-unfsynced")), "netns", capabilities_for(TestConfig(backend="netns",
                                                                                          nemesis=["torn-write"])))


@pytest.mark.parametrize("args", [["--nemesis", "torn-write"],
                                  ["--backend", "netns", "--storage", "pagecache", "--nemesis", "torn-write:one"]])
def test_kraftwerk_run_refuses_a_torn_write_without_the_filesystem_before_anything_starts(tmp_path, capsys, args):
    from harness.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", *args, "--out", str(tmp_path), "--time-limit", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs torn-write" in err[0], err
    assert not any(tmp_path.iterdir())


def test_kraftwerk_run_refuses_loss_before_anything_starts(tmp_path, capsys):
    from harness.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", "--nemesis", "loss", "--out", str(tmp_path), "--time-limit", "1"])
    assert e.value.code == 2
    assert "loss needs loss" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
