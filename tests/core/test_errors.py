"""The core's exceptions say whose fault they are (core/errors.py): a message
routed to a role that does not own it is ours, a peer's request no correct
peer sends is theirs; neither is answered with a silent empty list."""

from __future__ import annotations

import pytest

from reference_impl.core.errors import LocalProtocolError, MissingSender, RemoteProtocolError, UnroutableMessage
from reference_impl.core.messages import GetReplicaLogInfoRequest, VoteRequest
from tests.core.brokerkit import TP, make_broker


def test_a_message_the_broker_role_does_not_handle_is_our_fault_not_a_silent_empty_answer():
    b = make_broker(1)
    with pytest.raises(UnroutableMessage) as e:
        b.handle(VoteRequest(1, 2, 0, 0), 1, 2)
    assert isinstance(e.value, LocalProtocolError) and not isinstance(e.value, RemoteProtocolError)


def test_an_internal_request_without_its_sender_is_the_peers_fault():
    b = make_broker(1)
    with pytest.raises(MissingSender) as e:
        b.handle(GetReplicaLogInfoRequest(1, (TP,), 7), 1, None)
    assert isinstance(e.value, RemoteProtocolError)
