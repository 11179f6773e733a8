"""Kafka's topic-name rules (``org.apache.kafka.common.internals.Topic``):
what a CreateTopics request may name. A topic name becomes a directory name
(``<topic>-<partition>``) on every replica, so these rules are also what keeps
a client from writing outside a node's data directory, nesting directories, or
colliding with the metadata log.

* non-empty, at most 249 characters (255 for a file name, less room for
  ``-<partition>`` and Kafka's ``.deleted``/``-delete`` suffixes);
* only ASCII letters, digits, ``.``, ``_`` and ``-``;
* not ``.`` or ``..``;
* not an internal topic's name (``__cluster_metadata``, the KRaft metadata
  log; ``__consumer_offsets`` and ``__transaction_state``, made by the
  broker itself, never by a client).
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__cluster_metadata", "__consumer_offsets", "__transaction_state"})


def topic_name_error(name: object, internal: bool = False) -> str | None:
    """Why ``name`` is not a legal topic name for a client to create, or None.
    ``internal``: the broker itself creates it (the group coordinator's
    ``__consumer_offsets``), so an internal topic's name is allowed."""
    if not isinstance(name, str) or not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} is illegal: only ASCII alphanumerics, '.', '_' and '-' are allowed"
    if name in INTERNAL_TOPICS and not internal:
        return f"topic name {name!r} is reserved for an internal topic"
    return None
