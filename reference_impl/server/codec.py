"""msgpack encoding of the core's message dataclasses for the internal RPC.

A dataclass travels as msgpack extension type 1 whose body is
``[type name, field values...]`` (values encoded recursively); a registry maps
type names to classes. Lists decode as tuples, which is what the frozen message
dataclasses hold; ``bytes`` (a Batch's v2 payload) stay ``bytes``.
"""

from __future__ import annotations

import dataclasses
import inspect
import struct
from types import ModuleType
from typing import Any

import msgpack

from reference_impl.core import messages as _messages
from reference_impl.core import storage as _storage

_EXT_DATACLASS = 1
FRAME = struct.Struct(">I")
#: the largest internal frame accepted (a fetch response carries at most
#: replica.fetch.max.bytes per partition; this leaves plenty of room)
MAX_FRAME = 256 * 1024 * 1024


class CodecError(ValueError):
    pass


class Registry:
    """Type name <-> dataclass, with each class's field names cached."""

    def __init__(self) -> None:
        self.by_name: dict[str, type] = {}
        self.fields: dict[type, tuple[str, ...]] = {}

    def add(self, cls: type) -> type:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a dataclass")
        name = cls.__name__
        prev = self.by_name.get(name)
        if prev is not None and prev is not cls:
            raise ValueError(f"two message classes named {name}")
        self.by_name[name] = cls
        # the init fields: what the constructor takes back (a field it
        # derives, like TopicPartition's cached hash, is not sent)
        self.fields[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
        return cls

    def add_module(self, mod: ModuleType) -> None:
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if dataclasses.is_dataclass(obj) and obj.__module__ == mod.__name__:
                self.add(obj)

    # -- encoding ----------------------------------------------------------

    def _default(self, obj: Any) -> Any:
        cls = type(obj)
        names = self.fields.get(cls)
        if names is None:
            if dataclasses.is_dataclass(obj):
                raise CodecError(f"message type {cls.__name__} is not registered")
            if isinstance(obj, (set, frozenset)):
                return sorted(obj)
            raise CodecError(f"cannot encode {cls.__name__}")
        body = [cls.__name__]
        body.extend(getattr(obj, n) for n in names)
        return msgpack.ExtType(_EXT_DATACLASS, msgpack.packb(body, default=self._default, use_bin_type=True))

    def dumps(self, obj: Any) -> bytes:
        return msgpack.packb(obj, default=self._default, use_bin_type=True)

    # -- decoding ----------------------------------------------------------

    def _ext_hook(self, code: int, data: bytes) -> Any:
        if code != _EXT_DATACLASS:
            raise CodecError(f"unknown extension type {code}")
        body = msgpack.unpackb(data, ext_hook=self._ext_hook, use_list=False, raw=False, strict_map_key=False)
        if not isinstance(body, tuple) or not body or not isinstance(body[0], str):
            raise CodecError("malformed dataclass body")
        cls = self.by_name.get(body[0])
        if cls is None:
            raise CodecError(f"unknown message type {body[0]!r}")
        try:
            return cls(*body[1:])
        except TypeError as e:
            raise CodecError(f"bad fields for {body[0]}: {e}") from None

    def loads(self, data: bytes) -> Any:
        try:
            return msgpack.unpackb(data, ext_hook=self._ext_hook, use_list=False, raw=False, strict_map_key=False)
        except CodecError:
            raise
        except Exception as e:  # msgpack raises several types for garbage
            raise CodecError(f"undecodable frame: {type(e).__name__}: {e}") from None


def default_registry() -> Registry:
    """Every dataclass in ``core/messages.py`` and ``core/storage.py``."""
    reg = Registry()
    reg.add_module(_messages)
    reg.add_module(_storage)
    return reg


REGISTRY = default_registry()


def frame(payload: bytes) -> bytes:
    return FRAME.pack(len(payload)) + payload
