"""The active controller's broker sessions as Kafka 4.4 keeps them, and so
the order in which it fences brokers whose sessions expire together.

Kafka 4.4 (kafka-metadata 4.4.0, lines by the jar's line tables):

* ``BrokerHeartbeatTracker`` keeps each session's last contact time in a
  ``ConcurrentHashMap<BrokerIdAndEpoch, Long>`` made with no capacity
  argument (``BrokerHeartbeatTracker.java:56``), so a table of 16 bins.
  ``BrokerIdAndEpoch`` is a record ``(int id, long epoch)``
  (``BrokerIdAndEpoch.java:20``): its hash is ``31 * id + Long.hashCode(epoch)``.
* ``maybeRemoveExpired`` (``BrokerHeartbeatTracker.java:111-117``) walks
  the map's entries in iteration order and removes and returns the *first*
  expired one: one broker per call.
* An entry is put on every heartbeat the active controller receives, with
  the request's id and epoch, before the epoch is checked
  (``QuorumController.processBrokerHeartbeat``, ``QuorumController.java:1990``,
  ``ClusterControlManager.trackBrokerHeartbeat``, ``ClusterControlManager.java:559-562``),
  and on activation for every unfenced registration, all with the same
  contact time (``ClusterControlManager.activate``,
  ``ClusterControlManager.java:315-326``); not on registration, and not
  removed on unregistration or re-registration: an entry leaves the map
  only by expiring.
* ``ReplicationControlManager.maybeFenceOneStaleBroker``
  (``ReplicationControlManager.java:1769-1795``) takes that one entry: an
  unknown broker's or an earlier epoch's is only dropped, the current
  epoch's broker is fenced (already fenced or not); either way it returns
  true, and the periodic task ``maybeFenceStaleBroker`` then runs again
  after ``PeriodicTask.DEFAULT_IMMEDIATE_PERIOD_NS`` (10 ms) instead of its
  period (``PeriodicTaskControlManager.nextDelayTimeNs``;
  ``QuorumController.java:1689, 1701-1705``). Simultaneous expiries are
  fenced one per event, 10 ms apart, in the map's iteration order. When the
  task runs at all (every eighth of the session timeout, not at a
  session's deadline) is :mod:`.fencing_task`'s.

Java's ``ConcurrentHashMap`` (JDK 17) iterates bin by bin, bin
``spread(hash) & (n - 1)`` with ``spread(h) = (h ^ (h >>> 16)) & 0x7fffffff``,
each bin a list in insertion order (a put of a present key keeps its place);
the table doubles when the 0.75 load is reached, each bin split as
``ConcurrentHashMap.transfer`` does. (A bin of 8 entries would be treeified;
a model cluster has a handful of brokers and never comes near it.)

``ClusterControlManager.activate`` inserts the unfenced brokers in the
iteration order of ``brokerRegistrations``, a ``TimelineHashMap`` keyed by
broker id (``ClusterControlManager.java:290``, capacity 2 at first):
``BaseHashTable.findSlot`` takes the top bits of ``id * -7046029254386353131``
(Fibonacci hashing), the table doubles before an add that would pass 0.75
load, and ``SnapshottableHashTable.CurrentIterator`` yields each slot's
entries last first. Only the order of brokers that share a bin of the
tracker's map depends on it.

Pure values, no clock: the caller passes monotonic times.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

#: a broker's session key: (broker id, broker epoch)
IdAndEpoch = tuple[int, int]


_CHM_INITIAL_TABLE = 16  # ConcurrentHashMap.DEFAULT_CAPACITY
_TIMELINE_MIN_CAPACITY = 2  # BaseHashTable.MIN_CAPACITY, TimelineHashMap(registry, 0)
_FIBONACCI = -7046029254386353131  # BaseHashTable.findSlot
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _int32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x & 0x80000000 else x


def broker_id_and_epoch_hash(broker_id: int, epoch: int) -> int:
    """``BrokerIdAndEpoch.hashCode()``: a record's hash, ``31 * h(id) +
    h(epoch)`` in int arithmetic, ``Long.hashCode(e) = (int)(e ^ (e >>> 32))``."""
    e = epoch & _MASK64
    return _int32(31 * broker_id + _int32(e ^ (e >> 32)))


def chm_spread(h: int) -> int:
    """``ConcurrentHashMap.spread``: the high half folded into the low, sign bit cleared."""
    u = h & _MASK32
    return (u ^ (u >> 16)) & 0x7FFFFFFF


@dataclass
class JavaConcurrentHashMapOrder:
    """The layout of a ``ConcurrentHashMap<BrokerIdAndEpoch, ?>``'s keys:
    enough to give its iteration order after any puts and removes."""

    bins: list[list[IdAndEpoch]] = field(default_factory=lambda: [[] for _ in range(_CHM_INITIAL_TABLE)])
    size: int = 0

    def _bin(self, key: IdAndEpoch, n: int) -> int:
        return chm_spread(broker_id_and_epoch_hash(*key)) & (n - 1)

    def put(self, key: IdAndEpoch) -> None:
        """``putVal``: a new key goes to the tail of its bin; then ``addCount``
        doubles the table once the count reaches ``sizeCtl`` (0.75 n)."""
        chain = self.bins[self._bin(key, len(self.bins))]
        if key in chain:
            return
        chain.append(key)
        self.size += 1
        n = len(self.bins)
        if self.size >= n - (n >> 2):
            self._transfer()

    def remove(self, key: IdAndEpoch) -> None:
        chain = self.bins[self._bin(key, len(self.bins))]
        if key in chain:
            chain.remove(key)
            self.size -= 1

    def _transfer(self) -> None:
        """``ConcurrentHashMap.transfer`` for list bins: the run of nodes from
        ``lastRun`` (the last change of the new bit) keeps its order; the nodes
        before it are pushed, so they come out reversed, ahead of that run."""
        n = len(self.bins)
        new: list[list[IdAndEpoch]] = [[] for _ in range(2 * n)]
        for i, chain in enumerate(self.bins):
            if not chain:
                continue
            bits = [chm_spread(broker_id_and_epoch_hash(*k)) & n for k in chain]
            last = 0
            for j in range(1, len(chain)):
                if bits[j] != bits[j - 1]:
                    last = j
            lo: list[IdAndEpoch] = chain[last:] if bits[last] == 0 else []
            hi: list[IdAndEpoch] = chain[last:] if bits[last] != 0 else []
            for j in range(last):
                if bits[j] == 0:
                    lo.insert(0, chain[j])
                else:
                    hi.insert(0, chain[j])
            new[i], new[i + n] = lo, hi
        self.bins = new

    def __iter__(self) -> Iterator[IdAndEpoch]:
        for chain in self.bins:
            yield from chain


def kafka_expiry_order(inserted: Iterable[IdAndEpoch]) -> list[IdAndEpoch]:
    """The order in which Kafka 4.4's tracker fences these sessions if they
    all expire together: its map's iteration order, given the order in
    which the keys were first put into a fresh map (no removals between)."""
    chm = JavaConcurrentHashMapOrder()
    for key in inserted:
        chm.put(key)
    return list(chm)


def timeline_hash_map_order(ids: Iterable[int]) -> list[int]:
    """The iteration order of a ``TimelineHashMap`` keyed by these broker
    ids, added in this order (``ClusterControlManager.brokerRegistrations``;
    re-registrations replace an entry in place and are not replayed here)."""
    elements: list[list[int]] = [[] for _ in range(_TIMELINE_MIN_CAPACITY)]
    size = 0

    def slot(i: int, n: int) -> int:
        shift = 65 - n.bit_length()  # 65 - (32 - numberOfLeadingZeros(n))
        return ((i * _FIBONACCI) & _MASK64) >> shift

    for i in ids:
        if (size + 1) * 0.75 > len(elements):  # baseAddOrReplace grows first
            grown: list[list[int]] = [[] for _ in range(2 * len(elements))]
            for old in elements:  # rehash: slot by slot, appended in order
                for x in old:
                    grown[slot(x, len(grown))].append(x)
            elements = grown
        s = elements[slot(i, len(elements))]
        if i not in s:
            s.append(i)
            size += 1
    return [x for s in elements for x in reversed(s)]  # CurrentIterator: last first


@dataclass
class BrokerHeartbeatTracker:
    """Kafka 4.4's ``BrokerHeartbeatTracker`` on the model's clock: each
    (broker id, broker epoch) session's deadline (its last contact plus the
    session timeout), iterated as Kafka's map iterates."""

    deadlines: dict[IdAndEpoch, int] = field(default_factory=dict)
    order: JavaConcurrentHashMapOrder = field(default_factory=JavaConcurrentHashMapOrder)

    def touch(self, key: IdAndEpoch, deadline: int) -> None:
        """``updateContactTime``: a put (a present key keeps its place)."""
        self.deadlines[key] = deadline
        self.order.put(key)

    def has_valid_session(self, key: IdAndEpoch, mono_now: int) -> bool:
        d = self.deadlines.get(key)
        return d is not None and d > mono_now

    def remove_expired(self, mono_now: int) -> IdAndEpoch | None:
        """``maybeRemoveExpired``: remove and return the first expired entry
        in the map's iteration order, or None. Kafka's test is strict
        (``contact + timeout < now``, ``BrokerHeartbeatTracker.java:132``);
        the model's run at a whole millisecond stands for one an instant
        after it, so a deadline equal to the run's time has passed
        (:mod:`.fencing_task`)."""
        for key in self.order:
            if self.deadlines[key] <= mono_now:
                self.order.remove(key)
                del self.deadlines[key]
                return key
        return None

    def next_deadline(self) -> int | None:
        # a native loop over the ints: compiled, min() over a dict view is a
        # builtins lookup and a generic call (after every controller call)
        if not self.deadlines:
            return None
        best = 0
        first = True
        for at in self.deadlines.values():
            if first or at < best:
                best = at
                first = False
        return best


__all__ = [
    "BrokerHeartbeatTracker",
    "JavaConcurrentHashMapOrder",
    "broker_id_and_epoch_hash",
    "chm_spread",
    "kafka_expiry_order",
    "timeline_hash_map_order",
]
