"""Histories: Jepsen-shaped operation records, loaded from and saved to JSONL
(kraftwerk's own format) and EDN (Jepsen's)."""

from .op import Op, OpType, HistoryError
from .jsonl import read_jsonl, write_jsonl, JsonlWriter

__all__ = ["Op", "OpType", "HistoryError", "read_jsonl", "write_jsonl", "JsonlWriter"]
