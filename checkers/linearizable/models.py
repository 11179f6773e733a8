"""Sequential specifications for the linearizability checker.

A model is the single-threaded datatype a concurrent history is checked
against. Each model is a small class with

``init()``                 the initial state (hashable)
``step(state, op)``        ``(ok, new_state)``; ``op`` is ``(f, value)`` with
                           ``value`` already normalised by :func:`freeze`
``split(f, value)``        the op's pieces per independent key, as
                           ``[(key, f, value), ...]`` (P-compositionality:
                           Herlihy & Wing's locality — a history is
                           linearizable iff every per-object sub-history is)
``is_noop(f, value)``      the op succeeds in every state and changes none, so
                           it constrains nothing and may be dropped (sound: it
                           can always be placed inside its own interval)
``read_only(f, value)``    the op never changes the state; a *crashed* such op
                           may be dropped since "never happened" is allowed
``failed(f, value)``       what a ``fail`` completion means (default: nothing)

States are interned to ints by the search, so a state only has to be hashable;
small immutable values (ints, tuples, frozensets) keep that cheap.

Value conventions follow Knossos (``knossos.model``) for the register family
and Porcupine's kv model for ``kv``; see each class.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Hashable

from .lookahead import PrefixIndex, ScanIndex

__all__ = [
    "Model",
    "ModelError",
    "Register",
    "CASRegister",
    "MultiRegister",
    "Mutex",
    "SetModel",
    "FIFOQueue",
    "KV",
    "KafkaLog",
    "MODELS",
    "make_model",
    "freeze",
]


class ModelError(ValueError):
    """An operation's shape does not fit the model (bad input, not a violation)."""


_PLAIN = (str, int, float, bool, bytes, type(None))
_PLAIN_SET = frozenset(_PLAIN)


def _name(x: Any) -> Any:
    """EDN keywords/symbols (``edn_format``) become their bare name."""
    if type(x) in _PLAIN:
        return x
    n = getattr(x, "name", None)
    if isinstance(n, str) and type(x).__name__ in ("Keyword", "Symbol"):
        return n
    return x


def freeze(x: Any) -> Hashable:
    """Normalise a JSON/EDN value into a hashable one: keywords to names,
    lists to tuples, maps to sorted item tuples, sets to frozensets."""
    t = type(x)
    if t in _PLAIN:
        return x
    if t is list or t is tuple:
        return tuple([v if type(v) in _PLAIN else freeze(v) for v in x])
    x = _name(x)
    if isinstance(x, _PLAIN):
        return x
    if isinstance(x, Sequence):
        return tuple([freeze(v) for v in x])
    if isinstance(x, Mapping):
        return tuple(sorted(((freeze(k), freeze(v)) for k, v in x.items()), key=repr))
    if isinstance(x, (set, frozenset)):
        return frozenset(freeze(v) for v in x)
    return x


#: marks a wildcard state (see :meth:`Model.any_state`)
ANY = "<any>"


class Model:
    """Base class: one object, no keys, nothing droppable."""

    name = "model"

    def init(self) -> Hashable:
        raise NotImplementedError

    def init_for(self, key: Any) -> Hashable:
        """Initial state of the sub-object ``key`` (default: :meth:`init`)."""
        return self.init()

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        raise NotImplementedError

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        return [(None, f, freeze(value))]

    def is_noop(self, f: str, value: Any) -> bool:
        return False

    def read_only(self, f: str, value: Any) -> bool:
        return False

    def failed(self, f: str, value: Any) -> tuple[str, Any] | None:
        """How a ``fail`` completion is seen by the model: ``None`` (the
        default, Knossos) drops it — it did not happen; a model may instead
        map it to an observation ``(f, value)`` that did happen."""
        return None

    def refine(self, key: Any, ops: list) -> list:
        """A model's own sound rewrite of one key's sub-history (a list of
        :class:`~checkers.linearizable.prepare.LinOp`) before the search;
        the default keeps it as is."""
        return ops

    #: multi-key ops join their keys into one sub-history (union-find) instead
    #: of being projected onto each key; see :class:`MultiRegister`.
    joint_keys = False

    def any_state(self) -> Hashable | None:
        """A state standing for *every* state the object could be in (a
        wildcard that the model's ``step`` understands), or None when the
        model has none. With one, a stretch of the history can be checked
        on its own (:mod:`.windows`): whatever happened before it."""
        return None

    def is_any(self, state: Hashable) -> bool:
        """Whether ``state`` is (derived from) the wildcard: a read from it
        narrows the state instead of leaving it as it was."""
        return False

    def keyed(self) -> bool:
        """True when values are ``[key, value]``: an op that carries its key
        in a field of its own (``{"key": k, "value": v}``, Porcupine's and
        some Jepsen tests' shape) is then read as ``[k, v]``."""
        return False

    #: whether the search looks ahead (:mod:`.lookahead`) with
    #: :meth:`resets`, :meth:`reset_state`, :meth:`reaches`; off, it never asks
    looks_ahead = False

    def resets(self, f: str, value: Any) -> bool:
        """Whether the op may take the state where :meth:`reaches` did not
        foresee (kv: a put). Default: every op that is not read-only."""
        return not self.read_only(f, value)

    def reset_state(self, f: str, value: Any) -> Hashable | None:
        """The state a resetting op leaves whatever the state before it
        (kv: a put's value), or None when that depends on the state before."""
        return None

    def reaches(self, state: Hashable, f: str, value: Any) -> bool:
        """Whether ops that do not :meth:`reset <resets>` can take ``state``
        to one in which the read-only op ``(f, value)`` succeeds (no means no
        linearization goes on from ``state`` while that read is to come with
        no reset before it). Default: yes."""
        return True

    def observer_index(self, observed: list[tuple[str, Any]]) -> ScanIndex:
        """Which of the read-only ops ``observed`` a state can reach, as a
        bitset (see :mod:`.lookahead`); default: :meth:`reaches` on each."""
        return ScanIndex(observed, self.reaches)


def _independent_split(independent: bool, f: str, value: Any) -> list[tuple[Any, str, Any]]:
    """Jepsen ``independent`` values are ``[key, value]`` tuples."""
    if not independent:
        return [(None, f, freeze(value))]
    v = freeze(value)
    if not isinstance(v, tuple) or len(v) != 2:
        raise ModelError(f"independent {f} value must be [key, value], got {value!r}")
    return [(v[0], f, v[1])]


class Register(Model):
    """Knossos ``register``: ``write v`` sets; ``read v`` must see the current
    value, and a read of nil is an unknown read that always succeeds.

    ``nil_read="value"`` instead treats nil as the value "no value yet" (the
    register's initial nil), as Porcupine's etcd model does."""

    name = "register"
    FS = ("read", "write")

    def __init__(self, initial: Any = None, independent: bool = False,
                 nil_read: str = "any") -> None:
        if nil_read not in ("any", "value"):
            raise ModelError(f"nil_read must be 'any' or 'value', got {nil_read!r}")
        self.initial = freeze(initial)
        self.independent = independent
        self.nil_any = nil_read == "any"

    def init(self) -> Hashable:
        return self.initial

    def keyed(self) -> bool:
        return self.independent

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f not in self.FS:
            raise ModelError(f"{self.name} has no operation {f!r} (expected {'/'.join(self.FS)})")
        return _independent_split(self.independent, f, value)

    def is_noop(self, f: str, value: Any) -> bool:
        return f == "read" and value is None and self.nil_any

    def read_only(self, f: str, value: Any) -> bool:
        return f == "read"

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        f, v = op
        if f == "write":
            return True, v
        if f == "read":
            return ((v is None and self.nil_any) or v == state), state
        return False, state


class CASRegister(Register):
    """Knossos ``cas-register``: read (value or nil = unknown), write v, and
    ``cas [old new]`` which succeeds only if the register holds ``old``. A
    cas that completed ``fail`` did not happen and never reaches the model.

    ``failed_cas="observed"`` instead reads a ``fail`` cas as "it ran and saw
    a value other than ``old``" (Porcupine's etcd model), which constrains the
    history further; with ``nil_read="value"`` this decides Porcupine's etcd
    histories the way Porcupine does."""

    name = "cas-register"
    FS = ("read", "write", "cas")

    def __init__(self, initial: Any = None, independent: bool = False,
                 nil_read: str = "any", failed_cas: str = "dropped") -> None:
        super().__init__(initial, independent, nil_read)
        if failed_cas not in ("dropped", "observed"):
            raise ModelError(f"failed_cas must be 'dropped' or 'observed', got {failed_cas!r}")
        self.failed_observed = failed_cas == "observed"

    def failed(self, f: str, value: Any) -> tuple[str, Any] | None:
        if self.failed_observed and f == "cas":
            return "cas-failed", value
        return None

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f == "cas-failed" and self.failed_observed:
            return _independent_split(self.independent, f, value)
        return super().split(f, value)

    def read_only(self, f: str, value: Any) -> bool:
        return f in ("read", "cas-failed")

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        f, v = op
        if f == "cas" or f == "cas-failed":
            try:
                old, new = v
            except (TypeError, ValueError):
                raise ModelError(f"cas value must be [old, new], got {v!r}") from None
            if f == "cas-failed":
                return old != state, state
            if old == state:
                return True, new
            return False, state
        return Register.step(self, state, op)


class MultiRegister(Model):
    """Knossos ``multi-register``: ``txn`` of ``[f k v]`` micro-ops with f in
    read/write; a nil read is always legal. Keys touched by one txn are joined
    into one sub-history (a txn is atomic across its keys, so projecting it
    onto single keys would be unsound); disjoint key groups are checked
    independently. The state of a group is a sorted tuple of (key, value)."""

    name = "multi-register"
    joint_keys = True

    def __init__(self, initial: dict | None = None) -> None:
        self.initial = {freeze(k): freeze(v) for k, v in (initial or {}).items()}

    def init(self) -> Hashable:
        return tuple(sorted(self.initial.items(), key=repr))

    def init_for(self, key: Any) -> Hashable:
        keys = key if isinstance(key, frozenset) else None
        items = self.initial.items() if keys is None else (
            (k, v) for k, v in self.initial.items() if k in keys)
        return tuple(sorted(items, key=repr))

    def _micro(self, value: Any) -> tuple:
        v = freeze(value)
        if not isinstance(v, tuple):
            raise ModelError(f"txn value must be a list of [f k v], got {value!r}")
        for m in v:
            if not (isinstance(m, tuple) and len(m) == 3 and m[0] in ("read", "write")):
                raise ModelError(f"txn micro-op must be [read|write k v], got {m!r}")
        return v

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f != "txn":
            raise ModelError(f"multi-register has no operation {f!r} (expected txn)")
        v = self._micro(value)
        return [(tuple(dict.fromkeys(m[1] for m in v)), f, v)]

    def is_noop(self, f: str, value: Any) -> bool:
        return all(m[0] == "read" and m[2] is None for m in value)

    def read_only(self, f: str, value: Any) -> bool:
        return all(m[0] == "read" for m in value)

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        d = dict(state)
        for f, k, v in op[1]:
            if f == "read":
                if v is not None and d.get(k) != v:
                    return False, state
            else:
                d[k] = v
        return True, tuple(sorted(d.items(), key=repr))


class Mutex(Model):
    """Knossos ``mutex``: acquire needs it free, release needs it held."""

    name = "mutex"

    def init(self) -> Hashable:
        return 0

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f not in ("acquire", "release"):
            raise ModelError(f"mutex has no operation {f!r} (expected acquire/release)")
        return [(None, f, None)]

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        if op[0] == "acquire":
            return (state == 0), 1
        return (state == 1), 0


class SetModel(Model):
    """Knossos ``set``: ``add v``; ``read`` returns the whole set."""

    name = "set"

    def init(self) -> Hashable:
        return frozenset()

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f not in ("add", "read"):
            raise ModelError(f"set has no operation {f!r} (expected add/read)")
        v = freeze(value)
        if f == "read" and v is not None:
            v = frozenset(v) if not isinstance(v, frozenset) else v
        return [(None, f, v)]

    def is_noop(self, f: str, value: Any) -> bool:
        return f == "read" and value is None

    def read_only(self, f: str, value: Any) -> bool:
        return f == "read"

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        f, v = op
        if f == "add":
            return True, state | {v}
        return (v is None or v == state), state


class FIFOQueue(Model):
    """Knossos ``fifo-queue``: ``enqueue v`` appends; ``dequeue`` must return
    the head (an empty queue cannot be dequeued: such a dequeue should have
    completed ``fail``)."""

    name = "fifo-queue"

    def init(self) -> Hashable:
        return ()

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f not in ("enqueue", "dequeue"):
            raise ModelError(f"fifo-queue has no operation {f!r} (expected enqueue/dequeue)")
        return [(None, f, freeze(value))]

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        f, v = op
        if f == "enqueue":
            return True, state + (v,)
        if not state:
            return False, state
        # A crashed dequeue carries no value: it may have taken any head.
        return (v is None or state[0] == v), state[1:]


class KV(Model):
    """Porcupine's kv model: per key a string register with ``get`` (returns
    the value, ``""`` for an unset key), ``put v`` and ``append v``. Values
    are ``[key, v]``; keys are independent sub-histories."""

    name = "kv"
    FS = ("get", "put", "append")

    def init(self) -> Hashable:
        return ""

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f not in self.FS:
            raise ModelError(f"kv has no operation {f!r} (expected get/put/append)")
        # the common value, a [key, value] list of plain values, is its own
        # frozen form (a tenth of a Porcupine kv log's check went to freeze)
        if type(value) is list and len(value) == 2 and type(value[0]) in _PLAIN_SET \
                and type(value[1]) in _PLAIN_SET:
            return [(value[0], f, value[1])]
        v = freeze(value)
        if not isinstance(v, tuple) or len(v) != 2:
            raise ModelError(f"kv value must be [key, value], got {value!r}")
        return [(v[0], f, v[1])]

    def is_noop(self, f: str, value: Any) -> bool:
        return f == "get" and value is None

    def keyed(self) -> bool:
        return True

    def read_only(self, f: str, value: Any) -> bool:
        return f == "get"

    def any_state(self) -> Hashable:
        """An unknown string: ``(ANY, suffix)`` is "something, then
        ``suffix``" — what appends to an unknown value leave."""
        return (ANY, "")

    looks_ahead = True

    def resets(self, f: str, value: Any) -> bool:
        return f == "put"

    def reset_state(self, f: str, value: Any) -> Hashable | None:
        return value if f == "put" else None

    def reaches(self, state: Hashable, f: str, value: Any) -> bool:
        """Appends only lengthen the string: a get still to come with no put
        before it reads the state followed by what was appended (from a
        wildcard: something, the suffix, then the appends)."""
        if type(value) is not str:
            return True
        if type(state) is str:
            return value.startswith(state)
        if type(state) is tuple and type(state[1]) is str:
            return state[1] in value
        return True

    def observer_index(self, observed: list[tuple[str, Any]]) -> ScanIndex:
        if all(type(v) is str for _, v in observed):
            return PrefixIndex(observed, self.reaches)
        return ScanIndex(observed, self.reaches)

    def is_any(self, state: Hashable) -> bool:
        return type(state) is tuple

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        f, v = op
        if type(state) is tuple:  # (ANY, suffix): a get tells the whole value
            if f == "get":
                return (v is None or v.endswith(state[1])), (state if v is None else v)
            if f == "put":
                return True, v
            return True, (ANY, state[1] + v)
        if f == "get":
            return (v is None or v == state), state
        if f == "put":
            return True, v
        return True, state + v


class KafkaLog(Model):
    """One Kafka topic-partition as a log, for the queue workload's micro-ops
    (``checkers/history/op.py``): ``send`` appends its value at the next
    offset — greater than every offset in the log (Kafka offsets grow
    monotonically but may skip: transaction markers, compaction; with
    ``dense=True`` it must be exactly last+1) — and ``poll``
    returns a contiguous slice of the log (consecutive entries, matching
    offsets and values). A txn applies its micro-ops on a partition
    atomically.

    Sends whose offset is unknown (crashed, or completed without an offset)
    are resolved before the search (:meth:`refine`): if a poll saw the value
    (sent once on that partition) at one offset, the send took that offset;
    if no poll ever saw it, the send is dropped — it may not have happened,
    and once every remaining send has a known offset an unseen record only
    makes polls' contiguity harder, never easier, so dropping it cannot hide
    a violation (with ``dense`` it could fill a gap, so it is kept). An
    unresolvable one (value sent twice, or seen at two
    offsets) keeps "takes last+1". Without this, every pending crashed send
    is a branch at every later configuration, exponential in their number.

    Ops are projected onto each partition they touch. Each projection of a
    linearizable history is linearizable, so a violation found on one
    partition is real; atomicity *across* partitions is not checked here (the
    queue checker's cycle analysis covers that). State: a :class:`LogState`
    chain (None for the empty log)."""

    name = "kafka-log"

    def __init__(self, dense: bool = False) -> None:
        #: dense=True: after the first record, each send takes exactly
        #: last+1 (no gaps: no transaction markers or compaction expected)
        self.dense = dense

    def init(self) -> Hashable:
        return None

    def split(self, f: str, value: Any) -> list[tuple[Any, str, Any]]:
        if f not in ("send", "poll", "txn"):
            return []
        if value is None:
            return []
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ModelError(f"{f} value must be a list of micro-ops, got {value!r}")
        per: dict[Any, list] = {}
        for m in value:
            if isinstance(m, (str, bytes)) or not isinstance(m, Sequence) or not m:
                raise ModelError(f"bad micro-op {m!r}")
            mf = _name(m[0])
            if mf == "send":
                if len(m) != 3:
                    raise ModelError(f"send micro-op must be [send, key, value], got {m!r}")
                key, v = freeze(m[1]), freeze(m[2])
                if isinstance(v, tuple) and len(v) == 2:
                    per.setdefault(key, []).append(("send", v[0], v[1]))
                else:
                    per.setdefault(key, []).append(("send", None, v))
            elif mf == "poll":
                if len(m) < 2 or m[1] is None:
                    continue  # an unknown poll result constrains nothing
                polls = m[1]
                if not isinstance(polls, Mapping):
                    raise ModelError(f"poll result must map key -> [[offset, value]...], got {m!r}")
                for key, recs in polls.items():
                    recs = freeze(recs)
                    if not isinstance(recs, tuple) or any(
                            not (isinstance(r, tuple) and len(r) == 2) for r in recs):
                        raise ModelError(f"poll records must be [[offset, value]...], got {recs!r}")
                    per.setdefault(freeze(key), []).append(("poll", recs))
            else:
                raise ModelError(f"unknown micro-op {mf!r} (expected send/poll)")
        return [(k, "txn", tuple(ms)) for k, ms in per.items()]

    def read_only(self, f: str, value: Any) -> bool:
        return all(m[0] == "poll" for m in value)

    def refine(self, key: Any, ops: list) -> list:
        sent = Counter(m[2] for o in ops for m in o.value if m[0] == "send")
        seen: dict[Any, set] = {}
        for o in ops:
            if o.ret is None:
                continue  # a crashed poll's result is unknown
            for m in o.value:
                if m[0] == "poll":
                    for off, v in m[1]:
                        seen.setdefault(v, set()).add(off)
        out = []
        for o in ops:
            if not any(m[0] == "send" and m[1] is None for m in o.value):
                out.append(o)
                continue
            micro = []
            for m in o.value:
                if m[0] == "send" and m[1] is None and sent[m[2]] == 1:
                    offs = seen.get(m[2])
                    if not offs:
                        if self.dense:
                            micro.append(m)  # it may fill a gap: keep last+1
                            continue
                        continue  # never observed: drop (see class docstring)
                    if len(offs) == 1:
                        m = ("send", next(iter(offs)), m[2])
                micro.append(m)
            if not micro or (o.ret is None and all(m[0] == "poll" for m in micro)):
                continue
            o = copy.copy(o)
            o.value = tuple(micro)
            out.append(o)
        return out

    def is_noop(self, f: str, value: Any) -> bool:
        return all(m[0] == "poll" and not m[1] for m in value)

    def step(self, state: Hashable, op: tuple[str, Any]) -> tuple[bool, Hashable]:
        log = state
        for m in op[1]:
            if m[0] == "send":
                off, v = m[1], m[2]
                last = log.off if log is not None else -1
                if off is None:
                    off = last + 1
                elif off <= last or (self.dense and log is not None and off != last + 1):
                    return False, state
                log = LogState(log, off, v)
            elif m[1] and not _log_has_slice(log, m[1]):
                return False, state
        return True, log


class LogState:
    """An immutable log as a chain of appended records (newest first), so a
    send is O(1) and states share structure. The hash is built incrementally
    and equality walks both chains only until they share a node — states
    reached by different linearizations are interned by the search, so equal
    logs usually share everything below the last append."""

    __slots__ = ("prev", "off", "val", "n", "h")

    def __init__(self, prev: "LogState | None", off: Any, val: Any) -> None:
        self.prev = prev
        self.off = off
        self.val = val
        self.n = 1 if prev is None else prev.n + 1
        self.h = hash((None if prev is None else prev.h, off, val))

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        a: Any = self
        b: Any = other
        while a is not b:
            if (a is None or b is None or not isinstance(b, LogState) or a.h != b.h
                    or a.n != b.n or a.off != b.off or a.val != b.val):
                return False
            a, b = a.prev, b.prev
        return True

    def records(self) -> list[tuple[Any, Any]]:
        out = []
        x: Any = self
        while x is not None:
            out.append((x.off, x.val))
            x = x.prev
        return out[::-1]

    def __repr__(self) -> str:
        return f"LogState({self.records()!r})"


def _log_has_slice(log: LogState | None, recs: tuple) -> bool:
    """Are ``recs`` ((offset, value), ...) consecutive entries of ``log``?
    Walks back from the newest record: polls usually read recent data."""
    last_off = recs[-1][0]
    x = log
    while x is not None and x.off > last_off:
        x = x.prev
    for off, val in reversed(recs):
        if x is None or x.off != off or x.val != val:
            return False
        x = x.prev
    return True


MODELS: dict[str, type[Model]] = {
    "register": Register,
    "cas-register": CASRegister,
    "multi-register": MultiRegister,
    "mutex": Mutex,
    "set": SetModel,
    "fifo-queue": FIFOQueue,
    "kv": KV,
    "kafka-log": KafkaLog,
}


def make_model(model: str | Model, **kwargs: Any) -> Model:
    """A model instance from its name (kwargs go to the constructor)."""
    if isinstance(model, Model):
        if kwargs:
            raise ModelError(f"model options {sorted(kwargs)} need a model name, not an instance")
        return model
    try:
        cls = MODELS[model]
    except KeyError:
        raise ModelError(
            f"unknown model {model!r} (expected one of {', '.join(MODELS)})") from None
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ModelError(f"bad options for model {model!r}: {e}") from None

