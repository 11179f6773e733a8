"""IncrementalAlterConfigs on the controller: topic configs written as
ConfigRecords through the quorum, and seed 002's rule that lowering
min.insync.replicas to at most the ISR size removes the ELR."""

from __future__ import annotations

from reference_impl.core.messages import (
    CONFIG_APPEND,
    CONFIG_DELETE,
    CONFIG_SET,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigRecord,
    Errors,
    IncrementalAlterConfigsRequest,
)
from tests.core.test_controller import three_brokers


def alter_configs(c, *ops, topic="t", resource_type=RESOURCE_TOPIC, validate_only=False):
    req = IncrementalAlterConfigsRequest("ref", (AlterConfigsResource(resource_type, topic, tuple(ops)),), validate_only)
    return c.ask(req, 1).results[0]


def config_records(c):
    return [e.record for e in c.active.raft.log if isinstance(e.record, ConfigRecord)]


def test_lowering_min_isr_to_the_isr_size_removes_the_elr_seed002():
    """Seed 002 ("Other behaviors" 2): when min.insync.replicas is updated
    and the new min ISR <= the current ISR, the ELR is removed."""
    c = three_brokers(topic_configs=(("min.insync.replicas", "3"),))
    c.alter(0, [0, 1])
    assert c.part().elr == (2,)
    r = alter_configs(c, AlterConfigOp("min.insync.replicas", CONFIG_SET, "2"))
    assert r.error == Errors.NONE
    p = c.part()
    assert p.isr == (0, 1) and p.elr == () and p.last_known_elr == ()
    assert config_records(c) == [ConfigRecord("t", "min.insync.replicas", "2")]
    assert c.active.image.topics["t"]["min.insync.replicas"] == "2"


def test_raising_min_isr_above_the_isr_keeps_the_isr_and_records_the_config():
    c = three_brokers(topic_configs=(("min.insync.replicas", "2"),))
    c.alter(0, [0, 1])
    assert c.part().elr == ()
    assert alter_configs(c, AlterConfigOp("min.insync.replicas", CONFIG_SET, "3")).error == Errors.NONE
    assert c.part().isr == (0, 1) and c.active.image.topics["t"]["min.insync.replicas"] == "3"


def test_delete_removes_the_topic_override():
    c = three_brokers(topic_configs=(("min.insync.replicas", "3"),))
    assert alter_configs(c, AlterConfigOp("min.insync.replicas", CONFIG_DELETE)).error == Errors.NONE
    assert "min.insync.replicas" not in c.active.image.topics["t"]
    assert config_records(c) == [ConfigRecord("t", "min.insync.replicas", None)]


def test_refusals_unknown_topic_bad_value_unsupported_key_list_op_and_broker_resource():
    c = three_brokers()
    cases = [
        (dict(topic="nope"), AlterConfigOp("min.insync.replicas", CONFIG_SET, "2"), Errors.UNKNOWN_TOPIC_OR_PARTITION),
        ({}, AlterConfigOp("min.insync.replicas", CONFIG_SET, "0"), Errors.INVALID_CONFIG),
        ({}, AlterConfigOp("min.insync.replicas", CONFIG_SET, "two"), Errors.INVALID_CONFIG),
        ({}, AlterConfigOp("retention.ms", CONFIG_SET, "1000"), Errors.INVALID_CONFIG),
        ({}, AlterConfigOp("min.insync.replicas", CONFIG_APPEND, "2"), Errors.INVALID_CONFIG),
        (dict(topic="1", resource_type=RESOURCE_BROKER), AlterConfigOp("min.insync.replicas", CONFIG_SET, "2"),
         Errors.INVALID_REQUEST),
    ]
    for kw, op, err in cases:
        r = alter_configs(c, op, **kw)
        assert r.error == err and r.message, (op, r)
    assert config_records(c) == []


def test_validate_only_writes_nothing():
    c = three_brokers()
    r = alter_configs(c, AlterConfigOp("min.insync.replicas", CONFIG_SET, "2"), validate_only=True)
    assert r.error == Errors.NONE and config_records(c) == []
