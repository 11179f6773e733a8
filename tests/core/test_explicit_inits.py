"""The hot messages, the broker's delayed operations and the metadata and
ISR states a broker makes on every change spell out their
``__init__`` for speed when compiled (see reference_impl.core.messages); each
must stay exactly the one ``@dataclass`` would generate: the declared fields,
in order, by position and by keyword, with the declared defaults, and the
frozen ones still frozen.

The check runs over every message, generated or not, so a field added to a
message without its ``__init__`` being updated fails here whichever kind
the class is."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import sys
import types
import typing
from pathlib import Path

import pytest

from reference_impl.core import messages, metadata, partition_state, producer_state, purgatory
from reference_impl.core.controller import writer
from reference_impl.core.raft import member
from reference_impl.core.messages import (
    Batch,
    FetchPartitionResponse,
    ProduceRequest,
    TopicPartition,
)

ROOT = Path(__file__).resolve().parents[2]
_counter = itertools.count(1)


def sample(tp: typing.Any) -> typing.Any:
    """A fresh, well-typed value of type ``tp`` (a compiled class checks types)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in typing.get_args(tp) if a is not type(None)))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return (sample(args[0]),)
        return tuple(sample(a) for a in args)
    if tp is int:
        return next(_counter)
    if tp is str:
        return f"s{next(_counter)}"
    if tp is bool:
        return True
    if tp is typing.Any:
        return ("opaque", next(_counter))
    if dataclasses.is_dataclass(tp):
        return tp(*[sample(t) for t in _field_types(tp).values()])
    raise TypeError(f"no sample for {tp!r}")


def _field_types(cls: type) -> dict[str, typing.Any]:
    """The declared field types, read from the source: a compiled class's
    ``__annotations__`` keep only the outer runtime type (``tuple``, ``type``)."""
    mod = sys.modules[cls.__module__]
    tree = _SOURCES.setdefault(mod.__name__, ast.parse((ROOT / (mod.__name__.replace(".", "/") + ".py")).read_text()))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    declared = {st.target.id: ast.unparse(st.annotation) for st in node.body
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
    namespace = {**vars(typing), **vars(mod)}
    # the constructor's fields: one it fills itself (TopicPartition's cached hash) is not an argument
    types_ = {f.name: eval(declared[f.name], namespace) for f in dataclasses.fields(cls) if f.init}
    return {n: eval(t, namespace) if isinstance(t, str) else t for n, t in types_.items()}  # a quoted annotation


_SOURCES: dict[str, ast.Module] = {}


MESSAGES = [obj for obj in vars(messages).values()
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == messages.__name__]
CLASSES = [*MESSAGES, producer_state.SequenceCheck, purgatory.DelayedProduce, purgatory.DelayedFetch,
           metadata.BrokerRegistration, metadata.PartitionRegistration, partition_state.IsrState,
           member.Parked, writer.Waiting]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_constructor_takes_exactly_the_declared_fields_in_order(cls):
    types_ = _field_types(cls)
    args = [sample(t) for t in types_.values()]
    by_position, by_keyword = cls(*args), cls(**dict(zip(types_, args)))
    for made in (by_position, by_keyword):
        assert [getattr(made, n) for n in types_] == args
    if cls.__dataclass_params__.eq:
        assert by_position == by_keyword  # the dataclass's own __eq__, over the same fields


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_omitted_arguments_take_the_declared_defaults(cls):
    fields = [f for f in dataclasses.fields(cls) if f.init]
    types_ = _field_types(cls)
    required = [sample(types_[f.name]) for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    made = cls(*required)
    for f in fields:
        if f.default is not dataclasses.MISSING:
            assert getattr(made, f.name) == f.default, f"{cls.__name__}.{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            assert getattr(made, f.name) == f.default_factory(), f"{cls.__name__}.{f.name}"


@pytest.mark.parametrize("cls", [c for c in CLASSES if c.__dataclass_params__.frozen], ids=lambda c: c.__name__)
def test_frozen_messages_stay_frozen_with_an_explicit_init(cls):
    made = sample(cls)
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, name, getattr(made, name))


def test_a_metadata_delta_starts_with_sets_of_its_own_or_takes_the_ones_given():
    """metadata.Delta spells out its __init__: each field a fresh set, as its
    ``default_factory=set`` made it, unless given."""
    a, b = metadata.Delta(), metadata.Delta()
    assert a == b == metadata.Delta(set(), set(), set())
    a.partitions.add(TopicPartition("t", 0))
    a.brokers.add(1)
    a.topics.add("t")
    assert b.partitions == set() and b.brokers == set() and b.topics == set()
    given = {2}
    assert metadata.Delta(brokers=given).brokers is given and metadata.Delta(brokers=given).topics == set()


def test_frozen_messages_keep_value_equality_and_hashing():
    tp = TopicPartition("t", 0)
    a = ProduceRequest("ref", tp, -1, 1, ("v",), producer_id=7)
    b = ProduceRequest(ref="ref", tp=tp, acks=-1, count=1, payload=("v",), producer_id=7)
    assert a == b and hash(a) == hash(b)
    assert a != ProduceRequest("ref", tp, -1, 1, ("v",), producer_id=8)
    assert FetchPartitionResponse(tp, 0).batches == () and Batch(0, 1, 2, None).next_offset == 2


def test_topic_partition_compares_orders_and_hashes_as_its_field_tuple() -> None:
    """TopicPartition spells out __eq__, __hash__ and the orderings (compiled,
    they are no longer interpreted calls on every dict lookup); they must
    mean what dataclass(eq=True, order=True) meant: its (topic, partition)."""
    parts = [TopicPartition(t, p) for t in ("a", "b", "t-1") for p in (0, 1, 10)]
    for x, y in itertools.product(parts, repeat=2):
        tx, ty = (x.topic, x.partition), (y.topic, y.partition)
        assert (x == y, x != y, x < y, x <= y, x > y, x >= y) == (tx == ty, tx != ty, tx < ty, tx <= ty, tx > ty, tx >= ty)
        assert (hash(x) == hash(y)) == (tx == ty)
    twin = TopicPartition("a", 1)
    assert hash(twin) == hash(("a", 1)) & messages._HASH_MASK and {TopicPartition("a", 1): "x"}[twin] == "x"
    assert repr(twin) == "TopicPartition(topic='a', partition=1)"  # the cached hash and name are no part of its value
    assert str(twin) == "a-1" and str(TopicPartition("t-1", 10)) == "t-1-10"
    assert sorted(reversed(parts)) == parts
    assert (twin == ("a", 1)) is False and (twin != ("a", 1)) is True
    with pytest.raises(TypeError):
        twin < ("a", 2)  # noqa: B015 - the comparison itself must raise
    with pytest.raises(dataclasses.FrozenInstanceError):
        twin.partition = 2  # type: ignore[misc]


def test_topic_partition_hash_is_its_tuples_hash_in_a_compiled_short_int() -> None:
    """The cached hash keeps the low bits of hash((topic, partition)), within
    mypyc's unboxed int range (63-bit signed), so the compiled ``__hash__``
    converts no heap int on every dict lookup (messages.TopicPartition)."""
    tps = [TopicPartition(t, p) for t in ("orders", "queue", "__consumer_offsets", "t-1") for p in range(50)]
    for tp in tps:
        h = hash(tp)
        assert -(1 << 62) <= h < (1 << 62), tp
        assert h == hash((tp.topic, tp.partition)) & ((1 << 61) - 1)
        assert {tp: 1}[TopicPartition(tp.topic, tp.partition)] == 1
