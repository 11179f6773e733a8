"""Tests that need a program the machine can provide.

`scripts/bootstrap` installs every one of them, so in CI (``CI=true``) a
missing program means the set-up is broken: the test fails and says so.
On a developer's machine without it the test is skipped with the same
message, so a partial checkout still runs the rest.
"""

from __future__ import annotations

import os
import shutil

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need_program(name: str, package: str | None = None) -> str:
    """The path of ``name`` on PATH; otherwise fail in CI, skip elsewhere."""
    path = shutil.which(name)
    if path:
        return path
    msg = f"{name} is not installed (Debian package {package or name}; scripts/bootstrap installs it)"
    if in_ci():
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)
