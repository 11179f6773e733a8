"""Where ``../shared`` (the read-only material beside the repository) is.

CI clones the repository with ``shared/`` beside it, so paths are resolved
relative to this checkout; ``KRAFTWERK_SHARED`` overrides. The corpus must
exist: a test over an empty glob would pass without checking anything.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("KRAFTWERK_SHARED", Path(__file__).resolve().parents[2] / "shared"))
KNOSSOS = SHARED / "data" / "knossos"

if not KNOSSOS.is_dir():
    raise RuntimeError(f"the Knossos corpus is missing at {KNOSSOS} (set KRAFTWERK_SHARED)")
