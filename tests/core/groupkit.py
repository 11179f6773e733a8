"""Driving a :class:`ClassicGroup` on its own in tests: the coordinator's
part of a rebalance (appending the group's metadata records) done at once."""

from __future__ import annotations

from reference_impl.core.groups.group import ClassicGroup
from reference_impl.core.groups.messages import SyncGroupRequest


def durable(grp: ClassicGroup, mono: int) -> list:
    """Every metadata record the group asked for is appended (the coordinator's
    part, which tests/core/test_group_metadata_records.py drives for real)."""
    out = []
    while grp.stores:
        out += grp.stored(grp.stores.pop(0), 0, mono)
    return out


def sync(grp: ClassicGroup, req: SyncGroupRequest, mono: int) -> list:
    return grp.sync(req, mono) + durable(grp, mono)
