"""``--static-members``: subscribed consumers are static group members
(KIP-345), each worker thread with its own ``group.instance.id``, which
the process replacing a crashed one keeps: it rejoins as the same member
(fencing the dead one) instead of joining anew. The coordinator's rules
are tests/core/test_group_static_membership.py; librdkafka against them,
tests/server/test_consumer_groups.py."""

from harness.config import TestConfig
from harness.lifecycle.runner import client_factory
from tests.harness.test_cli_bad_input import kraftwerk


def test_each_thread_has_its_instance_id_and_its_replacements_keep_it():
    cfg = TestConfig(sub_via="subscribe", static_members=True, seed=3)
    make = client_factory(cfg, "127.0.0.1:1")
    first, again, other = make(0, 0), make(0, 4), make(1, 1)
    assert first.instance_id == again.instance_id == "kraftwerk-queue-3-t0"
    assert other.instance_id == "kraftwerk-queue-3-t1"
    assert client_factory(TestConfig(sub_via="subscribe"), "127.0.0.1:1")(0, 0).instance_id is None


def test_static_members_without_a_group_are_refused_in_one_line(tmp_path):
    r = kraftwerk("run", "--out", str(tmp_path / "r"), "--static-members")
    assert r.returncode == 2 and "--static-members is for consumer groups" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
