"""The history recorder: Jepsen-shaped operations with virtual-time stamps.

``time`` is nanoseconds of virtual time, so a seed's history is byte-identical
on every replay (no wall clock anywhere). Operations are kept in memory for
the checkers and, when a path is given, streamed to ``history.jsonl`` with the
harness's :class:`~checkers.history.JsonlWriter`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Final

import orjson

from checkers.history import JsonlWriter, Op
from checkers.history.jsonl import STR_KEYS_LINE_OPTIONS, encode_fields

#: history lines buffered between flushes to the OS (and between digest updates)
FLUSH_EVERY: Final = 512
#: bound once (compiled, a Final is a static; ``orjson.dumps`` was a module
#: attribute looked up by name on every line)
_dumps: Final = orjson.dumps
_OPTIONS: Final = STR_KEYS_LINE_OPTIONS


class History:
    def __init__(self, path: str | Path | None = None) -> None:
        self.ops: list[Op] = []
        # a seed's history replays byte for byte, so the writer neither
        # fsyncs nor flushes per line; :meth:`close` (the runner's finally)
        # writes the rest
        self._writer = JsonlWriter(path, fsync_every=1 << 30, flush_every=FLUSH_EVERY) if path is not None else None
        self._sha = hashlib.sha256()
        # lines not yet hashed: one update per FLUSH_EVERY lines, where an
        # update per line cost more in call overhead than in hashing
        self._unhashed: list[bytes] = []

    def record(self, vt_ms: int, process: Any, type_: str, f: str, value: Any, error: Any = None,
               extra: dict[str, Any] | None = None) -> Op:
        """Append one operation; ``extra`` holds its other fields (``acks``,
        ``final``, ``node``...), kept by the Op as its own (a dict, not
        ``**kwargs``: the caller's is passed on, not rebuilt)."""
        if extra is None:
            extra = {}
        # by position: Op's generated __init__ parses keywords in Python, a
        # third of the recorder's time
        t = vt_ms * 1_000_000
        index = len(self.ops)
        op = Op(type_, f, value, process, t, index, error, extra)
        self.ops.append(op)
        # encoded once: the line both goes to history.jsonl and feeds the
        # digest. The fields are Op.to_dict's, in its order (a test holds the
        # two together), built here because this runs compiled and to_dict
        # and encode_line do not.
        fields = {"index": index, "time": t, "process": process, "type": type_, "f": f, "value": value}
        if error is not None:
            fields["error"] = error
        if extra:
            fields.update(extra)
        try:
            line = _dumps(fields, option=_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: encode_fields' fallbacks
            line = encode_fields(fields).encode()
        unhashed = self._unhashed
        unhashed.append(line)
        if len(unhashed) >= FLUSH_EVERY:
            self._hash_pending()
        if self._writer is not None:
            self._writer.write_line(line.decode())
        return op

    def _hash_pending(self) -> None:
        self._sha.update(b"".join(self._unhashed))
        self._unhashed.clear()

    def digest(self) -> str:
        """SHA-256 of the history exactly as ``history.jsonl`` spells it (replay checks)."""
        self._hash_pending()
        return self._sha.hexdigest()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
