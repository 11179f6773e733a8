"""Histories: Jepsen-shaped operation records, loaded from and saved to JSONL
(kraftwerk's own format) and EDN (Jepsen's), and invocations paired with
their completions."""

# first: the accelerator's loader goes in before Op (compiled,
# reference_impl.accel) is imported, whoever imports the histories first
import reference_impl as _reference_impl  # noqa: F401,I001  (installs the accelerator)

from .op import Op, OpType, HistoryError
from .jsonl import read_jsonl, write_jsonl, JsonlWriter
from .edn import read_edn, write_edn
from .pairing import Pair, pair, iter_pairs, complete_history

__all__ = [
    "Op", "OpType", "HistoryError", "read_jsonl", "write_jsonl", "JsonlWriter",
    "read_edn", "write_edn", "Pair", "pair", "iter_pairs", "complete_history",
]
