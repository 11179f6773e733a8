"""The core's own exceptions, named by whose fault they are.

A runtime records any exception out of the core as a crash of that node (a
finding, never a harness error: ``node_crash`` in the trace, and the
invariant monitor reports it). The name says where to look:

* :class:`LocalProtocolError` — ours: the core or the runtime driving it broke
  the core's contract (a message routed to a role that does not own it, an
  append refused on a controller that believes it is active). A bug here.
* :class:`RemoteProtocolError` — the peer's: a message no correct peer sends
  (a quorum leader asking a member to truncate committed entries, an
  internal request without a sender). Kafka refuses these the same way (its
  Raft client raises rather than drop committed metadata).

Expected protocol outcomes are not exceptions: they are Kafka error codes in
the answer (``messages.Errors``), and a late answer to a request already
given up on is dropped by design (each such drop says so where it happens).
They derive from ``Exception`` alone: the compiled build (mypyc) makes
native classes of them, and a native class may not inherit from
``RuntimeError`` or take two bases.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of the core's protocol exceptions."""


class LocalProtocolError(ProtocolError):
    """Our fault: the core or its runtime broke the core's contract."""


class RemoteProtocolError(ProtocolError):
    """The peer's fault: a message no correct peer sends."""


class UnroutableMessage(LocalProtocolError):
    """A message handed to a role that does not handle its type (the node's
    routing, or a runtime calling a role directly, is wrong)."""


class CommittedTruncation(RemoteProtocolError):
    """A quorum leader's answer asks this member to truncate below its high
    watermark, which would remove committed metadata (seed 004)."""


class MissingSender(RemoteProtocolError):
    """An internal request that needs its sender to be answered came without one."""


class IllegalStateTransition(LocalProtocolError):
    """A state machine of the core was asked to move between two states its
    transition table does not join (the KRaft quorum states of
    ``raft/state.py``): the core's own logic is wrong."""
