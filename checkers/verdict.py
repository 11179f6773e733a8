"""The one verdict type every checker answers with, and how verdicts combine.

A verdict is ``True`` (valid), ``False`` (an anomaly that counts) or
:data:`UNKNOWN` ("unknown": a budget ran out, or nothing was at stake, so no
claim either way). results.json keeps them as JSON ``true``/``false``/
``"unknown"``; exit codes follow them (0, 1, 3).

Combining is the conjunction of three-valued logic: any ``False`` wins (a
violation found anywhere is a violation of the run, whatever else is
unknown), then any unknown, else ``True``.
"""

from __future__ import annotations

from typing import Any, Final, Iterable, Literal, Union

UNKNOWN: Final = "unknown"
Verdict = Union[bool, Literal["unknown"]]


def combine(verdicts: Iterable[Any]) -> Verdict:
    """``False`` if any is False, else :data:`UNKNOWN` if any is not True
    (unknown, or missing), else ``True``."""
    vs = list(verdicts)
    if any(v is False for v in vs):
        return False
    if any(v is not True for v in vs):
        return UNKNOWN
    return True


def known(v: Any) -> bool:
    """Whether ``v`` decides (True or False)."""
    return v is True or v is False
