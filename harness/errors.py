"""Exit codes and the exceptions that map to them (ARCHITECTURE.md, CLI contract)."""

from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3
EXIT_HARNESS = 4


class KraftwerkError(Exception):
    """Base: ``str(e)`` is a one-line message for the user."""

    exit_code = EXIT_HARNESS


class UsageError(KraftwerkError):
    """Bad flags, config or input: nothing was started. Exit 2."""

    exit_code = EXIT_USAGE


class HarnessError(KraftwerkError):
    """Something in the harness or the machine failed. Exit 4."""

    exit_code = EXIT_HARNESS


def exit_code_for_valid(valid: object) -> int:
    """Map a results.json ``valid`` field to the process exit code."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN
