"""Generator combinators behave like Jepsen's: purity (asking twice does not
advance), time limits, rate limits, phases that wait for completions,
per-thread generators and the client/nemesis split."""

import random

import generator as g


def ctx(t=0, free=(0, 1, 2, "nemesis"), threads=(0, 1, 2, "nemesis"), seed=1):
    return g.Context(
        time=t, rng=random.Random(seed), free=frozenset(free),
        process_of={x: x for x in threads}, threads=frozenset(threads), state={},
    )


def drain(gen, c, n=100):
    """Dispatch ops at their own time, all threads stay free (instant completion)."""
    out = []
    while gen is not None and len(out) < n:
        r = gen.op(c)
        if r is None:
            break
        op, gen = r
        if op == g.PENDING:
            break
        out.append(op)
        c = g.Context(time=max(c.time, op["time"]), rng=c.rng, free=c.free, process_of=c.process_of,
                      threads=c.threads, state=c.state)
    return out


def test_op_is_pure_asking_twice_gives_the_same_state():
    gen = g.limit(2, {"f": "x"})
    c = ctx()
    a = gen.op(c)
    b = gen.op(c)
    assert a[0]["f"] == b[0]["f"] == "x"
    assert len(drain(gen, ctx())) == 1  # Once inside limit: one op


def test_limit_caps_an_infinite_stream():
    ops = drain(g.limit(5, lambda c: {"f": "w"}), ctx())
    assert [o["f"] for o in ops] == ["w"] * 5


def test_time_limit_stops_at_the_deadline():
    gen = g.time_limit(1.0, g.delay(0.3, lambda c: {"f": "w"}))
    ops = drain(gen, ctx())
    assert [o["time"] for o in ops] == [0, 300_000_000, 600_000_000, 900_000_000]


def test_rate_limit_spaces_ops_with_mean_interval():
    ops = drain(g.limit(400, g.rate(100, lambda c: {"f": "w"})), ctx(seed=7), n=400)
    span = (ops[-1]["time"] - ops[0]["time"]) / 1e9
    assert 3.0 < span < 5.0  # 399 gaps of mean 10 ms
    assert all(b["time"] >= a["time"] for a, b in zip(ops, ops[1:]))


def test_no_free_thread_means_pending():
    r = g.clients(lambda c: {"f": "w"}).op(ctx(free=("nemesis",)))
    assert r[0] == g.PENDING


def test_clients_and_nemesis_see_only_their_threads():
    c = ctx()
    op, _ = g.nemesis({"f": "start-kill"}).op(c)
    assert op["process"] == "nemesis"
    for _ in range(20):
        op, _ = g.clients(lambda c: {"f": "w"}).op(c)
        assert op["process"] != "nemesis"


def test_any_picks_the_soonest_op():
    late = g.delay(5, g.seq(g.Once({"f": "late", "time": 5_000_000_000})))
    soon = g.Once({"f": "soon"})
    op, _ = g.any_(late, soon).op(ctx())
    assert op["f"] == "soon"


def test_phases_wait_for_outstanding_ops():
    gen = g.phases(g.Once({"f": "a"}), g.Once({"f": "b"}))
    c = ctx()
    op, gen = gen.op(c)
    assert op["f"] == "a"
    busy = ctx(free=[t for t in (0, 1, 2, "nemesis") if t != op["process"]])
    assert gen.op(busy)[0] == g.PENDING  # b waits until a completed
    op2, _ = gen.op(ctx())
    assert op2["f"] == "b"


def test_each_thread_gives_every_thread_its_own_copy():
    gen = g.clients(g.each_thread(lambda t: g.Once({"f": f"final-{t}"})))
    ops = drain(gen, ctx())
    assert sorted(o["f"] for o in ops) == ["final-0", "final-1", "final-2"]
    assert sorted(o["process"] for o in ops) == [0, 1, 2]


def test_sleep_occupies_a_thread_and_records_nothing():
    op, nxt = g.nemesis(g.sleep(2)).op(ctx())
    assert op["_sleep"] == 2_000_000_000 and op["process"] == "nemesis"
    assert nxt is not None and nxt.op(ctx()) is None


def test_mix_is_seeded():
    def run(seed):
        return [o["f"] for o in drain(g.limit(30, g.mix({"f": "a"}, {"f": "b"}, lambda c: {"f": "c"})), ctx(seed=seed))]

    assert run(3) == run(3)


def test_asking_a_mix_again_gives_the_same_op_whatever_the_rng_did():
    """Jepsen's mix keeps the choice of the next op's generator in its
    state (drawn as the op before it was given): an ask the interpreter
    does not dispatch (an op for later) decides nothing about that op."""
    gen = g.mix(*[(lambda i: lambda c: {"f": f"g{i}"})(i) for i in range(8)])
    for _ in range(20):
        c = ctx(seed=4)
        a, gen2 = gen.op(c)
        c.rng.random()  # something else drew meanwhile
        assert gen.op(c)[0]["f"] == a["f"]  # the process is drawn among the free ones
        gen = gen2


def test_a_generator_that_says_it_is_inert_returns_itself_from_every_update():
    """The interpreters skip updates of an inert generator, so is_inert must
    never claim more than update does; routing ones (each_thread) are not."""
    inert = [g.phases(g.any_(g.clients(g.time_limit(5, g.rate(10, g.mix({"f": "a"}, lambda c: {"f": "b"})))),
                             g.nemesis(g.sleep(1))), g.clients(g.limit(2, {"f": "c"}))),
             g.seq(g.delay(1, {"f": "x"}), g.repeat({"f": "y"}, 3))]
    for gen in inert:
        assert gen.is_inert()
        for event in ({"process": 0, "type": "invoke", "f": "a"}, {"process": "nemesis", "type": "info", "f": "s"}):
            assert gen.update(ctx(), event) is gen
    each = g.clients(g.each_thread(lambda t: g.Once({"f": "r", "thread": t})))
    assert not each.is_inert()


def _walk(gen, seed, n, threads_free):
    """Ask ``gen`` n times, the k-th ask with the threads and free threads
    ``threads_free(k)`` gives, dispatching what is due: the ops, the
    PENDINGs and the rng's state after each ask; and the last generator."""
    rng = random.Random(seed)
    c = ctx(seed=seed)
    out = []
    for k in range(n):
        threads, free = threads_free(k)
        c = g.Context(time=c.time + 1_000_000, rng=c.rng, free=frozenset(free) & threads, process_of=c.process_of,
                      threads=threads, state={})
        r = gen.op(c)
        if r is None:
            out.append(None)
            break
        op, nxt = r
        out.append((op, c.rng.random(), rng.random()))
        if op != g.PENDING:
            gen = nxt
    return out, gen


def _busy_walk(gen, seed, n=60):
    """Ask ``gen`` n times with a changing set of free threads (some asks
    find none): see :func:`_walk`."""
    threads = frozenset((0, 1, 2))
    return _walk(gen, seed, n, lambda k: (threads, [t for t in threads if (k * 7 + t) % 4] if k % 5 else []))[0]


def test_a_stagger_over_a_mix_of_op_functions_answers_and_draws_as_the_generators_it_stands_for():
    def make():
        left = [3]

        def few(c):  # exhausted after three ops
            left[0] -= 1
            return {"f": "few", "value": left[0]} if left[0] >= 0 else None

        return few

    def send(c):
        return {"f": "send", "value": c.rng.randrange(100)}

    for seed in range(4):
        fused = g.stagger(0.003, g.mix(send, make(), send))
        assert type(fused).__name__ == "DelayedFns"
        plain = g.Delay(3_000_000, g.Mix((g.Fn(send), g.Fn(make()), g.Fn(send))), None, True)
        assert _busy_walk(fused, seed) == _busy_walk(plain, seed)
    fused = g.delay(0.002, g.mix(make()))
    plain = g.Delay(2_000_000, g.Mix((g.Fn(make()),)), None, False)
    assert _busy_walk(fused, 9) == _busy_walk(plain, 9)


def _send(c):
    """A rate's send: a random value, drawn from the context's rng."""
    return {"f": "send", "value": c.rng.randrange(100)}


def _poll(c):
    return {"f": "poll"}


def test_a_time_limit_over_a_rate_hands_its_limit_down_and_answers_and_draws_as_before():
    """TimeLimit over a DelayedFns leaves the tree after its first ask; the
    ops, the PENDINGs, the end and the rng's draws are those of the
    TimeLimit over the generators the DelayedFns stands for."""
    for seed in range(4):
        for deadline in (None, 9_000_000, 40_000_000):
            fused = g.TimeLimit(30_000_000, g.stagger(0.003, g.mix(_send, _send, _poll)), deadline)
            plain = g.TimeLimit(30_000_000, g.Delay(3_000_000, g.Mix((g.Fn(_send), g.Fn(_send), g.Fn(_poll))),
                                                    None, True), deadline)
            walked = _busy_walk(fused, seed, n=80)
            assert walked == _busy_walk(plain, seed, n=80)
            assert walked[-1] is None  # the limit ended both
    c = ctx()
    _, nxt = g.TimeLimit(5_000_000, g.rate(100, g.mix(_send)), None).op(c)
    assert type(nxt).__name__ == "DelayedFns" and nxt.deadline == c.time + 5_000_000


def test_randbelow_draws_as_randrange_from_each_rng_when_rngs_alternate() -> None:
    """``randbelow`` keeps the last rng's ``getrandbits`` bound: drawing
    from two rngs in turn must draw each from its own (the same numbers as
    ``randrange`` on copies of them), never from the one bound before."""
    import random

    from generator.core import randbelow

    a, b = random.Random(1), random.Random(2)
    ref_a, ref_b = random.Random(1), random.Random(2)
    for n in (1, 2, 3, 7, 32, 33, 1000, 2**40 + 3):
        assert randbelow(a, n) == ref_a.randrange(n)
        assert randbelow(b, n) == ref_b.randrange(n)
        assert randbelow(b, n) == ref_b.randrange(n)
        assert randbelow(a, n) == ref_a.randrange(n)


def test_clients_whose_successor_is_asked_with_a_wider_view_keep_to_their_threads() -> None:
    """``OnThreads`` remembers the thread set its predicate keeps whole and
    skips ``restrict`` for that very set: asked next with a set holding
    the nemesis too, its successor must restrict again (the nemesis never
    gets a client op), and asked again with the first set it still sees
    every thread there."""
    only_clients = frozenset((0, 1, 2))
    c0 = g.Context(time=0, rng=random.Random(3), free=only_clients, process_of={0: 0, 1: 1, 2: 2},
                   threads=only_clients, state={})
    gen = g.clients(lambda c: {"f": "w"})
    op, gen = gen.op(c0)
    assert op["process"] in only_clients
    wide = ctx(free=("nemesis",), seed=4)  # only the nemesis free: the clients' view has no free thread
    r = gen.op(wide)
    assert r[0] == g.PENDING
    seen = set()
    for _ in range(30):
        op, gen = gen.op(c0)
        seen.add(op["process"])
    assert seen == {0, 1, 2}


def test_a_seq_spells_its_generators_as_given_and_goes_on_to_the_next_when_one_ends() -> None:
    """``Seq`` keeps its head and the generators after it apart; ``gens``
    and its repr are the tuple it was given (an empty one, a ``None``
    entry), and its successors walk the rest in order, skipping ``None``."""
    a, b = g.Once({"f": "a"}), g.Once({"f": "b"})
    assert g.Seq(()).gens == () and repr(g.Seq(())) == "Seq(())"
    assert g.Seq((None,)).gens == (None,)
    s = g.Seq((a, None, b))
    assert s.gens == (a, None, b) and repr(s) == f"Seq(({a!r}, None, {b!r}))"
    assert [op["f"] for op in drain(s, ctx())] == ["a", "b"]
    op, s2 = s.op(ctx())
    assert s2.gens == (None, None, b)
    assert g.Seq(()).op(ctx()) is None and g.Seq((None,)).op(ctx()) is None
    assert s.is_inert() and g.Seq(()).is_inert()


def test_gaps_and_draws_from_alternating_rngs_are_each_rngs_own() -> None:
    """``random()`` is bound once per rng beside ``getrandbits``: a gap
    drawn from one rng after a draw from another (and a draw after a gap)
    is that rng's, as ``random()`` and ``randrange`` on copies give them."""
    from generator.core import _random, randbelow

    a, b = random.Random(5), random.Random(6)
    ref_a, ref_b = random.Random(5), random.Random(6)
    for n in (3, 17, 1000):
        assert _random(a) == ref_a.random()
        assert randbelow(b, n) == ref_b.randrange(n)
        assert _random(b) == ref_b.random()
        assert _random(a) == ref_a.random()
        assert randbelow(a, n) == ref_a.randrange(n)


def _clients_walk(gen, seed, n=60):
    """Ask ``gen`` n times with changing free threads and thread sets (the
    nemesis among them or not, so a clients view narrows or is the
    context itself): see :func:`_walk`."""
    with_nemesis, clients_only = frozenset((0, 1, 2, "nemesis")), frozenset((0, 1, 2))

    def threads_free(k):
        free = [t for t in (0, 1, 2, "nemesis") if (k * 7 + (t if t != "nemesis" else 3)) % 4] if k % 5 else ["nemesis"]
        return (with_nemesis if k % 3 else clients_only), free
    return _walk(gen, seed, n, threads_free)


def test_clients_over_a_rate_hand_their_threads_down_and_answer_and_draw_as_before():
    """OnThreads over a DelayedFns (``clients`` over the rate-limited load,
    under its time limit) hands its predicate down after its first ask and
    leaves the tree, as TimeLimit does; the ops (never the nemesis's
    thread), the PENDINGs, the end and the rng's draws are those of
    OnThreads over the generators the DelayedFns stands for."""
    for seed in range(4):
        fused = g.clients(g.TimeLimit(40_000_000, g.stagger(0.003, g.mix(_send, _send, _poll)), 40_000_000))
        plain = g.clients(g.TimeLimit(40_000_000, g.Delay(3_000_000, g.Mix((g.Fn(_send), g.Fn(_send), g.Fn(_poll))),
                                                          None, True), 40_000_000))
        walked, last = _clients_walk(fused, seed)
        assert walked == _clients_walk(plain, seed)[0]
        assert walked[-1] is None and all(w[0]["process"] != "nemesis" for w in walked[:-1] if w[0] != g.PENDING)
    _, nxt = g.clients(g.rate(100, g.mix(_send))).op(ctx())
    assert type(nxt).__name__ == "DelayedFns" and nxt.pred is not None  # no OnThreads left above it


def test_an_op_functions_new_op_is_filled_in_place_and_a_plain_functions_is_copied():
    """An :class:`OpFn`'s op is new on every call, so a rate's mix and Fn
    fill it in place; a plain function may hand the same template every
    time, so it gets a copy and its template stays as it was."""
    made = []

    class Fresh(g.OpFn):
        def __call__(self, c):
            made.append({"f": "fresh"})
            return made[-1]

    template = {"f": "shared"}
    for gen in (g.rate(10, g.mix(Fresh())), g.Fn(Fresh())):
        op, _ = gen.op(ctx())
        assert op is made[-1] and "process" in op and "time" in op
    for gen in (g.rate(10, g.mix(lambda c: template)), g.Fn(lambda c: template)):
        op, _ = gen.op(ctx())
        assert op is not template and template == {"f": "shared"} and "process" in op


def test_a_placed_op_functions_op_is_taken_as_it_is_and_an_unplaced_ones_is_filled():
    """An :class:`OpFn` that says its ops are ``placed`` (a free thread's
    process and the ask's time, as the queue workload's sends) has them
    taken as they are, unfilled and unchecked, by a rate's mix and by Fn;
    one that does not has its op filled and checked, as always (a busy
    process's op refused: PENDING)."""

    class Busy(g.OpFn):
        def __init__(self, placed):
            self.placed = placed

        def __call__(self, c):
            return {"f": "x", "process": 2, "time": 5}

    busy = ctx(free=(0, 1, "nemesis"))
    for gen in (g.rate(10, g.mix(Busy(True))), g.Fn(Busy(True))):
        op, _ = gen.op(busy)
        assert op != g.PENDING and (op["f"], op["process"]) == ("x", 2)  # a rate spaces its time, as always
    for gen in (g.rate(10, g.mix(Busy(False))), g.Fn(Busy(False))):
        assert gen.op(busy)[0] == g.PENDING
    assert g.OpFn().placed is False
