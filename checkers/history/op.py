"""One history operation, shaped like Jepsen's.

A history is a sequence of operations, each an *invocation* (``type="invoke"``)
later matched by a *completion* from the same process: ``ok`` (it happened),
``fail`` (it definitely did not happen) or ``info`` (indeterminate — it may or
may not have happened, and the process never issues another op).

Fields (JSON keys):

``index``    position in the history, 0-based, dense
``time``     nanoseconds since the start of the test
``process``  an int for client processes, ``"nemesis"`` for faults
``type``     ``invoke | ok | fail | info``
``f``        the function: ``send``, ``poll``, ``txn`` (queue workload),
             ``read``/``write``/``cas`` (registers), ``start-partition``... (nemesis)
``value``    the argument or result
``error``    why a fail/info happened (a string or list), else absent

Any other key is kept in ``extra`` and written back out flat (e.g. ``acks`` on
queue sends: ``"all"``, ``"1"`` or ``"0"``; ``final: true`` on the final reads;
``node`` for nemesis targets).

Queue workload values follow Jepsen's Kafka workload: a list of micro-ops.

* send invoke ``[["send", "t-0", 17]]``, completion ``[["send", "t-0", [42, 17]]]``
  (key = topic-partition, then ``[offset, value]``; an invoke has no offset)
* poll invoke ``[["poll"]]``, completion ``[["poll", {"t-0": [[40, 15], [41, 16]]}]]``
* txn: a list mixing both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES = ("invoke", "ok", "fail", "info")
_CORE = ("index", "time", "process", "type", "f", "value", "error")


class HistoryError(ValueError):
    """Malformed history input; the message names ``file:line`` where known."""


@dataclass(slots=True, init=False)
class Op:
    """One operation. Compiled with the simulator (reference_impl.accel):
    the recorder builds two a simulated operation and every checker reads
    them, so the fields are the object's own slots, read and set natively.
    The constructor is written out, not the dataclass's: compiled, a
    dataclass's generated ``__init__`` is Python code run for every Op
    (~2,800 instructions each). ``extra=None`` is a new empty dict, as the
    default is."""

    type: str
    f: str
    value: Any = None
    process: Any = 0
    time: int = 0
    index: int = -1
    error: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, type: str, f: str, value: Any = None, process: Any = 0, time: int = 0, index: int = -1,
                 error: Any = None, extra: dict[str, Any] | None = None) -> None:
        self.type = type
        self.f = f
        self.value = value
        self.process = process
        self.time = time
        self.index = index
        self.error = error
        self.extra = {} if extra is None else extra

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as the class and its fields in order: one spelling for
        the compiled class (reference_impl.accel) and the dataclass, so an
        Op pickled by a compiled process loads in a pure one and back
        (Spark's workers), where each pickled its own way (a dict of the
        fields; the dataclass's list) and neither read the other's."""
        return (Op, (self.type, self.f, self.value, self.process, self.time, self.index, self.error, self.extra))

    @property
    def is_invoke(self) -> bool:
        return self.type == "invoke"

    @property
    def is_client(self) -> bool:
        return self.process != "nemesis"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        if self.extra:
            d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "") -> "Op":
        try:
            t = d["type"]
            f = d["f"]
        except (KeyError, TypeError):
            raise HistoryError(f"{where}: operation needs 'type' and 'f'") from None
        if t not in OP_TYPES:
            raise HistoryError(f"{where}: type {_short(t)} is not one of invoke/ok/fail/info")
        if type(f) is not str:
            raise HistoryError(f"{where}: f {_short(f)} is not a name")
        process = d.get("process", 0)
        if process is not None and type(process) not in (int, str):
            raise HistoryError(f"{where}: process {_short(process)} is not a number or a string")
        time = d.get("time")
        if type(time) is not int and time is not None:
            raise HistoryError(f"{where}: time {_short(time)} is not an integer (nanoseconds)")
        index = d.get("index")
        if type(index) is not int and index is not None:
            raise HistoryError(f"{where}: index {_short(index)} is not an integer")
        extra = {k: v for k, v in d.items() if k not in _CORE}
        return cls(
            type=t,
            f=f,
            value=d.get("value"),
            process=process,
            time=time or 0,
            index=-1 if index is None else index,
            error=d.get("error"),
            extra=extra,
        )


def _short(x: Any, n: int = 40) -> str:
    s = repr(x)
    return s if len(s) <= n else s[:n - 3] + "..."
