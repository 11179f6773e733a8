"""The slot and memory rules of reference_impl/server/quotas.py as plain
functions: one address never holds more than its cap, past the total cap a
newcomer takes the least recently active slot of the address holding the
most (never of one holding about as many as it does), and when unfinished
frames pass the memory bound the largest gives way."""

from __future__ import annotations

from reference_impl.server.limits import Limits
from reference_impl.server.quotas import BufferBudget, SlotQuotas


def _quotas(total: int, per_ip: int, overrides: dict[str, int] | None = None) -> SlotQuotas:
    return SlotQuotas(Limits(max_connections=total, max_connections_per_ip=per_ip,
                             max_connections_per_ip_overrides=overrides or {}))


def test_an_address_at_its_cap_is_refused_and_its_override_wins():
    q = _quotas(100, 3, {"127.0.0.9": 1})
    assert [q.admit(("a", i), "127.0.0.2").refused for i in range(4)] == ["", "", "", "max.connections.per.ip"]
    assert [q.admit(("b", i), "127.0.0.9").refused for i in range(2)] == ["", "max.connections.per.ip"]
    assert (q.open, q.held("127.0.0.2"), q.held("127.0.0.9")) == (4, 3, 1)


def test_past_the_total_cap_a_newcomer_takes_the_idlest_slot_of_the_biggest_address():
    q = _quotas(4, 10)
    for i in range(4):
        assert not q.admit(("x", i), "127.0.0.2").refused
    q.touch(("x", 0))  # x0 was just active: x1 is now the idlest
    a = q.admit("producer", "127.0.0.1")
    assert (a.refused, a.evict) == ("", ("x", 1))
    assert (q.open, q.held("127.0.0.2"), q.held("127.0.0.1")) == (4, 3, 1)


def test_an_address_holding_about_as_many_as_the_biggest_is_refused_not_evicting():
    q = _quotas(4, 10)
    for i in range(2):
        q.admit(("x", i), "127.0.0.2")
        q.admit(("y", i), "127.0.0.3")
    # 127.0.0.3 holds 2, the biggest holds 2: taking one would only move the unfairness
    assert q.admit(("y", 2), "127.0.0.3").refused == "max.connections"
    # the same for the attacker's own address: reconnecting cannot win slots back
    q2 = _quotas(3, 10)
    for i in range(2):
        q2.admit(("x", i), "127.0.0.2")
    q2.admit("p", "127.0.0.1")
    assert q2.admit(("x", 2), "127.0.0.2").refused == "max.connections"


def test_many_addresses_cannot_shut_out_one_that_holds_fewer():
    q = _quotas(10, 10)
    for i in range(10):
        q.admit(("x", i), f"127.0.1.{i % 5}")  # five addresses, two slots each
    a = q.admit("producer", "127.0.0.1")
    assert not a.refused and a.evict is not None
    assert q.admit("producer-2", "127.0.0.1").refused == "max.connections"  # 1 + 2 > 2: fair now


def test_a_released_slot_is_given_back_and_released_twice_is_harmless():
    q = _quotas(2, 1)
    q.admit("a", "127.0.0.2")
    q.release("a")
    q.release("a")
    assert q.open == 0 and q.by_address == {} and not q.admit("b", "127.0.0.2").refused


def test_past_the_memory_bound_the_largest_unfinished_frame_is_closed_even_the_readers_own():
    b = BufferBudget(100)
    closed: list[str] = []

    def close(c: str) -> None:
        closed.append(c)
        b.release(c)

    b.set("big", 70, close)
    b.set("small", 20, close)
    assert closed == [] and b.total == 90
    b.set("small", 40, close)  # 110 > 100: the largest (big) goes, not the one that read
    assert closed == ["big"] and b.total == 40
    b.set("small", 101, close)  # past the bound on its own: it goes
    assert closed == ["big", "small"] and b.total == 0 and b.held == {}


def test_a_frame_that_completes_gives_its_bytes_back():
    b = BufferBudget(10)
    b.set("a", 8, lambda c: None)
    b.set("a", 0, lambda c: None)
    assert b.total == 0 and b.held == {}
