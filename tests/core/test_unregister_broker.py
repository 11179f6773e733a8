"""UnregisterBroker on the active controller (KIP-631; Kafka's
ReplicationControlManager.unregisterBroker and handleBrokerUnregistered):
the registration goes (an UnregisterBrokerRecord), the broker first leaves
every ISR and ELR as a fenced one does and is elected nowhere; an id not
registered is BROKER_ID_NOT_REGISTERED; a broker still running registers
again as a new one."""

from __future__ import annotations

from reference_impl.core.config import ProtocolConfig
from reference_impl.core.messages import Errors, UnregisterBrokerRequest

from tests.core.test_controller import TP, Cluster


def unregister(c: Cluster, b: int):
    return c.ask(UnregisterBrokerRequest("u", b), 1)


def test_kip631_unregister_broker_removes_its_registration_and_takes_it_out_of_every_isr():
    c = Cluster()
    c.start_brokers(0, 1, 2, 3)
    assert c.create("t", assignments=((0, 1, 2),)).error == Errors.NONE
    le = c.part().leader_epoch
    assert unregister(c, 0).error == Errors.NONE
    assert 0 not in c.active.image.brokers
    p = c.part()
    assert 0 not in p.isr and p.leader in (1, 2) and p.leader_epoch == le + 1
    assert p.replicas == (0, 1, 2)  # its replicas stay until they are reassigned
    assert c.traces("broker_unregistered") == [{"broker": 0, "broker_epoch": c.epochs[0]}]


def test_kip631_unregistering_an_unknown_broker_is_broker_id_not_registered():
    c = Cluster()
    c.start_brokers(0, 1, 2)
    r = unregister(c, 7)
    assert r.error == Errors.BROKER_ID_NOT_REGISTERED and "7" in r.message
    assert unregister(c, 0).error == Errors.NONE
    assert unregister(c, 0).error == Errors.BROKER_ID_NOT_REGISTERED


def test_kip631_an_unregistered_broker_leaves_the_elr_and_is_never_elected_from_it():
    c = Cluster(config=ProtocolConfig())
    c.start_brokers(0, 1, 2, 3)
    assert c.create("t", configs=(("min.insync.replicas", "3"),), assignments=((0, 1, 2),)).error == Errors.NONE
    # 1 and 2 fall out of the ISR below min ISR: they are in the ELR
    c.keep_alive(c.config.broker_session_timeout_ms + 2000, alive=(0, 3))
    p = c.part()
    assert p.isr == (0,) and set(p.elr) == {1, 2}
    assert unregister(c, 1).error == Errors.NONE
    assert 1 not in c.part().elr and 1 not in c.part().last_known_elr


def test_kip631_a_running_broker_told_it_is_not_registered_registers_again_as_new():
    c = Cluster()
    c.start_brokers(0, 1, 2)
    old = c.epochs[0]
    assert unregister(c, 0).error == Errors.NONE
    assert c.heartbeat(0).error == Errors.BROKER_ID_NOT_REGISTERED
    c.register(0, new_incarnation=False)
    assert c.epochs[0] > old and c.active.image.brokers[0].fenced
    assert c.heartbeat(0).is_fenced is False
