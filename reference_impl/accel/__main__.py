"""``python -m reference_impl.accel build [--force] | status``

``status`` prints the state of the build in ``.accel/`` (``compiled`` when it
matches the sources, else ``pure: <why>``), whatever ``KRAFTWERK_PURE`` says
for this process (that is noted on stderr). ``build`` compiles unless a fresh
build is there (``--force``: always); exit 1 if it fails (the source runs).
"""

from __future__ import annotations

import sys

from . import ACCEL_DIR, ENV_PURE, check, pure_requested
from .build import build

USAGE = "usage: python -m reference_impl.accel build [--force] | status"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cmd, rest = (args[0], args[1:]) if args else ("status", [])
    if cmd == "build" and rest in ([], ["--force"]):
        try:
            build(force=bool(rest))
        except Exception as e:  # noqa: BLE001 - the accelerator is optional: say why, exit 1
            print(f"accel: build failed, the Python source will run: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        _, why = check(env=False)
        print(f"accel: built into {ACCEL_DIR} ({why})")
        return 0 if why == "compiled" else 1
    if cmd == "status" and not rest:
        _, why = check(env=False)
        print(why)
        if pure_requested():
            print(f"accel: {ENV_PURE} is set: processes with it run the Python source", file=sys.stderr)
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
