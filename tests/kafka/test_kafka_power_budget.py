"""Real Apache Kafka 4.4: after a kill, the nemesis's ledger of unclean
shutdowns lets a power loss go ahead as soon as the restarted broker's own
metadata lists it in every ISR, and not before. A broker opens its
listeners only once the controller says it caught up to its new
``RegisterBrokerRecord`` (``BrokerServer.startup``), which removed the
killed incarnation from every ISR and ELR (KIP-966), so its own Metadata
answer never shows the previous incarnation in sync; any other broker's
may. Before, the ledger waited for a second look two session timeouts
(8 s) after the first, taken only when a fault asked: in the differential
campaign's 15 s runs no power loss drawn after a kill ever applied."""

import random
import time

import pytest

pytestmark = pytest.mark.integration

BROKERS = ("n1", "n2", "n3")


def test_a_power_loss_waits_for_the_killed_brokers_own_metadata_to_have_it_back_in_every_isr(tmp_path):
    from harness.config import build_config
    from harness.dbs.kafka.db import KafkaDB
    from harness.rundir.state import RunState
    from nemesis.faults import expand, make_faults
    from nemesis.rolling import back_in_sync

    cfg = build_config(None, {"db": "kafka", "brokers": 3, "controllers": 1, "rf": 3, "min_isr": 2,
                              "partitions": 2, "nemesis": ["kill"], "seed": 5})
    st = RunState.create(tmp_path / "out", "power-budget", tmp_path)
    db = KafkaDB(cfg, tmp_path, st)
    try:
        db.setup(ready_timeout=120)
        cluster, obs = db.cluster, db.cluster.observer
        deadline = time.monotonic() + 90
        while not all(back_in_sync(cluster, b) for b in BROKERS):
            assert time.monotonic() < deadline, {b: obs.own_isrs(b) for b in BROKERS}
            time.sleep(0.5)
        # one look may be answered by another broker (librdkafka picks one) and then counts for nothing
        while not ((own := obs.own_isrs("n2")) and all(set(isr) == set(BROKERS) for isr in own.values())):
            assert time.monotonic() < deadline, own
            time.sleep(0.5)

        fs = make_faults(expand(["kill:one", "lose-unfsynced:one"]), cluster, random.Random(1))
        power = fs["lose-unfsynced:one"]
        assert fs["kill:one"]._signal("one", ["n1"])["nodes"] == ["n1"]
        assert obs.own_isrs("n1") == {}  # down: it answers nothing
        assert "n1" in (power._power_refused("one", None) or "")
        fs["kill:one"].stop()
        started, refused_while_behind = time.monotonic(), 0
        while (refused := power._power_refused("one", None)) is not None:
            assert "n1" in refused
            refused_while_behind += 1
            assert time.monotonic() - started < 120, refused
            time.sleep(0.2)
        allowed = time.monotonic() - started
        assert refused_while_behind > 0  # a restarted JVM is not back at once
        # allowed on one look: n1's own metadata has it back in every ISR
        while not ((own := obs.own_isrs("n1")) and all("n1" in isr for isr in own.values())):
            assert time.monotonic() - started < 150, own
            time.sleep(0.2)
        print(f"a power loss allowed {allowed:.1f} s after n1's restart; refused {refused_while_behind} times before")
    finally:
        db.teardown()
        st.remove()
