"""Seed 002's election order under unclean recovery, checked on the
PartitionChangeBuilder over every shape of ISR / ELR / LastKnownELR / active
brokers (hypothesis), against the seed's text read as a table:

1. an active ISR member: elect it (clean);
2. an active ELR member: elect it (elr);
3. fenced ELR (or ISR) members: ``Aggressive`` -> unclean recovery, else wait;
4. no ELR member: ``Aggressive`` -> recovery; ``Balanced`` -> recovery once
   every LastKnownELR member is unfenced; ``None`` -> wait.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reference_impl.core.messages import NO_LEADER, TopicPartition
from reference_impl.core.metadata import RECOVERING, PartitionRegistration
from reference_impl.core.partition_change import (
    AGGRESSIVE,
    BALANCED,
    CLEAN,
    ELR,
    RECOVERY,
    STRATEGY_NONE,
    PartitionChangeBuilder,
)

REPLICAS = (0, 1, 2)
TP = TopicPartition("t", 0)


STAY = "stay"


def seed_002_decision(strategy, leader, isr, elr, lkelr, active) -> str | None:
    """What the seed says happens (None: the partition waits)."""
    if leader in isr and leader in active:
        return STAY  # the current leader keeps leading: no election at all
    if any(r in active for r in isr):
        return CLEAN
    if any(r in active for r in elr):
        return ELR
    if isr or elr:  # such members exist but are fenced
        return RECOVERY if strategy == AGGRESSIVE else None
    if strategy == AGGRESSIVE:
        return RECOVERY
    if strategy == BALANCED and all(r in active for r in lkelr):
        return RECOVERY
    return None


@st.composite
def partitions(draw):
    roles = draw(st.lists(st.sampled_from(["isr", "elr", "lkelr", "none"]), min_size=3, max_size=3))
    isr = tuple(r for r, k in zip(REPLICAS, roles) if k == "isr")
    elr = tuple(r for r, k in zip(REPLICAS, roles) if k == "elr")
    lkelr = tuple(r for r, k in zip(REPLICAS, roles) if k == "lkelr")
    active = frozenset(draw(st.sets(st.sampled_from(REPLICAS))))
    # the leader, if any, is the first ISR member (it may be the one just fenced)
    leader = isr[0] if isr else NO_LEADER
    reg = PartitionRegistration(REPLICAS, isr, leader, 4, 9, elr=elr, last_known_elr=lkelr)
    strategy = draw(st.sampled_from([AGGRESSIVE, BALANCED, STRATEGY_NONE]))
    return reg, active, strategy


def _builder(reg, active, strategy):
    return PartitionChangeBuilder(
        tp=TP,
        current=reg,
        is_active=lambda b: b in active,
        min_isr=3,  # every ISR here is below min ISR, as ELR requires
        elr_enabled=True,
        unclean_allowed=False,
        recovery_strategy=strategy,
    )


@settings(max_examples=300, deadline=None)
@given(partitions())
def test_recovery_is_asked_for_exactly_when_seed_002_says_so(case):
    reg, active, strategy = case
    expected = seed_002_decision(strategy, reg.leader, reg.isr, reg.elr, reg.last_known_elr, active)
    b = _builder(reg, active, strategy)
    change = b.build()
    if expected == STAY:
        assert (change is None or change.election is None) and not b.needs_recovery
    elif expected in (CLEAN, ELR):
        assert change is not None and change.election == expected and not b.needs_recovery
    elif expected == RECOVERY:
        assert b.needs_recovery
        assert change is None or change.after.leader == NO_LEADER
    else:
        assert not b.needs_recovery
        assert change is None or change.after.leader == NO_LEADER


@settings(max_examples=300, deadline=None)
@given(partitions(), st.sampled_from(REPLICAS))
def test_a_recovery_leader_is_elected_only_where_a_recovery_is_due_and_only_if_active(case, longest):
    reg, active, strategy = case
    expected = seed_002_decision(strategy, reg.leader, reg.isr, reg.elr, reg.last_known_elr, active)
    change = _builder(reg, active, strategy).set_recovery_leader(longest).build()
    if expected == RECOVERY and longest in active:
        assert change is not None and change.election == RECOVERY
        p = change.after
        assert p.leader == longest and p.isr == (longest,) and p.leader_recovery_state == RECOVERING
        assert p.leader_epoch == reg.leader_epoch + (1 if reg.leader != longest else 0)
        assert "election:recovery" in change.record.reason
    elif expected in (CLEAN, ELR):
        assert change is not None and change.election == expected
    elif expected == STAY:
        assert change is None or change.election is None
    else:
        assert change is None or change.after.leader == NO_LEADER
