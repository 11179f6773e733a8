"""Consoles for the command line's output: a terminal gets rich's usual
width; a pipe, a file or a CI log gets lines as wide as their content, so
a table never cuts a cell's parameters or an anomaly's name at 80 columns
(rich's default width when it cannot ask a terminal)."""

from __future__ import annotations

import sys

from rich.console import Console

#: the width given to a stream that is not a terminal: tables take their
#: natural width below it, and plain lines are never wrapped (soft wrap)
LOG_WIDTH = 1000


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=LOG_WIDTH, soft_wrap=True, highlight=False)
