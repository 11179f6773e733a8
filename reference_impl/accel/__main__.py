"""``python -m reference_impl.accel build|status``"""

from __future__ import annotations

import sys

from . import ACCEL_DIR, check


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cmd = args[0] if args else "status"
    if cmd == "build":
        try:
            from .build import build

            build()
        except Exception as e:  # noqa: BLE001 - the accelerator is optional: say why, exit 1
            print(f"accel: build failed, the Python source will run: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        _, why = check()
        print(f"accel: built into {ACCEL_DIR} ({why})")
        return 0 if why == "compiled" else 1
    if cmd == "status":
        _, why = check()
        print(why)
        return 0
    print("usage: python -m reference_impl.accel build|status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
