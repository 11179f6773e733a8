"""Simulated consumers as the queue workload's real ones read
(``workloads.queue.QueueClient``): ``assign`` + ``poll`` from the process's
own positions (a broker serves only offsets below the HW), and the final
read of one key from offset 0 by a fresh consumer.

A poll fetches once per leader of its partitions (``fetch.wait.max.ms``
long-polled by the broker) and completes ``ok`` with what it read; a
position the log no longer has (OFFSET_OUT_OF_RANGE: librdkafka's
``auto.offset.reset=error``) is recorded in ``resets`` and the position
moves to the high watermark. Group members (``--sub-via subscribe``) are
:mod:`reference_impl.sim.groups`.

Consumers record nothing: their owner records the completion they hand
back (``done(result)``, the fields a real client's ``invoke`` returns).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Final, cast

import orjson

from reference_impl.core.messages import (
    Batch,
    ClientFetchRequest,
    ClientFetchResponse,
    Errors,
    FetchPartitionRequest,
    FetchPartitionResponse,
    TopicPartition,
)

from .endpoint import (
    ClientConfig,
    Endpoint,
    MetadataCache,
    Partitions,
    ReplyHandler,
    complete_ok_json,
    error_name,
)
from .network import ConnectionLost

if TYPE_CHECKING:
    from .simulation import Simulation

#: ``done(result)``: the completion's fields (type, value, error, extras)
PollDone = Callable[[dict[str, Any]], None]

#: bound once (compiled, a Final is a static, where ``orjson.dumps`` was a
#: module attribute looked up by name at every use)
_dumps: Final = orjson.dumps

#: how many offsets past the last one read RecordPairs keeps room for (a
#: free slot is None in both lists: not read yet, nothing noted)
_GROW: Final = 256


class _Fetch:
    """The fetch of ``parts`` a consumer sends one leader, made once the
    endpoint has given it a ref (a native callable, where a partial was a
    generic object and an argument parse, a few per poll)."""

    def __init__(self, parts: tuple[FetchPartitionRequest, ...], max_wait_ms: int) -> None:
        self.parts = parts
        self.max_wait_ms = max_wait_ms

    def __call__(self, ref: Any) -> ClientFetchRequest:
        return ClientFetchRequest(ref, self.parts, max_wait_ms=self.max_wait_ms)


class _Poll(ReplyHandler):
    """The poll a consumer has in flight: what it has read so far, how many
    fetches are out, what went wrong. It is also each of its fetches' answer
    callback, handing the answer to its consumer with the poll's generation
    (a native callable: one object per poll, where each fetch made one)."""

    def __init__(self, consumer: "Consumer", keys: "_Keys", gen: int, done: PollDone, crash: int) -> None:
        self.consumer = consumer
        self.keys = keys
        self.tps = keys.tps
        self.gen = gen
        self.done = done
        self.crash = crash
        #: key -> the records read of it, every key polled listed from
        #: the start in the poll's order (its partitions' order, key order
        #: nearly always: then a poll that read every key is its own value,
        #: see Consumer._complete)
        self.got: dict[str, list[list[Any]]] = {k: [] for k in keys.keys}
        #: :attr:`RecordPairs.rewrites` when the poll began (see poll_json)
        self.rewrites = consumer.pairs.rewrites
        self.outstanding = 0
        self.resets: list[str] = []
        self.errors: set[str] = set()

    def reply(self, msg: Any) -> None:
        self.consumer._on_fetch(self.gen, msg)


class _Keys:
    """The keys (``topic-N``) of a list of partitions a consumer polls,
    spelt once per list, not per poll: each poll's value is keyed by them
    and each fetched partition finds its key, three times a poll for every
    consumer. The consumers replace their partition lists and never change
    one in place (:meth:`Consumer.poll` holds the one it was spelt for)."""

    def __init__(self, tps: list[TopicPartition]) -> None:
        self.tps = tps
        #: ``str(tp)`` of each partition, in the list's order
        self.keys = [str(tp) for tp in tps]
        d = dict.fromkeys(self.keys)
        #: how many distinct keys, and whether in key order (a poll's value
        #: with just these keys is then in order: Consumer._complete)
        self.n = len(d)
        self.in_order = _in_order(d)
        #: key -> its partition (:meth:`RecordPairs.poll_json`)
        self.tp_of: dict[str, TopicPartition] = {k: tp for k, tp in zip(self.keys, tps)}

    def key(self, tp: TopicPartition) -> str:
        """``str(tp)``: the key of its place if ``tp`` is the very object
        listed (what a fetch's answer names), else spelt anew."""
        tps = self.tps
        for j in range(len(tps)):
            if tps[j] is tp:
                return self.keys[j]
        return str(tp)


class RecordPairs:
    """The ``[offset, value]`` pairs the consumers of a run read, one list
    object per record of a partition, made when the first consumer reads
    the record and shared by every later read of it (:meth:`take`).

    Each of the queue workload's threads polls every key from its own
    positions, so each record is read by every consumer (32 of them in
    bench/sim_speed.py): a pair (a list and a boxed offset) made per read
    was a tenth of the event loop. A shared pair is read only: nothing
    downstream (the history recorder, the checkers) changes a poll's pairs.
    A pair stands for its offset while a read finds the same value there;
    an offset rewritten with another value (a truncated log written again)
    gets a new pair, so what a poll records is what it read.

    The pairs are also kept spelt as a history line spells them (each
    one's JSON, one after another, in a :class:`_Spelt` per partition,
    made when a poll first needs it): a poll's value is its line's bulk,
    and the records in it, each read by every consumer, were encoded anew
    for every poll that read them. A poll's value is written from the runs
    of it that its keys read (:meth:`poll_json`), the same bytes."""

    def __init__(self) -> None:
        #: partition -> pair by offset (None: not read yet)
        self.by_tp: dict[TopicPartition, list[list[Any] | None]] = {}
        #: a partition's key -> its pairs spelt (:class:`_Spelt`)
        self.spelt: dict[str, _Spelt] = {}
        #: how many times a pair was replaced (an offset read again with
        #: another value) or every pair forgotten: a poll that began under
        #: another count may hold a pair no longer the one spelt
        self.rewrites = 0
        #: partition -> by offset, the batch whose value the pair there was
        #: last checked against, if a one-record batch (None: not yet, or
        #: an offset of a longer batch): a batch read again (the
        #: same object, as a leader's log hands it out) finds its pair
        #: without comparing values
        self.checked: dict[TopicPartition, list[Batch | None]] = {}

    def clear(self) -> None:
        self.by_tp.clear()
        self.checked.clear()
        self.spelt.clear()
        self.rewrites += 1

    def take(self, pr: FetchPartitionResponse, pos: int, out: list[list[Any]]) -> int:
        """Append the records of a fetched partition at or past ``pos`` to
        ``out``, each ``[offset, value]``; return the new position. Every
        consumer reads every record, so the loop is kept lean (and typed: an
        untyped ``pr`` made every attribute a generic lookup, ~2,000
        instructions a record).

        The simulated producer sends one record a batch, and each of the
        run's consumers reads each batch object of the leader's log: a
        one-record batch whose pair was last checked against this very
        batch (a batch is never changed once made) is taken as it is. Any
        other batch is checked record by record against the pairs, which
        then note it (a pair a batch of another value replaced notes that
        batch instead, so a stale note never stands for it)."""
        tp = pr.tp
        seen = self.by_tp.get(tp)
        if seen is None:
            seen = self.by_tp[tp] = []
            checked = self.checked[tp] = []
        else:
            checked = self.checked[tp]
        n = len(checked)  # grows only in _check
        batches = pr.batches
        # A read nearly always fetches from its position the records other
        # consumers read before it, then the few written since: the run of
        # fetched batches each noted at its place is taken at once. A note
        # stands only for a one-record batch at its own offset (see
        # _check), so i batches noted at offsets p..p+i-1 are those i
        # records, each one the per-batch path below takes as it is: their
        # pairs are ``seen[p:p + i]``, and that path reads the rest. 32
        # consumers read every batch: the per-batch path's attribute reads
        # and checks were ~100 instructions a batch a read, an identity
        # test here a few dozen.
        k = len(batches)
        if k:
            p = batches[0].base_offset
            if p >= pos:
                if k > n - p:
                    k = n - p
                i = 0
                while i < k and checked[p + i] is batches[i]:
                    i += 1
                if i:
                    out.extend(cast("list[list[Any]]", seen[p:p + i]))
                    pos = p + i
                    batches = batches[i:]
        # the pairs of a run of such batches at consecutive offsets go to
        # ``out`` as one slice (an append per record was most of the loop)
        start = -1
        stop = -1
        for b in batches:
            base = b.base_offset
            count = b.count
            end = base + count
            if count == 1 and pos <= base < n and checked[base] is b:
                # a batch is noted only where it left a pair: seen[base] is one
                if base != stop:
                    if start >= 0:
                        out.extend(cast("list[list[Any]]", seen[start:stop]))
                    start = base
                stop = end
                pos = end
            elif end > pos:
                if start >= 0:
                    out.extend(cast("list[list[Any]]", seen[start:stop]))
                    start = -1
                    stop = -1
                self._check(b, seen, checked, pos, out, tp)
                n = len(checked)
                pos = end
        if start >= 0:
            out.extend(cast("list[list[Any]]", seen[start:stop]))
        return pos

    def _check(self, b: Batch, seen: list[list[Any] | None], checked: list[Batch | None], pos: int,
               out: list[list[Any]], tp: TopicPartition) -> None:
        """The records of ``b`` at or past ``pos``, each checked against its
        pair (made anew if missing or of another value) and appended to
        ``out``; the offset of a one-record batch notes ``b`` as the batch
        its pair was checked against, each offset of a longer batch notes
        none (a note stands for one record at its own offset: ``take``
        takes a run of notes as that many records). A pair replaced is
        counted (:attr:`rewrites`) and its partition's spelling cut there."""
        payload = b.payload
        base = b.base_offset
        count = b.count
        n = len(payload) if payload is not None else 0
        end = base + count
        if len(seen) < end:
            # room for a few hundred records more: a partition's log grows a
            # record at a time, and growing the lists by one each time was
            # two lists made and two extends per record
            grow = end - len(seen) + _GROW
            seen.extend([None] * grow)
            checked.extend([None] * grow)
        note = b if count == 1 else None
        for i in range(pos - base if pos > base else 0, count):
            v = payload[i] if i < n else None
            p = seen[base + i]
            if p is None or (p[1] is not v and p[1] != v):
                if p is not None:
                    self.rewrites += 1
                    spelt = self.spelt.get(str(tp))
                    if spelt is not None:
                        spelt.cut(base + i)
                p = [base + i, v]
                seen[base + i] = p
            checked[base + i] = note
            out.append(p)


    def poll_json(self, got: dict[str, list[list[Any]]], keys: "_Keys", rewrites: int) -> bytes | None:
        """``orjson.dumps([["poll", got]])`` of a poll that began when
        :attr:`rewrites` was ``rewrites``, written from the spelling of the
        pairs it read; None when it cannot be (orjson refuses a pair, a
        key's pairs are not one run of offsets, a pair was replaced since
        the poll began, a key not of the poll's partitions: the line is
        encoded whole, as any line).

        Each key's pairs are those :meth:`take` found at their offsets
        (``seen[x]``), in offset order; ``n`` of them from offset ``a`` to
        ``a + n - 1`` are every offset of that run, and with no pair
        replaced since, they are the very pairs there now, whose spelling
        the run of the partition's :class:`_Spelt` is. That last is also
        checked, pair by pair (by identity: a pointer comparison each), so
        the value never rests on the argument alone."""
        if rewrites != self.rewrites:
            return None
        if not got:
            return _POLL_EMPTY
        parts: list[bytes | bytearray] = []
        first = True
        for k, pairs in got.items():
            spelt = self.spelt.get(k)
            if spelt is None:
                tp = keys.tp_of.get(k)
                if tp is None:
                    return None
                seen = self.by_tp.get(tp)
                if seen is None:
                    seen = self.by_tp[tp] = []
                    self.checked[tp] = []
                spelt = self.spelt[k] = _Spelt(k, seen)
            parts.append(spelt.opens if first else spelt.follows)
            first = False
            n = len(pairs)
            if n:
                a: int = pairs[0][0]
                last: int = pairs[n - 1][0]  # typed: the sum below is native, not Python's protocol
                b = last + 1
                if b - a != n:
                    return None
                # each pair the very one at its offset, so the run's spelling
                # is this poll's, whatever order ``take`` left them in
                seen = spelt.seen
                if len(seen) < b:
                    return None
                i = 0
                while i < n:
                    if seen[a + i] is not pairs[i]:
                        return None
                    i += 1
                run = spelt.run(a, b)
                if run is None:
                    return None
                parts.append(run)
        parts.append(_POLL_CLOSE)
        return b"".join(parts)


#: a poll's value that read no key, and the end of one that did
_POLL_EMPTY: Final = b'[["poll",{}]]'
_POLL_CLOSE: Final = b"]}]]"


class _Spelt:
    """The JSON of a partition's pairs (``seen``) from offset :attr:`lo`
    on, one after another, each followed by a comma (``buf``), and where
    each begins (``starts``): the JSON of the pairs of a run of offsets is
    one slice of it (:meth:`run`), each pair encoded once for the run,
    where every poll that read it encoded it again (each record is read by
    every consumer). Kept by the partition's key, with the key's own JSON
    as a poll's value spells it first (``opens``) or after another key's
    records (``follows``)."""

    def __init__(self, key: str, seen: list[list[Any] | None]) -> None:
        self.seen = seen
        kj = _dumps(key)
        self.opens: bytes = b'[["poll",{' + kj + b":["
        self.follows: bytes = b"]," + kj + b":["
        self.lo = 0
        self.starts: list[int] = []
        self.buf = bytearray()

    def cut(self, x: int) -> None:
        """The pair at offset ``x`` was replaced: nothing from there on is
        spelt any more."""
        i = x - self.lo
        if i < len(self.starts):
            if i <= 0:
                self.starts.clear()
                self.buf.clear()
            else:
                del self.buf[self.starts[i]:]
                del self.starts[i:]

    def run(self, a: int, b: int) -> bytearray | None:
        """The JSON of ``seen[a:b]`` (pairs, none missing), comma-separated,
        spelling the pairs not spelt yet; None if orjson refuses one. A run
        that starts before the spelt one, or past its end with offsets
        no pair was read at between, starts it again at ``a``."""
        starts = self.starts
        buf = self.buf
        seen = self.seen
        lo = self.lo
        m = lo + len(starts)
        if a < lo or not starts:
            self.lo = lo = a
            starts.clear()
            buf.clear()
            m = a
        while m < b:
            p = seen[m]
            if p is None:
                if m >= a:
                    return None  # not a pair read (the caller's run says otherwise)
                self.lo = lo = a  # a gap before the run: spelt again from it
                starts.clear()
                buf.clear()
                m = a
                continue
            try:
                j = _dumps(p)
            except TypeError:  # orjson.JSONEncodeError
                return None
            starts.append(len(buf))
            buf += j
            buf += b","
            m += 1
        end = starts[b - lo] if b < m else len(buf)
        return buf[starts[a - lo]:end - 1]


def _all_read(d: dict[str, list[list[Any]]]) -> bool:
    """Whether every key of a poll read something (nearly always: each poll
    reads every key from its own position, and every key is written to)."""
    for v in d.values():
        if not v:
            return False
    return True


def _in_order(d: dict[str, Any]) -> bool:
    """Whether ``d``'s keys are already sorted (a poll's partitions read in
    key order, nearly always): then sorting them is a list made and sorted
    for nothing, once a poll."""
    prev = ""
    first = True
    for k in d:
        if not first and k < prev:
            return False
        first = False
        prev = k
    return True


class Consumer:
    """assign() + poll(): one fetch per leader, records below the HW."""

    def __init__(self, sim: "Simulation", ep: Endpoint, tps: list[TopicPartition], topics: tuple[str, ...],
                 cfg: ClientConfig, pairs: RecordPairs | None = None) -> None:
        self.sim = sim
        self.ep = ep
        #: the run's shared record pairs (every consumer of a run reads the same records)
        self.pairs = pairs if pairs is not None else RecordPairs()
        self.tps = tps
        self.topics = topics
        self.cfg = cfg
        self.meta = MetadataCache(ep, topics, cfg)
        #: the partitions assigned (the ``assign`` op's keys), each from its position
        self.assigned: list[TopicPartition] = list(tps)
        self.positions: dict[TopicPartition, int] = {tp: 0 for tp in tps}
        self.busy = False
        self._gen = 0
        self._poll: _Poll | None = None
        #: the :attr:`Partitions.version` whose objects :attr:`assigned` and
        #: :attr:`positions` hold (-1: not yet taken)
        self._parts_seen = -1
        #: called when a poll marked to crash ends: its client dies
        self.on_crash: Callable[[], None] | None = None
        #: the keys of the partition list polled last (see _Keys)
        self._keys: _Keys | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """A fresh process's consumer begins (an assigning one: nothing to do)."""

    def reset(self) -> None:
        """A fresh client in this one's place: the poll in flight is
        forgotten, every assigned partition read again from offset 0, no
        metadata."""
        self._poll = None
        self.busy = False
        self._gen += 1
        self.meta = MetadataCache(self.ep, self.topics, self.cfg)
        self.assigned = list(self.tps)
        self.positions = {tp: 0 for tp in self.tps}
        self._parts_seen = -1

    def assign(self, tps: list[TopicPartition]) -> None:
        """Assign exactly ``tps``, each from offset 0 (``[]``: none)."""
        self.assigned = list(tps)
        self.positions = {tp: 0 for tp in tps}
        self._parts_seen = -1

    def _adopt(self, parts: Partitions) -> None:
        """Hold the shared partition objects (:class:`Partitions`, the
        brokers' once known) in place of equal ones: the fetches then name
        the brokers' objects and the answers find their positions by
        identity. Same partitions, same order, same positions."""
        self._parts_seen = parts.version
        self.assigned = [parts.canon(tp) for tp in self.assigned]
        self.positions = {parts.canon(tp): pos for tp, pos in self.positions.items()}

    # -- polls -------------------------------------------------------------------------------------
    def partitions(self) -> list[TopicPartition]:
        return self.assigned

    def poll(self, done: PollDone, crash: int = -1) -> bool:
        if self.busy:
            return False
        self.busy = True
        self._gen += 1
        parts = self.ep.parts
        if parts is not None and parts.version != self._parts_seen:
            self._adopt(parts)
        tps = self.partitions()
        keys = self._keys
        if keys is None or keys.tps is not tps:
            keys = self._keys = _Keys(tps)
        self._poll = _Poll(self, keys, self._gen, done, crash)
        if crash >= 0:
            self.sim.loop.after(crash, self._crash, self._gen)
        self._round(self._gen)
        return True

    def _crash(self, gen: int) -> None:
        """The client dies mid-poll: the poll is ``info``."""
        st = self._poll
        if st is not None and st.gen == gen:
            self._crashed(st)

    def _crashed(self, st: _Poll) -> None:
        self._poll = None
        self.busy = False
        if self.on_crash is not None:
            self.on_crash()
        st.done({"type": "info", "error": "crashed"})

    def _round(self, gen: int) -> None:
        st = self._poll
        if st is None or st.gen != gen:
            return
        # the leaders in ascending order, each with its partitions in the
        # poll's order (one fetch per leader, sent in leader order): kept
        # sorted as they are found, in two short lists, where a dict of
        # them, sorted at the end, cost a dict, a sort and a list (~2,000
        # instructions a poll, every consumer polling every key)
        leaders: list[int] = []
        groups: list[list[TopicPartition]] = []
        missing = False
        meta = self.meta
        for tp in st.tps:
            leader = meta.leader(tp)
            if leader < 0:
                missing = True
                continue
            j = 0
            n = len(leaders)
            while j < n and leaders[j] < leader:
                j += 1
            if j < n and leaders[j] == leader:
                groups[j].append(tp)
            elif j == n:
                leaders.append(leader)
                groups.append([tp])
            else:
                leaders.insert(j, leader)
                groups.insert(j, [tp])
        if not leaders:
            if missing and not st.errors:
                st.errors.add("no-leader")
                self.meta.refresh(partial(self._round, gen))
            else:
                self._complete(st)
            return
        cfg = self.cfg
        positions = self.positions
        ep = self.ep
        st.outstanding = len(leaders)
        for j in range(len(leaders)):
            group = groups[j]
            parts: tuple[FetchPartitionRequest, ...]
            if len(group) == 1:  # a tuple of one, without a generator object
                tp = group[0]
                parts = (FetchPartitionRequest(tp, positions[tp]),)
            else:
                parts = tuple([FetchPartitionRequest(tp, positions[tp]) for tp in group])
            # the request made here, given its ref (Endpoint.new_ref), where
            # a factory object made it when the endpoint called it
            ref = ep.new_ref()
            ep.send_request(leaders[j], ref, ClientFetchRequest(ref, parts, max_wait_ms=cfg.fetch_max_wait_ms), st,
                            cfg.fetch_max_wait_ms + cfg.request_timeout_ms)

    def _on_fetch(self, gen: int, msg: Any) -> None:
        st = self._poll
        if st is None or st.gen != gen:
            return
        st.outstanding -= 1
        if isinstance(msg, ClientFetchResponse):
            for pr in msg.partitions:
                tp = pr.tp
                if pr.error == Errors.NONE:
                    key = st.keys.key(tp)
                    out = st.got.get(key)
                    if out is None:  # not setdefault: compiled, it made a list per partition read
                        out = st.got[key] = []
                    self.positions[tp] = self.pairs.take(pr, self.positions.get(tp, 0), out)
                elif pr.error == Errors.OFFSET_OUT_OF_RANGE:
                    # auto.offset.reset=error: the reset is recorded, and the
                    # position moves to the log's end (the real client's skip)
                    pos = self.positions.get(tp, 0)
                    st.resets.append(f"{tp}@{pos}:OFFSET_OUT_OF_RANGE")
                    to = max(0, pr.high_watermark)
                    self.positions[tp] = to if to < pos else pos
                else:
                    st.errors.add(error_name(pr.error))
                    self.meta.invalidate(tp)
        else:
            st.errors.add(msg.error if isinstance(msg, ConnectionLost) else "fetch-timeout")
            for tp in st.tps:
                self.meta.invalidate(tp)
        if st.outstanding > 0:
            return
        self._complete(st)

    def _complete(self, st: _Poll) -> None:
        if st.crash >= 0:  # it ended, but its client died before learning it
            self._crashed(st)
            return
        read = st.got
        got: dict[str, list[list[Any]]]
        keys = st.keys
        # no key but the listed ones: in order if they are (a fetch's answer
        # naming another partition adds its key at the end)
        in_order = keys.in_order if len(read) == keys.n else _in_order(read)
        if in_order and _all_read(read):
            got = read  # what the comprehension below would copy, key for key
        else:
            got = {k: read[k] for k in (read if in_order else sorted(read)) if read[k]}
        extra: dict[str, Any] = {}
        if st.resets:
            extra["resets"] = st.resets
        self._finish(st, got, extra)

    def _finish(self, st: _Poll, got: dict[str, list[list[Any]]], extra: dict[str, Any]) -> None:
        """Complete the poll ``ok`` with what it read (and, for the
        history's line, its value's JSON: :meth:`RecordPairs.poll_json`)."""
        self._poll = None
        self.busy = False
        if extra:
            st.done({"type": "ok", "value": [["poll", got]], **extra})
        else:
            complete_ok_json(st.done, [["poll", got]], self.pairs.poll_json(got, st.keys, st.rewrites))

    def final_read(self, tp: TopicPartition, upto: int, done: PollDone) -> None:
        """Read ``tp`` from offset 0 with a fresh consumer (:class:`FinalRead`)."""
        FinalRead(self.sim, self.ep, self.topics, self.cfg, tp, upto, done, self.pairs).round()


class FinalRead:
    """One key read from offset 0 by a fresh consumer until the highest
    acknowledged offset (``upto``) is covered, or the log's end is reached
    and stays put for a while, or the deadline passes: the real client's
    final read (``QueueClient._final_read``). ``ok`` if it covered ``upto``
    or reached the log's end (acknowledged offsets beyond it are missing
    from the log), ``info`` if the partition never answered."""

    def __init__(self, sim: "Simulation", ep: Endpoint, topics: tuple[str, ...], cfg: ClientConfig,
                 tp: TopicPartition, upto: int, done: PollDone, pairs: RecordPairs | None = None) -> None:
        self.sim, self.ep, self.cfg, self.tp, self.upto, self.done = sim, ep, cfg, tp, upto, done
        self.pairs = pairs if pairs is not None else RecordPairs()
        self.meta = MetadataCache(ep, topics, cfg)
        self.pos = 0
        self.reads: list[list[Any]] = []
        #: offsets read, kept once a reset reads the log again from its
        #: start (None before: every record read so far is at an offset
        #: past the ones before it, see _on_fetch)
        self.seen: set[int] | None = None
        self.resets: list[str] = []
        self.reached_end = False
        self.stable_since = -1
        self.deadline = sim.now + cfg.final_read_timeout_ms
        #: how long the log's end must stay below ``upto`` before the read accepts it
        self.settle_ms = min(5000, cfg.final_read_timeout_ms // 3)
        self.finished = False

    def round(self) -> None:
        if self.finished:
            return
        if self.sim.now >= self.deadline:
            self._finish()
            return
        leader = self.meta.leader(self.tp)
        if leader < 0:
            self.meta.refresh(self._after_refresh)
            return
        cfg = self.cfg
        parts = (FetchPartitionRequest(self.tp, self.pos),)
        self.ep.request(leader, _Fetch(parts, cfg.fetch_max_wait_ms), self._on_fetch,
                        cfg.fetch_max_wait_ms + cfg.request_timeout_ms)

    def _after_refresh(self) -> None:
        if self.meta.leader(self.tp) < 0:
            self.sim.loop.after(self.cfg.retry_backoff_ms, self.round)
        else:
            self.round()

    def _on_fetch(self, msg: Any) -> None:
        if self.finished:
            return
        pr = msg.partitions[0] if isinstance(msg, ClientFetchResponse) and msg.partitions else None
        if pr is None or pr.error not in (Errors.NONE, Errors.OFFSET_OUT_OF_RANGE):
            self.meta.invalidate(self.tp)
            self.stable_since = -1
            self.sim.loop.after(self.cfg.retry_backoff_ms, self.round)
            return
        if pr.error == Errors.OFFSET_OUT_OF_RANGE:
            if self.seen is None:
                self.seen = {rec[0] for rec in self.reads}
            self.resets.append(f"{self.tp}@{self.pos}:OFFSET_OUT_OF_RANGE")
            self.pos = 0
            self.round()
            return
        got: list[list[Any]] = []
        self.pos = self.pairs.take(pr, self.pos, got)
        seen = self.seen
        if seen is None:
            # no reset yet: the position only moved forward, and a read
            # takes records at or past it in offset order, so each record
            # is at an offset past every one read before (RecordPairs.take):
            # none is read twice and the reads are in order, taken as they
            # are, where a test and an add per record (the whole log, for
            # each key) found nothing to skip
            self.reads.extend(got)
        else:
            for rec in got:
                if rec[0] not in seen:
                    seen.add(rec[0])
                    self.reads.append(rec)
        if self.pos >= pr.high_watermark:
            self.reached_end = True
            if self.pos > self.upto:
                self._finish()
                return
            # the log ends below acknowledged offsets: wait a little in case a
            # leader is still catching up, then accept
            if self.stable_since < 0:
                self.stable_since = self.sim.now
            elif self.sim.now - self.stable_since > self.settle_ms:
                self._finish()
                return
        else:
            self.stable_since = -1
        self.round()

    def _finish(self) -> None:
        self.finished = True
        caught_up = self.pos > self.upto
        if self.seen is not None:  # without a reset the reads are in order already (see _on_fetch)
            self.reads.sort()
        res: dict[str, Any] = {"type": "ok" if caught_up or self.reached_end else "info",
                               "value": [["poll", {str(self.tp): self.reads}]], "caught_up": caught_up}
        if res["type"] == "info":
            res["error"] = "final-read-incomplete: partition unreadable until the deadline"
        if self.resets:
            res["resets"] = self.resets
        self.done(res)
